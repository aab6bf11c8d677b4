"""Per-key token-bucket rate limiting for the service (in-process; each worker limits its own share)."""

from __future__ import annotations

import threading
import time

from models.errors import ConfigError

__all__ = ["RateLimiter"]


class RateLimiter:
    """``rate_per_minute`` sustained, bursts up to ``burst``; ``acquire`` returns seconds to wait (0 = allowed)."""

    def __init__(self, rate_per_minute: int, *, burst: int | None = None) -> None:
        if rate_per_minute < 1:
            raise ConfigError(f"rate_per_minute must be >= 1, got {rate_per_minute}")
        self.rate = rate_per_minute / 60.0
        self.burst = float(burst if burst is not None else max(1, rate_per_minute // 6))
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def acquire(self, key: str, *, rate_per_minute: int | None = None) -> float:
        rate = rate_per_minute / 60.0 if rate_per_minute else self.rate
        burst = max(1.0, rate_per_minute / 6) if rate_per_minute else self.burst
        now = time.monotonic()
        with self._lock:
            tokens, last = self._buckets.get(key, (burst, now))
            tokens = min(burst, tokens + (now - last) * rate)
            if tokens >= 1.0:
                self._buckets[key] = (tokens - 1.0, now)
                return 0.0
            self._buckets[key] = (tokens, now)
            return (1.0 - tokens) / rate
