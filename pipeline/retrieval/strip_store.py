"""The index's optional store of sentence-strip vectors (``strip_vectors`` table, one row per chunk and strip).

With it, the corrective loop's refinement reads each strip's bi-encoder vector from the index instead of
embedding every sentence of every kept chunk at question time (a fused grader needs the cosine of each
strip it grades). It costs one float32 vector per sentence on disk (about 1.5 KB each, roughly 4-8 times
the chunk vectors) and embedding time at indexing, so an index has it only when asked for
(``crag index add --strip-vectors``); once on, every later write keeps it up to date. A table's record has no
strips of its own: refinement reads it whole, by the chunk's own vector.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from grader.bounded_cache import content_key
from pipeline.retrieval.documents import is_record_metadata
from pipeline.retrieval.strips import sentence_strips

__all__ = ["META_KEY", "backfill", "embed_strips", "enabled", "existing_strip_vectors", "missing_strips", "share",
           "store"]

META_KEY = "strip_vectors"
Embed = Callable[[Sequence[str]], list[np.ndarray]]


def enabled(meta: dict[str, str]) -> bool:
    return meta.get(META_KEY) == "1"


def missing_strips(texts: Iterable[str], have: dict[bytes, np.ndarray]) -> list[str]:
    """The distinct strips of ``texts`` whose vectors are not in ``have`` yet, in first-seen order."""
    seen: dict[bytes, str] = {}
    for text in texts:
        for strip in sentence_strips(text):
            key = content_key(strip)
            if key not in have and key not in seen:
                seen[key] = strip
    return list(seen.values())


def embed_strips(texts: Iterable[str], have: dict[bytes, np.ndarray], embed: Embed) -> dict[bytes, np.ndarray]:
    """Add to ``have`` the vectors of the strips of ``texts`` it lacks (embedded in one call); returns it."""
    todo = missing_strips(texts, have)
    if todo:
        have.update(zip((content_key(s) for s in todo), embed(todo), strict=True))
    return have


def existing_strip_vectors(conn: Any, tenant: str, chunk_id: str) -> dict[bytes, np.ndarray]:
    """The stored strip vectors of a chunk (kept when only its roles or metadata change)."""
    rows = conn.execute("SELECT s.key, s.vector FROM strip_vectors s JOIN chunks c ON c.rowid = s.chunk "
                        "WHERE c.tenant = ? AND c.chunk_id = ?", (tenant, chunk_id)).fetchall()
    return {bytes(k): np.frombuffer(v, dtype=np.float32) for k, v in rows}


def store(conn: Any, rowid: int, text: str, vectors: dict[bytes, np.ndarray]) -> None:
    """Write the vectors of the chunk's strips (every one must be in ``vectors``)."""
    keys = {content_key(s) for s in sentence_strips(text)}
    conn.executemany("INSERT OR REPLACE INTO strip_vectors (chunk, key, vector) VALUES (?, ?, ?)",
                     [(rowid, key, vectors[key].astype(np.float32).tobytes()) for key in sorted(keys)])


def backfill(conn: Any, embed: Embed) -> int:
    """Vectors for the strips of every stored chunk that has none yet (a table's record has none of its own: it is
    refined whole); returns how many chunks were filled."""
    rows = [(rowid, text) for rowid, text, metadata in conn.execute(
        "SELECT rowid, text, metadata FROM chunks WHERE rowid NOT IN (SELECT DISTINCT chunk FROM strip_vectors)")
        if not is_record_metadata(json.loads(metadata or "{}"))]
    vectors = embed_strips((text for _, text in rows), {}, embed)
    for rowid, text in rows:
        store(conn, rowid, text, vectors)
    return len(rows)


def share(conn: Any, rowids: Sequence[int], cache: Any) -> None:
    """Put the strip vectors of these chunks into an embedding cache (keys are the strips' content keys)."""
    if not rowids:
        return
    rows = conn.execute(f"SELECT key, vector FROM strip_vectors WHERE chunk IN ({','.join('?' * len(rowids))})",
                        list(rowids)).fetchall()
    cache.put_many((bytes(k), np.frombuffer(v, dtype=np.float32)) for k, v in rows)
