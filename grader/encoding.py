"""Pair tokenisation for cross-encoders with truncation reporting and length-bucketed dynamic padding.

Uses the ``tokenizers`` library only (no transformers), so ONNX inference needs no torch. Long pairs
are truncated longest-first to ``max_length`` and flagged, never cut silently. Batches are formed from
pairs of similar length and padded only to the longest member, not to ``max_length``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from models.deps import require
from models.errors import BundleError, ConfigError

__all__ = ["CHARS_PER_TOKEN_CAP", "EncodedBatch", "PairEncoder", "QueryFitter", "Windows"]

# Text beyond this many characters per token of the window budget is never tokenised (bounds memory on
# pathological inputs such as a 50 MB line); no real tokeniser emits fewer than one token per 12 characters.
CHARS_PER_TOKEN_CAP = 12


def _tokenizer_refusal(exc: BaseException) -> bool:
    """Whether ``tokenizers`` refused to window a pair: it raises a bare Exception when the query leaves no room
    for the text, and panics (pyo3's PanicException, a BaseException) when the room left is under the stride."""
    return isinstance(exc, Exception) or type(exc).__name__ == "PanicException"


class QueryFitter:
    """A query within ``budget`` tokens: a longer one keeps its first and last ``end_tokens`` tokens, joined by
    " ... ", because a question usually stands at one end of a long message (details pasted after it, or a story
    told before it); plain truncation would drop a question at the end. Remembers the last few queries fitted."""

    def __init__(self, tokenizer_path: str | Path, *, budget: int) -> None:
        tokenizers = require("tokenizers", "onnx")
        self._plain = tokenizers.Tokenizer.from_file(str(tokenizer_path))
        self._plain.no_padding()
        self._plain.no_truncation()
        self.budget = budget
        self.end_tokens = max(1, (budget - 3) // 2)  # " ... " is three tokens between the two ends
        self._fitted: dict[str, tuple[str, bool]] = {}

    def fit(self, query: str) -> tuple[str, bool]:
        """(the query as the model reads it, whether it was cut)."""
        known = self._fitted.get(query)
        if known is not None:
            return known
        half = self.end_tokens
        cap = (half + 1) * CHARS_PER_TOKEN_CAP
        if len(query) <= 2 * cap and len(self._plain.encode(query, add_special_tokens=False).ids) <= self.budget:
            fitted = (query, False)
        else:  # past the character cap only when one "word" is hundreds of characters (one [UNK] token)
            head_text, tail_text = query[:cap], query[-cap:]
            head = self._plain.encode(head_text, add_special_tokens=False).offsets
            tail = self._plain.encode(tail_text, add_special_tokens=False).offsets
            head_text = head_text[: head[half - 1][1]] if len(head) > half else head_text
            tail_text = tail_text[tail[-half][0]:] if len(tail) > half else tail_text
            fitted = (f"{head_text} ... {tail_text}", True)
        if len(query) <= 4 * cap:  # a huge query is not kept alive as a key (cutting it again is cheap)
            if len(self._fitted) >= 256:
                self._fitted.clear()
            self._fitted[query] = fitted
        return fitted


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


@dataclass(frozen=True)
class Windows:
    """Overlapping windows of long pairs: ``owner[k]`` is the pair of window ``k``; per pair, how many
    windows were read and whether text was still left unread after the last one."""

    owner: np.ndarray
    read: np.ndarray
    unread: np.ndarray


class PairEncoder:
    """Tokenise (query, text) pairs from a ``tokenizer.json``."""

    def __init__(self, tokenizer_path: str | Path, max_length: int) -> None:
        if not isinstance(max_length, int) or not 16 <= max_length <= 8192:  # room for a query and a text window
            raise ConfigError(f"max_length must be an int in [16, 8192], got {max_length!r}")
        tokenizers = require("tokenizers", "onnx")
        try:
            self._tokenizer = tokenizers.Tokenizer.from_file(str(tokenizer_path))
        except Exception as exc:  # tokenizers raises a bare Exception subclass on bad files
            raise BundleError(f"cannot read tokenizer {tokenizer_path}: {exc}") from exc
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(max_length=max_length, strategy="longest_first")
        self.max_length = max_length
        self._pad_id = self._tokenizer.token_to_id("[PAD]") or 0
        self._windowed = tokenizers.Tokenizer.from_file(str(tokenizer_path))
        self._windowed.no_padding()
        self.stride = max(0, max_length // 4)
        self._windowed.enable_truncation(max_length=max_length, strategy="only_second", stride=self.stride)
        self._query_fitter = QueryFitter(tokenizer_path, budget=max_length // 2)  # the rest: room for the windows
        self.query_budget = self._query_fitter.budget
        self.query_end_tokens = self._query_fitter.end_tokens

    def fit_query(self, query: str) -> tuple[str, bool]:
        """``query`` within ``query_budget`` tokens, and whether it was cut: the text must keep room for its windows,
        or a long pasted question would leave the chunk one half-window (an answer further on never read)."""
        return self._query_fitter.fit(query)

    def _clip(self, text: str, max_windows: int) -> tuple[str, bool]:
        """Text past what ``max_windows`` windows could ever read is not tokenised at all."""
        cap = max_windows * self.max_length * CHARS_PER_TOKEN_CAP
        return text[:cap], len(text) > cap

    def encode_windows(
        self, pairs: Sequence[tuple[str, str]], *, max_windows: int, batch_size: int = 32, bucket: bool = True
    ) -> tuple[Windows, list[EncodedBatch]]:
        """Batches of windows: a text longer than the window is read in overlapping windows (stride
        ``max_length // 4``), at most ``max_windows`` per pair; the caller pools the window scores."""
        if max_windows < 1:
            raise ConfigError(f"max_windows must be >= 1, got {max_windows}")
        clipped = [self._clip(text, max_windows) for _, text in pairs]
        inputs = [(self.fit_query(query)[0], text) for (query, _), (text, _) in zip(pairs, clipped, strict=True)]
        try:
            encoded = [([enc, *enc.overflowing], False) for enc in self._windowed.encode_batch(inputs)]
        except BaseException as exc:  # a query leaving no room for a window ("only_second" cannot cut): pair by pair
            if not _tokenizer_refusal(exc):
                raise
            encoded = [self._windows_of_one(query, text) for query, text in inputs]
        owner: list[int] = []
        encodings: list[object] = []
        read = np.zeros(len(pairs), dtype=np.int64)
        unread = np.zeros(len(pairs), dtype=bool)
        for i, (windows, cut) in enumerate(encoded):
            kept = windows[:max_windows]
            encodings += kept
            owner += [i] * len(kept)
            read[i], unread[i] = len(kept), clipped[i][1] or cut or len(windows) > max_windows
        batches = list(self._batches(encodings, batch_size, bucket))
        return Windows(np.asarray(owner, dtype=np.int64), read, unread), batches

    def _windows_of_one(self, query: str, text: str) -> tuple[list[Any], bool]:
        """Windows of one pair, and whether text was cut without a window for it: a query that fills the
        window falls back to plain truncation (one window, the rest unread)."""
        try:
            enc = self._windowed.encode(query, text)
            return [enc, *enc.overflowing], False
        except BaseException as exc:
            if not _tokenizer_refusal(exc):
                raise
            enc = self._tokenizer.encode(query, text)
            return [enc], bool(enc.overflowing)

    def encode(
        self, pairs: Sequence[tuple[str, str]], batch_size: int = 32, bucket: bool = True
    ) -> Iterator[EncodedBatch]:
        """Yield padded batches covering every pair exactly once."""
        if batch_size < 1:
            raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
        if not pairs:
            return
        yield from self._batches(self._tokenizer.encode_batch(list(pairs)), batch_size, bucket)

    def _batches(self, encodings: Sequence[object], batch_size: int, bucket: bool) -> Iterator[EncodedBatch]:
        if batch_size < 1:
            raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
        if not encodings:
            return
        lengths = np.array([len(e.ids) for e in encodings])  # type: ignore[attr-defined]
        order = np.argsort(-lengths, kind="stable") if bucket else np.arange(len(encodings))
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            width = int(lengths[rows].max())
            ids = np.full((len(rows), width), self._pad_id, dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            types = np.zeros((len(rows), width), dtype=np.int64)
            truncated = np.zeros(len(rows), dtype=bool)
            for r, i in enumerate(rows):
                enc: Any = encodings[i]
                n = len(enc.ids)
                ids[r, :n] = enc.ids
                mask[r, :n] = 1
                types[r, :n] = enc.type_ids
                truncated[r] = bool(enc.overflowing)
            yield EncodedBatch(np.asarray(rows), ids, mask, types, truncated)

    def token_count(self, query: str, text: str) -> int:
        """Tokens of one pair after truncation."""
        return len(self._tokenizer.encode(query, text).ids)
