"""API keys for the service: each maps to a tenant and roles; only a SHA-256 of the key is stored.

A key reads ``crag_<key id>_<secret>``. The id (not secret) finds the record; the whole key is compared
against the stored hash in constant time. Keys are 256-bit random tokens, so a fast hash is the
standard choice (as for GitHub or Stripe tokens); a slow password hash would add latency and no safety.
The store is a JSON file written atomically under a file lock; a corrupt or missing file is an error,
never an empty store, and a running service refuses requests (fails closed) until it is valid again.
"""

from __future__ import annotations

import fcntl
import hashlib
import hmac
import json
import logging
import os
import re
import secrets
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from models.errors import ConfigError, CragError, DataError
from pipeline.retrieval.documents import Principal, check_name, check_roles

__all__ = ["ApiKey", "KeyStore", "KeyStoreUnavailable"]

logger = logging.getLogger(__name__)


class KeyStoreUnavailable(CragError):
    """The key store is missing or corrupt: every request is refused until it is back."""

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
    writer: bool = False  # may add, replace, list and delete its tenant's documents (``/v1/documents``)

    @property
    def principal(self) -> Principal:
        return Principal(tenant=self.tenant, roles=self.roles)

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "roles": sorted(self.roles)}


@dataclass
class KeyStore:
    """Keys in a JSON file; ``create`` returns the only copy of the plain key.

    Writers (``crag keys create`` / ``revoke`` in any number of processes) hold an exclusive lock on
    ``<store>.lock`` around read-modify-write and write through a unique temporary file, so no key is lost
    and no revocation undone. A running service re-reads the file when it changes and *fails closed*: if the
    file disappears or stops parsing, ``authenticate`` raises :class:`KeyStoreUnavailable` (the service
    answers 503 and ``/readyz`` says why) until a valid store is back; the old keys never keep working."""

    path: Path
    keys: dict[str, ApiKey] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _mtime: float = 0.0
    problem: str | None = None

    def __post_init__(self) -> None:
        self._mtime = self._stat()

    def _stat(self) -> float:
        try:
            return self.path.stat().st_mtime_ns / 1e9
        except OSError:
            return 0.0

    def refresh(self) -> None:
        """Re-read the file when another process changed it: new keys and revocations apply without a restart;
        a missing or unreadable file marks the store unavailable (logged once, nothing secret)."""
        mtime = self._stat()
        if mtime and mtime == self._mtime and self.problem is None:
            return
        if not mtime:
            if self._mtime or self.keys:  # it existed: deleted or moved away
                self._fail(f"the API key store {self.path} is missing")
            return
        try:
            fresh = KeyStore.open(self.path)
        except (ConfigError, DataError) as exc:
            self._fail(str(exc))
            self._mtime = mtime
            return
        with self._lock:
            self.keys, self._mtime = fresh.keys, mtime
            if self.problem is not None:
                logger.warning("API key store %s is valid again; accepting requests", self.path)
            self.problem = None

    def _fail(self, problem: str) -> None:
        if self.problem != problem:
            logger.error("refusing every request until the key store is fixed: %s", problem)
        self.problem = problem

    @classmethod
    def open(cls, path: str | Path, *, create: bool = False) -> KeyStore:
        path = Path(path)
        if not path.is_file():
            if create:
                return cls(path)
            raise ConfigError(f"no API key store at {path}; create a key with `crag keys create --store {path} "
                              "--tenant NAME`")
        return cls(path, _read(path))

    def create(self, tenant: str, *, roles: frozenset[str] = frozenset(), rate_per_minute: int | None = None,
               label: str = "", writer: bool = False) -> str:
        check_name("tenant", tenant)
        roles = check_roles(roles)  # "admin" alone would be stored as the roles a, d, i, m, n
        if rate_per_minute is not None and (isinstance(rate_per_minute, bool) or not isinstance(rate_per_minute, int)
                                            or rate_per_minute < 1):
            raise ConfigError(f"rate_per_minute must be an int >= 1 or None, got {rate_per_minute!r}")
        if not isinstance(writer, bool):  # a truthy "no" would grant writes, and the store would no longer load
            raise ConfigError(f"writer must be True or False, got {writer!r}")
        if not isinstance(label, str):
            raise ConfigError(f"label must be a string, got {type(label).__name__} {label!r:.80}")
        key_id = secrets.token_hex(6)
        token = f"crag_{key_id}_{secrets.token_urlsafe(32)}"
        record = ApiKey(key_id=key_id, sha256=_digest(token), tenant=tenant, roles=roles,
                        rate_per_minute=rate_per_minute, label=label, writer=writer,
                        created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        with self._locked():
            self.keys[key_id] = record
            self._save()
        return token

    def revoke(self, key_id: str) -> None:
        with self._locked():
            if key_id not in self.keys:
                raise ConfigError(f"no key with id {key_id!r}; `crag keys list --store {self.path}` shows them")
            old = self.keys[key_id]
            self.keys[key_id] = ApiKey(**{**old.__dict__, "revoked": True})
            self._save()

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """This process's lock and the store's file lock, with the store re-read under them."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock, open(self.path.with_suffix(self.path.suffix + ".lock"), "a") as lock_file:
            fcntl.flock(lock_file, fcntl.LOCK_EX)
            try:
                if self.path.is_file():
                    self.keys = _read(self.path)
                yield
            finally:
                fcntl.flock(lock_file, fcntl.LOCK_UN)

    def authenticate(self, token: str | None) -> ApiKey | None:
        """The key's record, or None for a missing, malformed, unknown, revoked or wrong key."""
        match = KEY_FORMAT.match(token or "")
        if not match:
            return None
        self.refresh()
        if self.problem is not None:
            raise KeyStoreUnavailable(f"API keys cannot be checked right now ({self.problem}); retry later")
        record = self.keys.get(match.group(1))
        if record is None or record.revoked or not hmac.compare_digest(record.sha256, _digest(token or "")):
            return None
        return record

    def _save(self) -> None:
        """Write through a unique temporary file in the same folder, then rename over the store."""
        payload = json.dumps({"keys": [k.to_dict() for k in self.keys.values()]}, indent=2) + "\n"
        fd, tmp = tempfile.mkstemp(prefix=self.path.name + ".", suffix=".tmp", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(payload)
            os.chmod(tmp, 0o600)
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        self._mtime = self._stat()


def _read(path: Path) -> dict[str, ApiKey]:
    try:
        records = json.loads(path.read_text(encoding="utf-8"))["keys"]
        keys = {r["key_id"]: ApiKey(**{**r, "roles": frozenset(r.get("roles") or ())}) for r in records}
        if any(not isinstance(k.writer, bool) or not isinstance(k.revoked, bool) for k in keys.values()):
            raise TypeError("'writer' and 'revoked' must be true or false")  # never a truthy string granting writes
        return keys
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DataError(f"{path}: not a valid API key store ({type(exc).__name__}); restore it from a backup") \
            from exc
