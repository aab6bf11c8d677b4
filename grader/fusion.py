"""The final score of a fused grader: the cross-encoder's logit mixed with what the base model already knew.

Fine-tuning a cross-encoder on a few domains teaches it answer-level evidence but wears away the plain
topical signal of the model it started from: on domains it was not trained on, the fine-tuned model alone
fell below the untrained all-MiniLM-L6-v2 bi-encoder (web passages 0.59 vs 0.74 AUROC). A fused bundle
therefore also carries a bi-encoder (the shipped default's: all-MiniLM-L6-v2 fine-tuned contrastively on the
recipe's training split, whose cosine reads unseen domains better than the untrained model's; until v3.2 the
untrained model itself) and scores every pair as

    logit = w_ce * ce_logit + w_cos * cosine + bias

where ``ce_logit`` is the cross-encoder's logit and ``cosine`` the bi-encoder's cosine between query
and text, each the best over the same number of overlapping windows of a long text. ``crag fuse`` chooses
the mix so that the worst domain of its data gains the most over the cosine alone (validated leaving each
domain out), then calibration and thresholds apply to the fused logit like to any other. Word-overlap
features were tried and left out: on BM25-mined negatives they learn the mining, not relevance.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from grader.embedder import query_text
from models.errors import BundleError

__all__ = ["FEATURES", "FusionHead", "cosines"]

FEATURES = ("ce_logit", "cosine")


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

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FusionHead:
        try:
            features = tuple(str(f) for f in data["features"])
            weights = tuple(float(w) for w in data["weights"])
            head = cls(weights=weights, bias=float(data["bias"]), embedder=str(data.get("embedder", "embedder")),
                       features=features)
        except (KeyError, TypeError, ValueError) as exc:
            raise BundleError(f"manifest 'fusion' entry is malformed ({exc!r}); it needs features, weights and "
                              "bias, as written by `crag fuse`") from exc
        if features != FEATURES or len(weights) != len(FEATURES):
            raise BundleError(f"manifest 'fusion' uses features {list(features)}, but this version of crag-grader "
                              f"computes {list(FEATURES)}; re-run `crag fuse` or upgrade crag-grader")
        if not all(math.isfinite(w) for w in (*weights, head.bias)):
            raise BundleError("manifest 'fusion' weights must be finite numbers")
        return head

    def to_dict(self) -> dict[str, Any]:
        return {"features": list(self.features), "weights": list(self.weights), "bias": self.bias,
                "embedder": self.embedder}

    @property
    def uses_cross_encoder(self) -> bool:
        """False when the head gives the cross-encoder no weight (the cosine alone decides)."""
        return self.weights[0] != 0.0

    def combine(self, ce_logits: np.ndarray, cosine: np.ndarray) -> np.ndarray:
        """The fused logit of each pair (a head that does not use the cross-encoder ignores its logits, which
        a grader that did not run it leaves as NaN)."""
        w_ce, w_cos = self.weights
        fused = w_cos * np.asarray(cosine, dtype=np.float64) + self.bias
        return fused + w_ce * np.asarray(ce_logits, dtype=np.float64) if self.uses_cross_encoder else fused
