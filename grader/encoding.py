"""Pair tokenisation for cross-encoders with truncation reporting and length-bucketed dynamic padding.

Uses the ``tokenizers`` library only (no transformers), so ONNX inference needs no torch. Long pairs
are truncated longest-first to ``max_length`` and flagged, never cut silently. Batches are formed from
pairs of similar length and padded only to the longest member, not to ``max_length``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from models.deps import require
from models.errors import BundleError, ConfigError

__all__ = ["EncodedBatch", "PairEncoder"]


@dataclass(frozen=True)
class EncodedBatch:
    """One padded batch; ``index`` maps rows back to the caller's pair order."""

    index: np.ndarray
    input_ids: np.ndarray
    attention_mask: np.ndarray
    token_type_ids: np.ndarray
    truncated: np.ndarray

    @property
    def num_tokens(self) -> int:
        """Real (unpadded) tokens in the batch."""
        return int(self.attention_mask.sum())


class PairEncoder:
    """Tokenise (query, text) pairs from a ``tokenizer.json``."""

    def __init__(self, tokenizer_path: str | Path, max_length: int) -> None:
        if not isinstance(max_length, int) or not 8 <= max_length <= 8192:
            raise ConfigError(f"max_length must be an int in [8, 8192], got {max_length!r}")
        tokenizers = require("tokenizers", "onnx")
        try:
            self._tokenizer = tokenizers.Tokenizer.from_file(str(tokenizer_path))
        except Exception as exc:  # tokenizers raises a bare Exception subclass on bad files
            raise BundleError(f"cannot read tokenizer {tokenizer_path}: {exc}") from exc
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(max_length=max_length, strategy="longest_first")
        self.max_length = max_length
        self._pad_id = self._tokenizer.token_to_id("[PAD]") or 0

    def encode(
        self, pairs: Sequence[tuple[str, str]], batch_size: int = 32, bucket: bool = True
    ) -> Iterator[EncodedBatch]:
        """Yield padded batches covering every pair exactly once."""
        if batch_size < 1:
            raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
        if not pairs:
            return
        encodings = self._tokenizer.encode_batch(list(pairs))
        lengths = np.array([len(e.ids) for e in encodings])
        order = np.argsort(-lengths, kind="stable") if bucket else np.arange(len(encodings))
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            width = int(lengths[rows].max())
            ids = np.full((len(rows), width), self._pad_id, dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            types = np.zeros((len(rows), width), dtype=np.int64)
            truncated = np.zeros(len(rows), dtype=bool)
            for r, i in enumerate(rows):
                enc = encodings[i]
                n = len(enc.ids)
                ids[r, :n] = enc.ids
                mask[r, :n] = 1
                types[r, :n] = enc.type_ids
                truncated[r] = bool(enc.overflowing)
            yield EncodedBatch(np.asarray(rows), ids, mask, types, truncated)

    def token_count(self, query: str, text: str) -> int:
        """Tokens of one pair after truncation."""
        return len(self._tokenizer.encode(query, text).ids)
