"""The shipped bi-encoder in int8 ONNX (numpy, tokenizers, onnxruntime; no torch): all-MiniLM-L6-v2 fine-tuned by the
recipe (``crag-minilm-l6-tuned-v1``, :func:`training.recipe.tuned_embedder`), or any export of ``crag export-embedder``.

Used by the retrieval index for dense vectors and by fused graders for the base model's cosine
(:mod:`grader.fusion`). A text longer than the model's 256 tokens has one vector per overlapping window
(``embed_windows``), so that a long page is not judged by its first screen (often navigation) alone.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

import models
from grader.bounded_cache import BoundedCache, content_key
from grader.encoding import CHARS_PER_TOKEN_CAP, QueryFitter
from grader.session_pool import SessionPool
from models.bundle import sha256_file
from models.deps import require
from models.errors import BundleError, ConfigError
from models.text_batches import text_list
from models.unicode_text import whole_characters

__all__ = ["EMBEDDER_DIR", "OnnxMiniLMEmbedder", "embedding_cache", "query_text"]

EMBEDDER_DIR = Path(models.__file__).resolve().parent / "embedders" / "minilm-l6"
CACHE_VECTORS = 4096  # per model file: ~1.5 kB each

_caches: dict[str, BoundedCache[np.ndarray]] = {}
_caches_lock = threading.Lock()


def embedding_cache(model_sha256: str) -> BoundedCache[np.ndarray]:
    """The process's cache of vectors computed with one model file (shared by every embedder loading it, so
    the query a search embedded is not embedded again by a fused grader's cosine)."""
    with _caches_lock:
        return _caches.setdefault(model_sha256, BoundedCache(CACHE_VECTORS))


def _reading_key(text: str, max_windows: int) -> bytes:
    return content_key(text, f"windows of {max_windows}")


def query_text(embedder: Any, query: str) -> str:
    """The text ``embedder`` embeds for ``query``: crag's embedder reads a query longer than its window by the
    window's two ends (a question that ends a long message would be cut off otherwise), so a search and the grader's
    cosine embed the same text and share its vector; any other embedder gets the query as it is."""
    fit = getattr(embedder, "fit_query", None)
    return str(fit(query)[0]) if fit is not None else query


