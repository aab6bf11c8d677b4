"""A thread-safe least-recently-used map with a fixed number of entries, keyed by content hashes.

Grades of one pair do not depend on what else is graded with it (see :mod:`grader.session_pool`), so a
(query, text) pair seen before can reuse its score exactly: within one corrective run (a strip that is a
whole chunk, chunks found again by a broader search) and, bounded, across runs.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Iterable
from typing import Generic, TypeVar

from models.errors import ConfigError

__all__ = ["BoundedCache", "content_key"]

V = TypeVar("V")


def content_key(*parts: str) -> bytes:
    """A 16-byte digest of the parts (unambiguous: each part's length is hashed with it)."""
    digest = hashlib.blake2b(digest_size=16)
    for part in parts:
        data = part.encode("utf-8", "surrogatepass")
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.digest()


class BoundedCache(Generic[V]):
    """At most ``max_items`` values; the least recently used one goes first. ``max_items=0`` stores nothing."""

    def __init__(self, max_items: int) -> None:
        if not isinstance(max_items, int) or isinstance(max_items, bool) or max_items < 0:
            raise ConfigError(f"cache size must be an int >= 0 (0 turns the cache off), got {max_items!r}")
        self.max_items = max_items
        self._items: OrderedDict[bytes, V] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: bytes) -> V | None:
        with self._lock:
            value = self._items.get(key)
            if value is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return value

    def put_many(self, items: Iterable[tuple[bytes, V]]) -> None:
        if not self.max_items:
            return
        with self._lock:
            for key, value in items:
                self._items[key] = value
                self._items.move_to_end(key)
            while len(self._items) > self.max_items:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)

    def stats(self) -> dict[str, int]:
        return {"entries": len(self._items), "max_entries": self.max_items, "hits": self.hits, "misses": self.misses}
