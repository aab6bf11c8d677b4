"""``crag index migrate``: an index folder of the old file format (chunks.jsonl + vectors.npy) into SQLite.

The stored vectors are reused (nothing is re-embedded), the embedder name is carried over, and the old
files are kept, renamed with a ``.migrated`` suffix, so nothing stored is lost.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from models.errors import DataError
from pipeline.retrieval.documents import StoredChunk
from pipeline.retrieval.index import LocalHybridIndex
from pipeline.retrieval.sqlite_db import DB_NAME

__all__ = ["LEGACY_FILES", "migrate_file_index"]

LEGACY_FILES = ("chunks.jsonl", "vectors.npy", "index.json")


class _StoredVectors:
    """Hands the index the vectors the old format stored, by text, under the embedder name it recorded."""

    def __init__(self, name: str, by_text: dict[str, np.ndarray]) -> None:
        self.name = name
        self._by_text = by_text

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([self._by_text[t] for t in texts])


def migrate_file_index(root: str | Path) -> dict[str, Any]:
    """Migrate ``root`` in place; returns the new index's stats."""
    root = Path(root)
    if (root / DB_NAME).is_file():
        raise DataError(f"{root} already holds {DB_NAME}; nothing to migrate")
    if not (root / "chunks.jsonl").is_file():
        raise DataError(f"{root} has no chunks.jsonl: it is not an index of the old file format")
    try:
        lines = (root / "chunks.jsonl").read_text(encoding="utf-8").splitlines()
        chunks = [StoredChunk.from_dict(json.loads(line)) for line in lines if line.strip()]
        vectors = np.load(root / "vectors.npy")
        meta = json.loads((root / "index.json").read_text(encoding="utf-8")) if (root / "index.json").is_file() else {}
    except (OSError, ValueError, TypeError) as exc:
        raise DataError(f"index {root} is unreadable ({exc}); rebuild it from the documents with `crag index add`") \
            from exc
    if len(chunks) != len(vectors):
        raise DataError(f"index {root} is inconsistent ({len(chunks)} chunks, {len(vectors)} vectors); rebuild it "
                        "from the documents with `crag index add`")
    staging = root / ".migrating"
    shutil.rmtree(staging, ignore_errors=True)
    embedder = _StoredVectors(meta.get("embedder") or "all-MiniLM-L6-v2",
                              {c.text: v for c, v in zip(chunks, vectors, strict=True)})
    staged = LocalHybridIndex(staging, embedder=embedder)
    staged.write(chunks)
    staged.close()
    (staging / DB_NAME).replace(root / DB_NAME)
    shutil.rmtree(staging, ignore_errors=True)
    for name in LEGACY_FILES:
        if (root / name).is_file():
            (root / name).replace(root / f"{name}.migrated")
    return LocalHybridIndex(root).stats()
