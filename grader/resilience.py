"""Retry with exponential backoff and a circuit breaker for calls to outside services."""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass

from models.errors import ConfigError
from models.field_types import check_field_types

__all__ = ["CircuitBreaker", "RetryPolicy", "check_http_url"]


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    """``attempts`` tries in all; waits ``base_s * 2**k`` (capped, with jitter) between them."""

    attempts: int = 3
    base_s: float = 0.25
    cap_s: float = 4.0
    jitter: float = 0.25

    def __post_init__(self) -> None:
        check_field_types(self)
        if self.attempts < 1 or self.base_s < 0 or self.cap_s < 0 or not 0 <= self.jitter <= 1:
            raise ConfigError(f"invalid RetryPolicy {self}: attempts >= 1, base_s/cap_s >= 0, jitter in [0, 1]")

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait after failed try number ``attempt`` (0-based); honours Retry-After if given."""
        if retry_after is not None:
            return min(self.cap_s, max(0.0, retry_after))
        wait = min(self.cap_s, self.base_s * (2**attempt))
        return wait * (1 + self.jitter * (2 * random.random() - 1))


class CircuitBreaker:
    """Opens after ``failures`` consecutive failures; after ``reset_s`` lets exactly one trial call through
    (half-open). The trial's success closes the breaker; its failure re-opens it for another ``reset_s``.
    Callers that arrive while the trial is out are refused as if the breaker were open."""

    def __init__(self, failures: int = 5, reset_s: float = 30.0) -> None:
        if failures < 1 or reset_s < 0:
            raise ConfigError(f"CircuitBreaker needs failures >= 1 and reset_s >= 0, got {failures}, {reset_s}")
        self.failures = failures
        self.reset_s = reset_s
        self._count = 0
        self._opened_at: float | None = None
        self._trial_out = False
        self._trial_at = 0.0
        self._lock = threading.Lock()

    @property
    def state(self) -> str:
        with self._lock:
            return self._state()

    def _state(self) -> str:
        if self._opened_at is None:
            return "closed"
        return "half-open" if time.monotonic() - self._opened_at >= self.reset_s else "open"

    def allow(self) -> bool:
        """True when a call may go out now (in half-open state: only the first caller, the trial)."""
        with self._lock:
            state = self._state()
            if state == "closed":
                return True
            # a trial that never reported back (its caller gave up before calling) expires after reset_s
            if state == "half-open" and (not self._trial_out or time.monotonic() - self._trial_at >= self.reset_s):
                self._trial_out, self._trial_at = True, time.monotonic()
                return True
            return False

    def record_success(self) -> None:
        with self._lock:
            self._count = 0
            self._opened_at = None
            self._trial_out = False

    def record_failure(self) -> None:
        with self._lock:
            self._count += 1
            if self._trial_out or self._count >= self.failures:
                self._opened_at = time.monotonic()
                self._trial_out = False


def check_http_url(url: str, what: str, example: str) -> str:
    """``url`` when it is an http:// or https:// URL (any case), else a ConfigError naming ``what`` and an
    ``example``: an outside system's endpoint without a scheme fails every call, each retried, long after start-up."""
    if not url.lower().startswith(("http://", "https://")):
        raise ConfigError(f"{what} must be an http:// or https:// URL such as {example}, got {url!r}")
    return url