class OnnxMiniLMEmbedder:
    """An exported all-MiniLM-L6-v2 (or a fine-tuned copy) through onnxruntime: (n, 384) float32, unit-normalised
    rows."""

    def __init__(self, bundle: str | Path = EMBEDDER_DIR, *, threads: int | None = None, batch_size: int = 1,
                 verify: bool = True) -> None:
        root = Path(bundle)
        try:
            manifest = json.loads((root / "manifest.json").read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise BundleError(f"embedder bundle {root} has no readable manifest.json ({exc}); re-export it with "
                              "`crag export-embedder --out DIR`") from exc
        if verify:
            for name, entry in manifest.get("files", {}).items():
                if not (root / name).is_file() or sha256_file(root / name) != entry.get("sha256"):
                    raise BundleError(f"embedder bundle {root}: {name} is missing or does not match its sha256")
        tokenizers = require("tokenizers", "onnx")
        self.name = str(manifest.get("name", "all-MiniLM-L6-v2"))
        self.dim = int(manifest.get("dim", 384))
        self.batch_size = max(1, batch_size)
        self.tokenizer = tokenizers.Tokenizer.from_file(str(root / "tokenizer.json"))
        self.max_length = int(manifest.get("max_length", 256))
        self.tokenizer.enable_truncation(self.max_length)
        self.tokenizer.no_padding()  # the shipped tokenizer.json pads to a fixed length; we pad per batch
        self._query_fitter = QueryFitter(root / "tokenizer.json", budget=self.max_length - 2)  # [CLS] ... [SEP]
        self.query_end_tokens = self._query_fitter.end_tokens
        self._windowed = tokenizers.Tokenizer.from_file(str(root / "tokenizer.json"))
        self._windowed.no_padding()
        self._windowed.enable_truncation(self.max_length, stride=self.max_length // 4)
        model_file = str(manifest["model_file"])
        self.sessions = SessionPool(root / model_file, threads, what="embedder model", padded_calls=self.batch_size > 1)
        # one text per call gives each text one vector whatever it is embedded with: only then can it be cached
        model_sha = str(manifest.get("files", {}).get(model_file, {}).get("sha256", ""))
        self.cache = embedding_cache(model_sha) if model_sha and self.batch_size == 1 else BoundedCache(0)
        # text -> (windows past the first, whether text is left past the last window)
        self._readings: BoundedCache[tuple[int, bool]] = BoundedCache(CACHE_VECTORS)
        # names vectors that are bit-identical to this embedder's (an index records it to share its vectors)
        self.vector_identity = f"{self.name}@{model_sha}/per-text" if self.cache.max_items else None

    def fit_query(self, query: str) -> tuple[str, bool]:
        """The query as the cosine reads it, and whether it was cut: within one window, a longer one by its first
        and last tokens (:class:`grader.encoding.QueryFitter`; a query is not windowed, and plain truncation would
        drop a question that ends a long message)."""
        return self._query_fitter.fit(whole_characters(query))

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(text_list(texts))  # one str alone refused; a lone "\ud83d" cannot be tokenised

    def _embed(self, texts: list[str]) -> np.ndarray:
        """``embed`` of texts already made of whole characters."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        keys = [content_key(t) for t in texts]
        todo: dict[bytes, list[int]] = {}
        for i, key in enumerate(keys):
            vector = self.cache.get(key)
            if vector is None:
                todo.setdefault(key, []).append(i)
            else:
                out[i] = vector
        if not todo:
            return out
        firsts = sorted((rows[0] for rows in todo.values()), key=lambda i: -len(texts[i]))  # longest first
        batches = [firsts[s : s + self.batch_size] for s in range(0, len(firsts), self.batch_size)]
        for rows, vectors in zip(batches, self.sessions.map(lambda rows: self._embed_batch(texts, rows), batches),
                                 strict=True):
            for i, vector in zip(rows, vectors, strict=True):
                out[todo[keys[i]]] = vector
        self.cache.put_many((keys[i], out[i].copy()) for i in firsts)
        return out

    def embed_windows(self, texts: Sequence[str], *, max_windows: int) -> tuple[np.ndarray, np.ndarray]:
        """Vectors of each text's windows and the text each belongs to: ``(vectors (m, dim), owner (m,))``.

        The first window's vector is ``embed``'s (what an index stores, so it is shared); a text longer than
        one window adds overlapping windows (stride a quarter window), at most ``max_windows`` in all."""
        if not isinstance(max_windows, int) or max_windows < 1:
            raise ConfigError(f"max_windows must be a positive int (1 = the first window only), got {max_windows!r}")
        texts = text_list(texts, "embed_windows")
        first = self._embed(texts)
        if max_windows == 1:
            return first, np.arange(len(texts), dtype=np.int64)
        extra: list[tuple[int, bytes, object]] = []  # (text row, cache key, encoding) of windows 2..max_windows
        cached: dict[int, np.ndarray] = {}  # position in ``extra`` -> vector found in the cache
        for i, text in enumerate(texts):
            if not self._fits_one_window(text):
                keys = self._cached_window_keys(text, max_windows)
                found = [self.cache.get(key) for key in keys or ()]
                if keys is not None and all(v is not None for v in found):  # known windows, all cached: no tokenising
                    cached.update((len(extra) + k, v) for k, v in enumerate(found) if v is not None)
                    extra.extend((i, key, None) for key in keys)
                    continue
                windows, _ = self._tokenise_windows(text, max_windows)
                for k, window in enumerate(windows):
                    extra.append((i, content_key(text, f"window {k + 2} of {self.max_length}"), window))
        vectors = np.zeros((len(extra), self.dim), dtype=np.float32)
        todo = []
        for j, (_, key, _) in enumerate(extra):
            vector = cached.get(j)
            if vector is None:
                vector = self.cache.get(key)
            if vector is None:
                todo.append(j)
            else:
                vectors[j] = vector
        for j, vector in zip(todo, self.sessions.map(lambda j: self._embed_encodings([extra[j][2]])[0], todo),
                             strict=True):
            vectors[j] = vector
        self.cache.put_many((extra[j][1], vectors[j].copy()) for j in todo)
        owner = np.array([i for i, _, _ in extra], dtype=np.int64)
        return np.concatenate([first, vectors]), np.concatenate([np.arange(len(texts), dtype=np.int64), owner])

    def window_reading(self, texts: Sequence[str], *, max_windows: int) -> tuple[np.ndarray, np.ndarray]:
        """How ``embed_windows`` reads each text: ``(windows read (n,), text left past the last window (n,))``.

        Free for texts ``embed_windows`` has just read (a grader whose cosine is all it reads takes its
        ``windows`` / ``truncated`` flags from here); other long texts are tokenised, not embedded."""
        readings = [self._reading(whole_characters(text), max_windows) for text in texts]
        return (np.array([1 + extra for extra, _ in readings], dtype=np.int64),
                np.array([unread for _, unread in readings], dtype=bool))

    def _reading(self, text: str, max_windows: int) -> tuple[int, bool]:
        if self._fits_one_window(text):
            return 0, False
        known = self._readings.get(_reading_key(text, max_windows))
        if known is not None:
            return known
        windows, unread = self._tokenise_windows(text, max_windows)
        return len(windows), unread

    def _fits_one_window(self, text: str) -> bool:
        """Short enough for one window without tokenising: a WordPiece token covers at least one character."""
        return len(text) <= self.max_length - 2

    def _tokenise_windows(self, text: str, max_windows: int) -> tuple[list[object], bool]:
        """Windows 2..``max_windows`` of a long text, and whether text is left past the last (both remembered)."""
        cap = max_windows * self.max_length * CHARS_PER_TOKEN_CAP
        overflowing = self._windowed.encode(text[:cap]).overflowing
        windows = overflowing[: max_windows - 1]
        unread = len(text) > cap or len(overflowing) > len(windows)
        self._readings.put_many([(_reading_key(text, max_windows), (len(windows), unread))])
        return windows, unread

    def _cached_window_keys(self, text: str, max_windows: int) -> list[bytes] | None:
        """Cache keys of the text's windows 2.. when its window count is known (None: tokenise to find out)."""
        known = self._readings.get(_reading_key(text, max_windows))
        if known is None:
            return None
        return [content_key(text, f"window {k + 2} of {self.max_length}") for k in range(known[0])]

    def _embed_batch(self, texts: Sequence[str], rows: Sequence[int]) -> np.ndarray:
        return self._embed_encodings(self.tokenizer.encode_batch([texts[i] or " " for i in rows]))

    def _embed_encodings(self, encoded: Sequence[Any]) -> np.ndarray:
        """Mean-pooled, normalised vectors of tokenizers ``Encoding`` objects."""
        width = max(len(e.ids) for e in encoded)
        ids = np.zeros((len(encoded), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        for r, e in enumerate(encoded):
            ids[r, : len(e.ids)] = e.ids
            mask[r, : len(e.ids)] = 1
        hidden = self.sessions.run({"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
