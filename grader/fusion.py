"""The final score of a fused grader: the cross-encoder's logit mixed with what the base model already knew.

Fine-tuning a cross-encoder on a few domains teaches it answer-level evidence but wears away the plain
topical signal of the model it started from: on domains it was not trained on, the fine-tuned model alone
fell below the untrained all-MiniLM-L6-v2 bi-encoder (web passages 0.59 vs 0.74 AUROC). A fused bundle
therefore also carries a bi-encoder (the shipped default's: all-MiniLM-L6-v2 fine-tuned contrastively on the
recipe's training split, whose cosine reads unseen domains better than the untrained model's; until v3.2 the
untrained model itself) and scores every pair as

    logit = w_ce * clip(ce_logit, lo, hi) + w_cos * cosine + bias

where ``ce_logit`` is the cross-encoder's logit and ``cosine`` the bi-encoder's cosine between query
and text, each the best over the same number of overlapping windows of a long text. ``crag fuse`` chooses
the mix so that the worst domain of its data gains the most over the cosine alone (validated leaving each
domain out), then calibration and thresholds apply to the fused logit like to any other. Word-overlap
features were tried and left out: on BM25-mined negatives they learn the mining, not relevance.

``[lo, hi]`` (``ce_range``, optional) is the range of cross-encoder logits the mix was fitted on, with a margin:
a logit outside it counts as its end. It changes no score of the data it was fitted on, and it bounds what the
cross-encoder can add, so the cosine alone tells when a pair cannot reach a given probability whatever the
cross-encoder would read (:meth:`FusionHead.bounds`): the corrective loop then skips that read.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from grader.embedder import query_text
from models.errors import BundleError, ConfigError

__all__ = ["CE_RANGE_MARGIN", "FEATURES", "FusionHead", "cosines", "observed_ce_range"]

FEATURES = ("ce_logit", "cosine")
CE_RANGE_MARGIN = 0.1  # share of the observed span added at each end of a head's cross-encoder range


def observed_ce_range(ce_logits: np.ndarray, margin: float = CE_RANGE_MARGIN) -> tuple[float, float]:
    """The range of cross-encoder logits a head keeps: the observed one, widened by ``margin`` of its span at
    each end (a new domain may go a little further than the fitting data)."""
    ce = np.asarray(ce_logits, dtype=np.float64)
    ce = ce[np.isfinite(ce)]
    if ce.size == 0:
        raise ConfigError("no finite cross-encoder logits to take a range from: score some pairs first")
    lo, hi = float(ce.min()), float(ce.max())
    pad = margin * (hi - lo) or 1.0
    return lo - pad, hi + pad


def cosines(embedder: Any, pairs: Sequence[tuple[str, str]], *, max_windows: int = 1) -> np.ndarray:
    """Bi-encoder cosine per pair, each distinct query and text embedded once; a text longer than one window
    counts its best window (of at most ``max_windows``), like the cross-encoder."""
    queries = sorted({q for q, _ in pairs})
    texts = sorted({t for _, t in pairs})
    q_vectors = embedder.embed([query_text(embedder, q) for q in queries])  # a long one by its two ends, as the CE
    q_index = {q: i for i, q in enumerate(queries)}
    t_index = {t: i for i, t in enumerate(texts)}
    if max_windows == 1:
        t_vectors, owner = embedder.embed(texts), np.arange(len(texts))
    else:
        t_vectors, owner = embedder.embed_windows(texts, max_windows=max_windows)
    owner = np.asarray(owner, dtype=np.int64)
    q_rows = np.fromiter((q_index[q] for q, _ in pairs), dtype=np.int64, count=len(pairs))
    t_of_pair = np.fromiter((t_index[t] for _, t in pairs), dtype=np.int64, count=len(pairs))
    first_row = np.empty(len(texts), dtype=np.int64)
    first_row[owner[::-1]] = np.arange(len(owner))[::-1]  # each text's first window (the earliest row wins)
    out = np.einsum("ij,ij->i", t_vectors[first_row[t_of_pair]], q_vectors[q_rows]).astype(np.float64)
    windowed = np.bincount(owner, minlength=len(texts)) > 1  # long texts: the best of their windows
    for i in np.flatnonzero(windowed[t_of_pair]):
        out[i] = float(np.max(t_vectors[owner == t_of_pair[i]] @ q_vectors[q_rows[i]]))
    return out


@dataclass(frozen=True)
class FusionHead:
    """Weights of the fused score, as stored in a bundle manifest's ``fusion`` entry."""

    weights: tuple[float, ...]
    bias: float
    embedder: str = "embedder"
    features: tuple[str, ...] = FEATURES
    ce_range: tuple[float, float] | None = None  # cross-encoder logits are clipped to it (None: unbounded)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FusionHead:
        try:
            features = tuple(str(f) for f in data["features"])
            weights = tuple(float(w) for w in data["weights"])
            ce_range = None
            if data.get("ce_range") is not None:
                low, high = (float(end) for end in data["ce_range"])  # [low, high]: two numbers, no more
                ce_range = (low, high)
            head = cls(weights=weights, bias=float(data["bias"]), embedder=str(data.get("embedder", "embedder")),
                       features=features, ce_range=ce_range)
        except (KeyError, TypeError, ValueError) as exc:
            raise BundleError(f"manifest 'fusion' entry is malformed ({exc!r}); it needs features, weights and "
                              "bias, as written by `crag fuse`") from exc
        if features != FEATURES or len(weights) != len(FEATURES):
            raise BundleError(f"manifest 'fusion' uses features {list(features)}, but this version of crag-grader "
                              f"computes {list(FEATURES)}; re-run `crag fuse` or upgrade crag-grader")
        if not all(math.isfinite(w) for w in (*weights, head.bias)):
            raise BundleError("manifest 'fusion' weights must be finite numbers")
        if ce_range is not None and not (math.isfinite(ce_range[0]) and math.isfinite(ce_range[1])
                                         and ce_range[0] < ce_range[1]):
            raise BundleError(f"manifest 'fusion' ce_range must be two finite numbers, low < high, got "
                              f"{list(ce_range)}; re-run `crag fuse` or remove the entry (no bound)")
        return head

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"features": list(self.features), "weights": list(self.weights), "bias": self.bias,
                               "embedder": self.embedder}
        if self.ce_range is not None:
            out["ce_range"] = list(self.ce_range)
        return out

    @property
    def uses_cross_encoder(self) -> bool:
        """False when the head gives the cross-encoder no weight (the cosine alone decides)."""
        return self.weights[0] != 0.0

    def combine(self, ce_logits: np.ndarray, cosine: np.ndarray) -> np.ndarray:
        """The fused logit of each pair (a head that does not use the cross-encoder ignores its logits, which
        a grader that did not run it leaves as NaN)."""
        w_ce, w_cos = self.weights
        fused = w_cos * np.asarray(cosine, dtype=np.float64) + self.bias
        if not self.uses_cross_encoder:
            return fused
        ce = np.asarray(ce_logits, dtype=np.float64)
        return fused + w_ce * (ce if self.ce_range is None else np.clip(ce, *self.ce_range))

    def bounds(self, cosine: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """The lowest and highest fused logit each cosine can give, whatever the cross-encoder reads (exact when
        the head does not use it); None when the cross-encoder's part is unbounded (no ``ce_range``)."""
        cos = np.asarray(cosine, dtype=np.float64)
        if not self.uses_cross_encoder:
            fused = self.combine(np.full(cos.shape, np.nan), cos)
            return fused, fused
        if self.ce_range is None:
            return None
        ends = [self.combine(np.full(cos.shape, end), cos) for end in self.ce_range]
        return np.minimum(*ends), np.maximum(*ends)
