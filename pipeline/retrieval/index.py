"""An embedded hybrid index (BM25 + dense MiniLM embeddings, rank-fused) that persists to a directory.

Permissions are enforced inside the index: ``search`` scores only the chunks the principal may read,
so a grader or LLM downstream never sees anything else. ``hidden_matches`` answers only "are there
matching chunks this principal cannot see?" (a count, no content), which lets the pipeline say
"access denied" instead of "no answer" without leaking what the documents say.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from models.deps import require
from models.errors import ConfigError, DataError
from pipeline.retrieval.documents import Principal, StoredChunk
from pipeline.retrieval.embedding import Embedder, default_embedder

__all__ = ["LocalHybridIndex", "Retriever", "query_tokens"]

RRF_K = 60
MIN_BM25 = 1e-9


class Retriever(Protocol):
    """What the orchestrator needs from a store; plug in your own (Qdrant, Elasticsearch...)."""

    def search(self, query: str, principal: Principal, *, k: int = 8,
               filters: dict[str, Any] | None = None) -> list[tuple[StoredChunk, float]]: ...

    def hidden_matches(self, query: str, principal: Principal) -> int: ...


def _tokenize(texts: Sequence[str]) -> Any:
    bm25s = require("bm25s", "rag")
    return bm25s.tokenize(list(texts), stopwords="en", show_progress=False)


def query_tokens(query: str) -> list[str]:
    """The BM25 tokens of a text (lower-cased, English stop words removed)."""
    tokenized: list[list[str]] = require("bm25s", "rag").tokenize(
        [query], stopwords="en", show_progress=False, return_ids=False)
    return tokenized[0]


class LocalHybridIndex:
    """Chunks + embeddings on disk; BM25 rebuilt at load (seconds for ~100k chunks)."""

    def __init__(self, root: str | Path, embedder: Embedder | None = None) -> None:
        self.root = Path(root)
        self._embedder = embedder
        self.chunks: list[StoredChunk] = []
        self.vectors = np.zeros((0, 384), dtype=np.float32)
        self._bm25: Any = None
        self._built_with: str | None = None
        if (self.root / "chunks.jsonl").is_file():
            self._load()

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            embedder = default_embedder()
            if self._built_with and self._built_with != embedder.name:
                raise DataError(f"index {self.root} was built with the embedder {self._built_with!r}; pass it as "
                                f"embedder= (the default is {embedder.name!r}) or rebuild the index")
            self._embedder = embedder
        return self._embedder

    def _load(self) -> None:
        try:
            lines = (self.root / "chunks.jsonl").read_text(encoding="utf-8").splitlines()
            self.chunks = [StoredChunk.from_dict(json.loads(line)) for line in lines if line.strip()]
            self.vectors = np.load(self.root / "vectors.npy")
        except (OSError, ValueError, TypeError) as exc:
            raise DataError(f"index {self.root} is unreadable ({exc}); rebuild it with `crag index add`") from exc
        if len(self.chunks) != len(self.vectors):
            raise DataError(f"index {self.root} is inconsistent: {len(self.chunks)} chunks, {len(self.vectors)} "
                            "vectors; rebuild it")
        meta_file = self.root / "index.json"
        self._built_with = json.loads(meta_file.read_text(encoding="utf-8")).get("embedder") \
            if meta_file.is_file() else None
        if self._embedder is not None and self._built_with and self._built_with != self._embedder.name:
            raise DataError(f"index {self.root} was built with the embedder {self._built_with!r}, not "
                            f"{self._embedder.name!r}: its vectors are not comparable; rebuild it or use that embedder")
        self._rebuild_bm25()

    def _rebuild_bm25(self) -> None:
        if not self.chunks:
            self._bm25 = None
            return
        bm25s = require("bm25s", "rag")
        self._bm25 = bm25s.BM25()
        self._bm25.index(_tokenize([f"{c.title}\n{c.text}" for c in self.chunks]), show_progress=False)

    def add(self, chunks: Iterable[StoredChunk]) -> int:
        """Add chunks (same chunk_id replaces), embed them and persist; returns how many were added."""
        new = list(chunks)
        if not new:
            return 0
        ids = {c.chunk_id for c in new}
        keep = [i for i, c in enumerate(self.chunks) if c.chunk_id not in ids]
        vectors = self.embedder.embed([c.text for c in new])
        self.chunks = [self.chunks[i] for i in keep] + new
        self.vectors = np.vstack([self.vectors[keep], vectors]) if keep else vectors
        self._rebuild_bm25()
        self.save()
        return len(new)

    def save(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.root / "chunks.jsonl.tmp"
        tmp.write_text("".join(json.dumps(c.to_dict(), ensure_ascii=False) + "\n" for c in self.chunks),
                       encoding="utf-8")
        np.save(self.root / "vectors.tmp.npy", self.vectors)
        (self.root / "index.json").write_text(json.dumps({"embedder": self.embedder.name, "format": 1}) + "\n",
                                              encoding="utf-8")
        (self.root / "vectors.tmp.npy").replace(self.root / "vectors.npy")
        tmp.replace(self.root / "chunks.jsonl")

    def _scores(self, query: str, allowed: np.ndarray) -> np.ndarray:
        """Reciprocal-rank fusion of BM25 and dense ranks over the allowed chunks (others get -inf)."""
        fused = np.full(len(self.chunks), -np.inf)
        if not allowed.any() or self._bm25 is None:
            return fused
        tokens = query_tokens(query)
        lexical = np.asarray(self._bm25.get_scores(tokens), dtype=np.float64)
        dense = self.vectors @ self.embedder.embed([query])[0]
        idx = np.flatnonzero(allowed)
        lex_rank = np.empty(len(idx))
        lex_rank[np.argsort(-lexical[idx], kind="stable")] = np.arange(len(idx))
        dense_rank = np.empty(len(idx))
        dense_rank[np.argsort(-dense[idx], kind="stable")] = np.arange(len(idx))
        lexical_part = np.where(lexical[idx] > MIN_BM25, 1.0 / (RRF_K + lex_rank), 0.0)
        fused[idx] = lexical_part + 1.0 / (RRF_K + dense_rank)
        return fused

    def search(self, query: str, principal: Principal, *, k: int = 8,
               filters: dict[str, Any] | None = None) -> list[tuple[StoredChunk, float]]:
        """Top-k readable chunks; ``filters`` match metadata fields exactly (e.g. {"status": "active"})."""
        if k < 1:
            raise ConfigError(f"k must be >= 1, got {k}")
        allowed = np.array([principal.may_read(c) and _matches(c, filters) for c in self.chunks], dtype=bool)
        scores = self._scores(query, allowed)
        order = [i for i in np.argsort(-scores, kind="stable")[:k] if np.isfinite(scores[i])]
        return [(self.chunks[i], float(scores[i])) for i in order]

    def hidden_matches(self, query: str, principal: Principal) -> int:
        """How many strong lexical matches in the caller's tenant its roles may not read (a count, no content)."""
        if self._bm25 is None:
            return 0
        tokens = query_tokens(query)
        lexical = np.asarray(self._bm25.get_scores(tokens))
        if lexical.max() <= 0:
            return 0
        strong = lexical >= 0.5 * lexical.max()
        # only the caller's own tenant counts: another tenant's documents must not even be hinted at
        own = np.array([c.tenant == principal.tenant for c in self.chunks])
        readable = np.array([principal.may_read(c) for c in self.chunks])
        hidden = own & ~readable
        visible_best = lexical[readable].max() if readable.any() else 0.0
        return int((strong & hidden & (lexical > visible_best)).sum())


def _matches(chunk: StoredChunk, filters: dict[str, Any] | None) -> bool:
    if not filters:
        return True
    for key, value in filters.items():
        actual = getattr(chunk, key, chunk.metadata.get(key))
        if actual != value:
            return False
    return True
