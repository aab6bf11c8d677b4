"""Evaluation metrics for a grader on labelled pairs, with stable key names for JSON reports."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from grader.policy import ThresholdPolicy
from models.deps import require
from models.types import Verdict
from training.data import LabelledPair

__all__ = ["auroc", "binary_labels", "compute_metrics", "expected_calibration_error", "reliability_bins"]

ECE_BINS = 15


def binary_labels(pairs: Sequence[LabelledPair]) -> np.ndarray:
    """1 for relevant or partial, 0 for irrelevant."""
    return np.array([1 if p.label.is_positive else 0 for p in pairs], dtype=int)


def reliability_bins(probs: np.ndarray, labels: np.ndarray, bins: int = ECE_BINS) -> list[dict[str, float]]:
    """Per equal-width bin: count, mean predicted probability and observed positive rate."""
    edges = np.linspace(0.0, 1.0, bins + 1)
    index = np.clip(np.digitize(probs, edges[1:-1]), 0, bins - 1)
    rows = []
    for b in range(bins):
        mask = index == b
        if mask.any():
            rows.append({"low": float(edges[b]), "high": float(edges[b + 1]), "count": int(mask.sum()),
                         "mean_probability": float(probs[mask].mean()), "positive_rate": float(labels[mask].mean())})
    return rows


def expected_calibration_error(probs: np.ndarray, labels: np.ndarray, bins: int = ECE_BINS) -> float:
    """Count-weighted gap between predicted probability and observed rate over equal-width bins."""
    n = len(probs)
    return float(sum(r["count"] / n * abs(r["mean_probability"] - r["positive_rate"])
                     for r in reliability_bins(probs, labels, bins)))


def auroc(labels: np.ndarray, scores: np.ndarray) -> float:
    """Area under the ROC curve (both classes must be present)."""
    return float(require("sklearn.metrics", "eval").roc_auc_score(labels, scores))


def _safe_auroc(labels: np.ndarray, scores: np.ndarray) -> float | None:
    if labels.size == 0 or labels.min() == labels.max():
        return None
    return auroc(labels, scores)


def compute_metrics(
    pairs: Sequence[LabelledPair],
    probs: np.ndarray,
    policy: ThresholdPolicy,
    batch_seconds: Sequence[float] | None = None,
    withheld: np.ndarray | None = None,
) -> dict[str, Any]:
    """All report metrics; AUROCs are None when a class is missing rather than a made-up number. ``withheld``
    marks pairs above the upper threshold that ``grade`` still escalates (swapped opposites)."""
    skm = require("sklearn.metrics", "eval")
    probs = np.asarray(probs, dtype=np.float64)
    y = binary_labels(pairs)
    strict = np.array([p.label is not Verdict.PARTIAL for p in pairs])
    held = np.zeros(len(probs), dtype=bool) if withheld is None else np.asarray(withheld, dtype=bool)
    verdicts = [policy.verdict(float(p), withheld=bool(w)) for p, w in zip(probs, held, strict=True)]
    predicted = np.array([1 if v.is_positive else 0 for v, _ in verdicts])
    band = np.array([unsure for _, unsure in verdicts], dtype=bool)
    auto = ~band
    auto_errors = int((predicted[auto] != y[auto]).sum())
    report: dict[str, Any] = {
        "n": len(pairs),
        "positives": int(y.sum()),
        "auroc": _safe_auroc(y, probs),
        "auroc_strict": _safe_auroc(y[strict], probs[strict]),
        "accuracy": float(skm.accuracy_score(y, predicted)),
        "macro_f1": float(skm.f1_score(y, predicted, average="macro", zero_division=0)),
        "escalation_rate": float(band.mean()),
        "auto_error_rate": float(auto_errors / auto.sum()) if auto.any() else 0.0,
        "auto_decided": int(auto.sum()),
        # how confident it is where it is right: the mean probability over each class (None when a class is absent)
        "mean_p_relevant": float(probs[y == 1].mean()) if y.any() else None,
        "mean_p_irrelevant": float(probs[y == 0].mean()) if not y.all() else None,
        "ece": expected_calibration_error(probs, y),
        "brier": float(skm.brier_score_loss(y, probs)) if len(set(y)) > 1 else float(np.mean((probs - y) ** 2)),
        "confusion_matrix": {
            "labels": ["irrelevant", "relevant_or_partial"],
            "rows_gold_cols_predicted": skm.confusion_matrix(y, predicted, labels=[0, 1]).tolist(),
        },
        "thresholds": policy.to_dict(),
    }
    if batch_seconds:
        ms = 1000.0 * np.asarray(batch_seconds)
        report["latency_ms_per_batch"] = {"p50": float(np.percentile(ms, 50)), "p95": float(np.percentile(ms, 95)),
                                          "batches": len(ms)}
    return report
