"""Shared logic of the cross-encoder backends (ONNX and torch): batching, calibration and verdicts.

A backend only implements :meth:`CrossEncoderGrader._logits` for one padded batch; everything else,
including input validation, truncation flags and the threshold policy, is common.
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from grader.bounded_cache import BoundedCache, content_key
from grader.calibration import (
    Calibrator,
    IdentityCalibrator,
    IsotonicCalibrator,
    PlattCalibrator,
    TemperatureCalibrator,
    calibrator_from_dict,
)
from grader.contrast import contrast_reason
from grader.echo import non_answer_reason, rule_decided
from grader.encoding import EncodedBatch, PairEncoder
from grader.fusion import FusionHead, cosines
from grader.policy import ThresholdPolicy, answer_floor_of
from grader.shift import ShiftMonitor, ShiftStatus, monitoring_paused
from models.bundle import Bundle
from models.errors import ConfigError, DataShiftWarning
from models.progress import progress
from models.text_batches import pair_list
from models.types import Chunk, Grade, Verdict, as_chunk, is_blank
from models.unicode_text import whole_characters

__all__ = ["DEFAULT_CACHE_PAIRS", "SETTLED", "CrossEncoderGrader", "DataShiftWarning", "GradedScores", "ScoredPairs",
           "is_settled", "validate_query"]

logger = logging.getLogger(__name__)

SETTLED = "settled on the bi-encoder's cosine"  # how the reason of a grade settled without the cross-encoder starts


def is_settled(grade: Grade) -> bool:
    """Whether ``grade`` was settled on the cosine alone (``settle_below``): its probability is an upper bound."""
    return grade.decided_by == "model" and (grade.reason or "").startswith(SETTLED)


def validate_query(query: object) -> str:
    """A query must be a non-empty string."""
    if not isinstance(query, str) or is_blank(query):
        raise ConfigError(f"query must be a non-empty string, got {query!r:.80}")
    return query


DEFAULT_MAX_WINDOWS = 8  # about 1,500 tokens; long pages gained 0.04 AUROC over 4 windows (bench_long_pages)
DEFAULT_CACHE_PAIRS = 4096  # scores of recent (query, text) pairs kept for reuse: ~100 bytes each


def _joined_fusion_inputs(parts: Sequence[ScoredPairs]) -> tuple[np.ndarray, np.ndarray] | None:
    """The fusion inputs of scored blocks, end to end (None unless every block has them)."""
    inputs = [p.fusion_inputs for p in parts]
    if any(i is None for i in inputs):
        return None
    present = [i for i in inputs if i is not None]
    return np.concatenate([i[0] for i in present]), np.concatenate([i[1] for i in present])


def _rule_grade(chunk: Chunk, reason: str) -> Grade:
    """An irrelevant verdict decided by a rule before the model (empty text, echoes of the query)."""
    return Grade(verdict=Verdict.IRRELEVANT, probability=0.0, decided_by="heuristic", chunk_id=chunk.chunk_id,
                 reason=reason, windows=0)  # the model read none of it


class ScoredPairs:
    """Raw logits, truncation flags and windows read for a list of pairs, in input order."""

    def __init__(self, logits: np.ndarray, truncated: np.ndarray, seconds: float, batch_seconds: list[float],
                 windows: np.ndarray | None = None,
                 fusion_inputs: tuple[np.ndarray, np.ndarray] | None = None):
        self.logits = logits
        self.truncated = truncated
        self.seconds = seconds
        self.batch_seconds = batch_seconds
        self.windows = windows if windows is not None else np.ones(len(logits), dtype=np.int64)
        self.fusion_inputs = fusion_inputs  # (cross-encoder logits, cosines) of a fused bundle: `crag adapt` refits


class GradedScores:
    """What ``grade`` gives many pairs, as arrays in input order: ``probabilities`` (0 for the pairs a rule
    decides), ``ruled`` (which pairs a rule decided: query echoes, wordless or empty chunks), ``withheld``
    (pairs above the upper threshold that ``grade`` still marks uncertain: swapped opposites,
    :mod:`grader.contrast`) and ``scored``, the model's scores of the other pairs, in their order (for logits,
    truncation and timings)."""

    def __init__(self, probabilities: np.ndarray, ruled: np.ndarray, scored: ScoredPairs,
                 withheld: np.ndarray | None = None):
        self.probabilities = probabilities
        self.ruled = ruled
        self.scored = scored
        self.withheld = np.zeros(len(ruled), dtype=bool) if withheld is None else withheld

    @property
    def truncated(self) -> np.ndarray:
        """Truncation flag per input pair (a rule-decided pair is never read, so never truncated)."""
        flags = np.zeros(len(self.ruled), dtype=bool)
        flags[~self.ruled] = self.scored.truncated
        return flags

    @property
    def windows(self) -> np.ndarray:
        """Windows the model read per input pair (0 for a rule-decided pair, as ``grade`` reports it)."""
        read = np.zeros(len(self.ruled), dtype=np.int64)
        read[~self.ruled] = self.scored.windows
        return read


class CrossEncoderGrader:
    """Grades chunks with a fine-tuned cross-encoder from a verified bundle."""

    backend = "base"

    def __init__(
        self,
        bundle: Bundle,
        *,
        batch_size: int = 32,
        policy: ThresholdPolicy | None = None,
        calibrator: Calibrator | None = None,
        max_windows: int = DEFAULT_MAX_WINDOWS,
        cache_pairs: int = DEFAULT_CACHE_PAIRS,
        threads: int | None = None,
        cross_encoder: bool | None = None,
    ) -> None:
        if batch_size < 1:
            raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
        if not isinstance(max_windows, int) or max_windows < 1:
            raise ConfigError(f"max_windows must be a positive int (1 = read only the first window), "
                              f"got {max_windows!r}")
        self.bundle = bundle
        self.batch_size = batch_size
        # (logit, unread, windows read, cross-encoder logit, cosine) per recent pair, reused exactly
        self.cache: BoundedCache[tuple[float, bool, int, float, float]] = BoundedCache(cache_pairs)
        self.pairs_scored = 0  # pairs the model actually read (cache hits excluded)
        self.max_windows = max_windows
        manifest = bundle.manifest
        self.encoder = PairEncoder(bundle.file("tokenizer.json"), manifest.max_length)
        self.calibrator = calibrator or calibrator_from_dict(manifest.calibration)
        self.policy = policy or ThresholdPolicy.from_dict(manifest.thresholds)
        self.answer_floor = answer_floor_of(manifest.answerability, manifest.name)
        self._shift_warned = False
        self.fusion = FusionHead.from_dict(manifest.fusion) if manifest.fusion else None
        self.fusion_embedder = None
        if self.fusion is not None:
            from grader.embedder import OnnxMiniLMEmbedder  # lazily: embedder -> onnx_backend -> this module

            # the grader's manifest already verified these files; one text per call, so that a cosine does not
            # depend on its batch mates (dynamic int8 quantisation, see grader.onnx_backend)
            self.fusion_embedder = OnnxMiniLMEmbedder(bundle.path / self.fusion.embedder, verify=False, batch_size=1,
                                                      threads=threads)
        if cross_encoder is not None and not isinstance(cross_encoder, bool):
            raise ConfigError(f"cross_encoder must be True, False or None (run it when the score uses it), "
                              f"got {cross_encoder!r}")
        if cross_encoder is False and (self.fusion is None or self.fusion.uses_cross_encoder):
            raise ConfigError(f"bundle {self.name!r} scores with its cross-encoder; it cannot be left out")
        # a fused head that gives the cross-encoder no weight (`crag fuse` chose the cosine alone) scores the
        # same without running it; training code that refits the mix asks for it with cross_encoder=True
        self.runs_cross_encoder = (self.fusion is None or self.fusion.uses_cross_encoder
                                   if cross_encoder is None else cross_encoder)
        # what reads the text when the cross-encoder does not: its windows are the ones a grade reports
        self._cosine_only = None if self.runs_cross_encoder else self.fusion_embedder
        # the fused score from which a pair may reach the lower threshold; below it, ``settle_below`` may leave
        # the cross-encoder unread, so the shift monitor compares scores censored there (None: never settles)
        self.settle_floor = self._lower_threshold_logit()
        self.shift_monitor = (ShiftMonitor(manifest.reference, floor=self.settle_floor) if manifest.reference
                              else None)

    def shift_status(self) -> ShiftStatus | None:
        """Whether the chunks graded lately look like the calibration data (None: the bundle has no reference)."""
        return self.shift_monitor.status() if self.shift_monitor else None

    def _watch_shift(self, logits: np.ndarray, texts: Sequence[str]) -> None:
        if self.shift_monitor is None or monitoring_paused():
            return
        status = self.shift_monitor.observe(logits, [len(t) for t in texts])
        if status.shifted and not self._shift_warned:
            self._shift_warned = True  # warn once; verdicts are not changed by it
            logger.warning("grader %s: %s", self.name, status.message)
            warnings.warn(status.message, DataShiftWarning, stacklevel=3)

    @property
    def name(self) -> str:
        return self.bundle.manifest.name

    def _logits(self, batch: EncodedBatch) -> np.ndarray:
        raise NotImplementedError

    def _run_batches(self, batches: Sequence[EncodedBatch]) -> list[tuple[np.ndarray, float]]:
        """Logits and seconds of each batch; a backend that can use several cores at once overrides this."""
        return [self._timed_logits(batch) for batch in batches]

    def _timed_logits(self, batch: EncodedBatch) -> tuple[np.ndarray, float]:
        t0 = time.perf_counter()
        return self._logits(batch), time.perf_counter() - t0

    def score_pairs(self, pairs: Sequence[tuple[str, str]], *, batch_size: int | None = None) -> ScoredPairs:
        """Raw logits for many (query, text) pairs, in input order, with per-batch timings.

        A text longer than the model's window is read in up to ``max_windows`` overlapping windows and
        its logit is the best window's (the answer may sit anywhere in a long page). A fused bundle then
        mixes in its bi-encoder's cosine (:mod:`grader.fusion`). Pairs scored lately come from the
        cache (exactly the same numbers: a pair's score does not depend on what it is graded with); a
        ``batch_size`` other than the grader's own bypasses the cache."""
        start = time.perf_counter()
        pairs = pair_list(pairs)  # one pair alone refused; a lone "\ud83d" cannot be tokenised
        use_cache = batch_size in (None, self.batch_size) and self.cache.max_items > 0
        keys = [content_key(q, t) for q, t in pairs]
        rows = [self.cache.get(k) if use_cache else None for k in keys]
        todo: dict[bytes, int] = {}  # a pair asked for twice in one call is scored once
        for i, row in enumerate(rows):
            if row is None:
                todo.setdefault(keys[i], i)
        batch_seconds: list[float] = []
        if todo:
            fresh = self._score_fresh([pairs[i] for i in todo.values()], batch_size or self.batch_size, batch_seconds)
            by_key = dict(zip(todo, fresh, strict=True))
            if use_cache:
                self.cache.put_many(by_key.items())
            rows = [by_key[keys[i]] if row is None else row for i, row in enumerate(rows)]
        seconds = time.perf_counter() - start
        if not pairs:
            return ScoredPairs(np.zeros(0), np.zeros(0, dtype=bool), seconds, batch_seconds, np.zeros(0, np.int64))
        logits, unread, read, ce, cosine = (np.asarray(column) for column in zip(*rows, strict=True))
        return ScoredPairs(logits.astype(np.float64), unread.astype(bool), seconds, batch_seconds,
                           read.astype(np.int64), fusion_inputs=None if self.fusion is None else (ce, cosine))

    def _score_fresh(self, pairs: Sequence[tuple[str, str]], batch_size: int,
                     batch_seconds: list[float]) -> list[tuple[float, bool, int, float, float]]:
        """Model scores of pairs not in the cache: (logit, unread, windows read, ce logit, cosine) each."""
        self.pairs_scored += len(pairs)
        if self.runs_cross_encoder:
            windows, batches = self.encoder.encode_windows(pairs, max_windows=self.max_windows,
                                                           batch_size=batch_size)
            read, unread = windows.read, windows.unread
            window_logits = np.zeros(len(windows.owner), dtype=np.float64)
            for batch, (logits_of_batch, seconds) in zip(batches, self._run_batches(batches), strict=True):
                window_logits[batch.index] = logits_of_batch
                batch_seconds.append(seconds)
            ce = np.full(len(pairs), -np.inf)
            np.maximum.at(ce, windows.owner, window_logits)
        else:  # not read: the fused score gives it no weight
            ce = np.full(len(pairs), np.nan)
        if self.fusion is None:
            cosine, logits = np.full(len(pairs), np.nan), ce
        else:
            cosine = cosines(self.fusion_embedder, pairs, max_windows=self.max_windows)
            logits = self.fusion.combine(ce, cosine)
        if self._cosine_only is not None:  # the flags say what was read: the cosine's windows of the text alone
            read, unread = self._cosine_only.window_reading([t for _, t in pairs], max_windows=self.max_windows)
        return [(float(logits[i]), bool(unread[i]), int(read[i]), float(ce[i]), float(cosine[i]))
                for i in range(len(pairs))]

    def scores_as_graded(self, pairs: Sequence[tuple[str, str]], *, batch_size: int | None = None,
                         block: int = 0) -> GradedScores:
        """The probability ``grade`` gives each pair, without Grade objects: evaluation, batch grading and the
        cascade's evaluation must treat rule-decided pairs exactly as ``grade`` does (irrelevant at 0, the
        model never consulted). ``block`` > 0 scores in blocks of that many pairs with a progress bar."""
        ruled = rule_decided(pairs)
        live = [pair for pair, r in zip(pairs, ruled, strict=True) if not r]
        step = block if block > 0 else max(1, len(live))
        starts: Iterable[int] = range(0, len(live), step)
        if block > 0:
            starts = progress(starts, desc="scoring", total=-(-len(live) // step), unit="block")
        parts = [self.score_pairs(live[i:i + step], batch_size=batch_size) for i in starts]
        if not parts:
            parts = [self.score_pairs([], batch_size=batch_size)]
        scored = parts[0] if len(parts) == 1 else ScoredPairs(
            np.concatenate([p.logits for p in parts]), np.concatenate([p.truncated for p in parts]),
            sum(p.seconds for p in parts), [s for p in parts for s in p.batch_seconds],
            np.concatenate([p.windows for p in parts]),
            fusion_inputs=_joined_fusion_inputs(parts))
        probs = np.zeros(len(pairs))
        probs[~ruled] = self.probabilities(scored.logits)
        withheld = np.zeros(len(pairs), dtype=bool)
        withheld[~ruled] = [why is not None for why in self._swaps(live, probs[~ruled])]
        return GradedScores(probs, ruled, scored, withheld)

    def _swaps(self, pairs: Sequence[tuple[str, str]], probs: np.ndarray) -> list[str | None]:
        """Why each pair above the upper threshold is not accepted on its score (:mod:`grader.contrast`), or None
        (accepted, or not above it): one rule for ``grade`` and ``scores_as_graded``."""
        return [contrast_reason(q, t) if p >= self.policy.upper else None
                for (q, t), p in zip(pairs, probs, strict=True)]

    def _query_reading(self, query: str) -> str | None:
        """Says so when the model read only the ends of a long query (the text keeps room for its windows)."""
        reader = self.encoder if self.runs_cross_encoder else self._cosine_only
        if reader is None or not reader.fit_query(whole_characters(query))[1]:  # whole characters: as score_pairs
            return None
        return f"long query: the model read its first and last {reader.query_end_tokens} tokens, not the middle"

    def probabilities(self, logits: np.ndarray) -> np.ndarray:
        """Calibrated probabilities for raw logits."""
        return np.clip(self.calibrator.predict(logits), 0.0, 1.0)

    def grade(self, query: str, chunks: Sequence[Chunk | str], *, settle_below: float | None = None) -> list[Grade]:
        """One Grade per chunk, in input order; inputs are never modified.

        ``settle_below`` (a probability; the lower threshold at most): a chunk the cosine alone shows to stay
        below it whatever the cross-encoder would read is not read by the cross-encoder. Its verdict is the one
        its exact grade would have (irrelevant, below the band), and its ``probability`` the most it could be,
        said in its ``reason``. The corrective loop asks for this; by default every chunk is read."""
        return self.grade_many([(query, chunks)], settle_below=settle_below)[0]

    def upper_bounds(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """The most ``grade`` could give each text, known without the cross-encoder: a fused bundle whose head
        bounds the cross-encoder's part (``ce_range``) tells it from the cosine alone, whatever the
        cross-encoder would read. 1.0 wherever it cannot tell (no bound, a calibration map of your own); 0.0
        for rule-decided pairs (graded 0). Refinement uses it to leave unread the strips it would drop."""
        pairs = pair_list([(validate_query(query), t) for t in texts], "upper_bounds")
        bound = np.ones(len(pairs))
        if not pairs:
            return bound
        ruled = rule_decided(pairs)
        bound[ruled] = 0.0
        live = np.flatnonzero(~ruled)
        highest = self._highest_probabilities([pairs[i] for i in live]) if live.size else None
        if highest is not None:
            bound[live] = highest
        return bound

    def _monotone_map(self) -> bool:
        return isinstance(self.calibrator, (IdentityCalibrator, IsotonicCalibrator, PlattCalibrator,
                                            TemperatureCalibrator))

    def _score_bounds(self, pairs: Sequence[tuple[str, str]]) -> tuple[np.ndarray, np.ndarray] | None:
        """The lowest and highest fused score of each pair whatever the cross-encoder reads, from the cosine
        alone (None: the bundle does not bound its cross-encoder)."""
        if self.fusion is None or self.fusion_embedder is None:
            return None
        return self.fusion.bounds(cosines(self.fusion_embedder, pairs, max_windows=self.max_windows))

    def _highest_probabilities(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray | None:
        """The most each pair's grade can be whatever the cross-encoder reads (None: it cannot be told)."""
        bounds = self._score_bounds(pairs) if self._monotone_map() else None
        if bounds is None:
            return None
        return np.maximum(*(self.probabilities(end) for end in bounds))  # a monotone map peaks at an end

    def _lower_threshold_logit(self) -> float | None:
        """The least fused score graded at or above the lower threshold (to 1e-9), when the bundle can settle
        pairs below it on the cosine alone and its calibration map rises with the score; else None."""
        if (self.fusion is None or not self.fusion.uses_cross_encoder or self.fusion.ce_range is None
                or not self._monotone_map() or self.policy.lower <= 0.0):
            return None
        low, high = -1e3, 1e3
        p_low, p_high = self.probabilities(np.array([low, high]))
        if not p_low < self.policy.lower <= p_high:
            return None
        while high - low > 1e-9:
            middle = (low + high) / 2.0
            if self.probabilities(np.array([middle]))[0] < self.policy.lower:
                low = middle
            else:
                high = middle
        return high

    def grade_many(self, requests: Sequence[tuple[str, Sequence[Chunk | str]]], *,
                   settle_below: float | None = None) -> list[list[Grade]]:
        """Grades for several (query, chunks) requests scored together (the service's micro-batches);
        ``settle_below`` as in :meth:`grade`."""
        if settle_below is not None and (isinstance(settle_below, bool) or not isinstance(settle_below, float | int)
                                         or not 0.0 <= settle_below <= 1.0):
            raise ConfigError(f"settle_below must be a probability in [0, 1] or None, got {settle_below!r}")
        if isinstance(requests, str) or (isinstance(requests, tuple) and len(requests) == 2
                                         and isinstance(requests[0], str)):  # one request alone: its query's letters
            raise ConfigError("grade_many takes a list of (query, chunks) requests; for one request, use grade(query, "
                              "chunks) or wrap it in a list")
        prepared = []
        for position, request in enumerate(requests):
            if not (isinstance(request, (tuple, list)) and len(request) == 2):
                raise ConfigError(f"request {position} must be a (query, chunks) pair, got {request!r:.80}")
            query, chunks = request
            query = validate_query(query)
            if isinstance(chunks, str | Chunk):
                raise ConfigError("chunks must be a list of str or Chunk, not a single chunk; wrap it in a list")
            prepared.append((query, [as_chunk(c) for c in chunks]))
        out: list[list[Grade | None]] = [[None] * len(items) for _, items in prepared]
        live: list[tuple[int, int]] = []
        for r, (_, items) in enumerate(prepared):
            for i, chunk in enumerate(items):
                reason = non_answer_reason(prepared[r][0], chunk.text)
                if reason is None:
                    live.append((r, i))
                else:
                    out[r][i] = _rule_grade(chunk, reason)
        settled = self._settle(prepared, live, settle_below)
        for (r, i), grade in settled.items():
            out[r][i] = grade
        live = [place for place in live if place not in settled]
        if settled and self.settle_floor is not None:  # the monitor censors at the floor: as their exact scores
            self._watch_shift(np.full(len(settled), self.settle_floor), [prepared[r][1][i].text for r, i in settled])
        if live:
            texts = [prepared[r][1][i].text for r, i in live]
            pairs = [(prepared[r][0], text) for (r, _), text in zip(live, texts, strict=True)]
            scored = self.score_pairs(pairs)
            self._watch_shift(scored.logits, texts)
            probs = self.probabilities(scored.logits)
            per_chunk_ms = 1000.0 * scored.seconds / len(live)
            n_truncated = int(scored.truncated.sum())
            window_tokens = self.encoder.max_length if self._cosine_only is None else self._cosine_only.max_length
            if n_truncated:
                logger.info("truncated %d of %d chunks to max_length=%d", n_truncated, len(live), window_tokens)
            swaps = self._swaps(pairs, probs)
            query_notes = [self._query_reading(query) for query, _ in prepared]
            for j, (r, i) in enumerate(live):
                withheld = swaps[j] is not None  # not accepted without a second opinion
                verdict, uncertain = self.policy.verdict(float(probs[j]), withheld=withheld)
                read = int(scored.windows[j])
                reasons = [f"truncated: read {read} window{'s' if read != 1 else ''} of {window_tokens} tokens; the "
                           "rest was not read"] if scored.truncated[j] else []
                if withheld:
                    reasons.insert(0, f"uncertain: {swaps[j]}")
                if (note := query_notes[r]) is not None:
                    reasons.append(note)
                out[r][i] = Grade(
                    verdict=verdict,
                    probability=float(probs[j]),
                    decided_by="model",
                    uncertain=uncertain,
                    logit=float(scored.logits[j]),
                    truncated=bool(scored.truncated[j]),
                    windows=int(scored.windows[j]),
                    chunk_id=prepared[r][1][i].chunk_id,
                    withheld=withheld,
                    reason="; ".join(reasons) or None,
                    latency_ms=per_chunk_ms,
                )
        return [[g for g in grades if g is not None] for grades in out]

    def _settle(self, prepared: list[tuple[str, list[Chunk]]], live: list[tuple[int, int]],
                settle_below: float | None) -> dict[tuple[int, int], Grade]:
        """Grades of the live chunks that the cosine alone keeps below ``settle_below`` (and the lower threshold):
        the cross-encoder does not read them (see :meth:`grade`)."""
        if settle_below is None or self.settle_floor is None or not live:
            return {}
        start = time.perf_counter()
        below = min(float(settle_below), self.policy.lower)
        pairs = [(prepared[r][0], prepared[r][1][i].text) for r, i in live]
        bounds = self._score_bounds(pairs)
        if bounds is None or self.fusion_embedder is None:
            return {}
        highest_logit = bounds[1]  # the map rises with the score (settle_floor is None otherwise)
        highest = self.probabilities(highest_logit)
        chosen = [j for j in range(len(live)) if highest_logit[j] < self.settle_floor and highest[j] < below]
        if not chosen:
            return {}
        read, unread = self.fusion_embedder.window_reading([pairs[j][1] for j in chosen], max_windows=self.max_windows)
        per_chunk_ms = 1000.0 * (time.perf_counter() - start) / len(live)
        out = {}
        for k, j in enumerate(chosen):
            r, i = live[j]
            verdict, uncertain = self.policy.verdict(float(highest[j]))
            out[(r, i)] = Grade(
                verdict=verdict, probability=float(highest[j]), decided_by="model", uncertain=uncertain,
                truncated=bool(unread[k]), windows=int(read[k]), chunk_id=prepared[r][1][i].chunk_id,
                reason=f"{SETTLED}: at most {highest[j]:.4f} whatever the cross-encoder would read, below "
                       f"{below:g}; the cross-encoder did not read it",
                latency_ms=per_chunk_ms)
        return out

    def describe(self) -> dict[str, Any]:
        """Short JSON-ready description for logs and health endpoints."""
        return {
            "name": self.name,
            "backend": self.backend,
            "max_length": self.encoder.max_length,
            "max_windows": self.max_windows,
            "calibration": self.calibrator.method,
            "fusion": self.fusion.to_dict() if self.fusion else None,
            "runs_cross_encoder": self.runs_cross_encoder,
            "policy": self.policy.to_dict(),
        }
