"""API keys for the service: each maps to a tenant and roles; only a SHA-256 of the key is stored.

A key reads ``crag_<key id>_<secret>``. The id (not secret) finds the record; the whole key is compared
against the stored hash in constant time. Keys are 256-bit random tokens, so a fast hash is the
standard choice (as for GitHub or Stripe tokens); a slow password hash would add latency and no safety.
The store is a JSON file written atomically; a corrupt file is an error, never an empty store.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from models.errors import ConfigError, DataError
from pipeline.retrieval.documents import Principal

__all__ = ["ApiKey", "KeyStore"]

KEY_FORMAT = re.compile(r"^crag_([0-9a-f]{12})_[A-Za-z0-9_-]{20,}$")


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@dataclass(frozen=True, kw_only=True)
class ApiKey:
    key_id: str
    sha256: str
    tenant: str
    roles: frozenset[str] = frozenset()
    rate_per_minute: int | None = None
    label: str = ""
    created: str = ""
    revoked: bool = False

    @property
    def principal(self) -> Principal:
        return Principal(tenant=self.tenant, roles=self.roles)

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "roles": sorted(self.roles)}


@dataclass
class KeyStore:
    """Keys in a JSON file; ``create`` returns the only copy of the plain key."""

    path: Path
    keys: dict[str, ApiKey] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _mtime: float = 0.0

    def __post_init__(self) -> None:
        self._mtime = self._stat()

    def _stat(self) -> float:
        try:
            return self.path.stat().st_mtime_ns / 1e9
        except OSError:
            return 0.0

    def refresh(self) -> None:
        """Re-read the file when another process (``crag keys``) changed it: revocations apply without a restart.
        A file that became unreadable keeps the keys already loaded (and logs nothing secret)."""
        mtime = self._stat()
        if mtime == self._mtime or not mtime:
            return
        try:
            fresh = KeyStore.open(self.path)
        except (ConfigError, DataError):
            return
        with self._lock:
            self.keys, self._mtime = fresh.keys, mtime

    @classmethod
    def open(cls, path: str | Path, *, create: bool = False) -> KeyStore:
        path = Path(path)
        if not path.is_file():
            if create:
                return cls(path)
            raise ConfigError(f"no API key store at {path}; create a key with `crag keys create --store {path} "
                              "--tenant NAME`")
        try:
            records = json.loads(path.read_text(encoding="utf-8"))["keys"]
            keys = {r["key_id"]: ApiKey(**{**r, "roles": frozenset(r.get("roles") or ())}) for r in records}
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise DataError(f"{path}: not a valid API key store ({exc}); restore it from a backup") from exc
        return cls(path, keys)

    def create(self, tenant: str, *, roles: frozenset[str] = frozenset(), rate_per_minute: int | None = None,
               label: str = "") -> str:
        if not tenant or not re.fullmatch(r"[\w.-]{1,64}", tenant):
            raise ConfigError(f"tenant must be 1-64 letters, digits, '.', '_' or '-', got {tenant!r}")
        if rate_per_minute is not None and rate_per_minute < 1:
            raise ConfigError(f"rate_per_minute must be >= 1, got {rate_per_minute}")
        key_id = secrets.token_hex(6)
        token = f"crag_{key_id}_{secrets.token_urlsafe(32)}"
        with self._lock:
            self.keys[key_id] = ApiKey(key_id=key_id, sha256=_digest(token), tenant=tenant, roles=roles,
                                       rate_per_minute=rate_per_minute, label=label,
                                       created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
            self._save()
        return token

    def revoke(self, key_id: str) -> None:
        with self._lock:
            if key_id not in self.keys:
                raise ConfigError(f"no key with id {key_id!r}; `crag keys list --store {self.path}` shows them")
            old = self.keys[key_id]
            self.keys[key_id] = ApiKey(**{**old.__dict__, "revoked": True})
            self._save()

    def authenticate(self, token: str | None) -> ApiKey | None:
        """The key's record, or None for a missing, malformed, unknown, revoked or wrong key."""
        match = KEY_FORMAT.match(token or "")
        if not match:
            return None
        self.refresh()
        record = self.keys.get(match.group(1))
        if record is None or record.revoked or not hmac.compare_digest(record.sha256, _digest(token or "")):
            return None
        return record

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(self.path.suffix + ".tmp")
        tmp.write_text(json.dumps({"keys": [k.to_dict() for k in self.keys.values()]}, indent=2) + "\n",
                       encoding="utf-8")
        os.chmod(tmp, 0o600)
        tmp.replace(self.path)
        self._mtime = self._stat()
