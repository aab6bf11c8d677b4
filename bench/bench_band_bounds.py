"""How far can any band of the default's score go on each domain? Bounds behind issue 11's out-of-box target.

The cascade decides a chunk alone when its probability is at most ``lower`` or at least ``upper``; the rest escalate.
For each domain of the fusion data and of the held-out queries this reports:

- ``oracle``: the band with the least escalation whose auto-decided error is at most 5% / 10%, chosen on that
  domain's own labels (no method choosing without them can do better on those pairs);
- ``best_global``: one band for all domains (what a bundle ships), the one with the least mean escalation whose
  error is at most 5% on every fusion domain, and what it gives on the held-out queries; next to it the
  bundle's own thresholds;
- ``label_free``: a band per domain chosen without labels, from the calibrated probabilities' own estimate of the
  error (mean of ``1 - p`` over accepted and ``p`` over rejected pairs at most the target), once as calibrated and
  once after estimating the domain's share of relevant pairs by EM under the label-shift assumption (Saerens et
  al. 2002) and re-weighting the probabilities by it.

    python bench/bench_band_bounds.py --work runs/v3 --json bench/results_band_bounds.json
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.feature_mix import scored_sets
from bench.output import emit, work_parser

TARGETS = (0.05, 0.10)


def least_escalation(order_labels: np.ndarray, target: float) -> tuple[float, int, int]:
    """Over bands rejecting the ``i`` lowest and accepting the ``j`` highest pairs (in the order given): the least
    escalation whose error is at most ``target``, and its ``(i, j)``. ``order_labels`` holds 0/1 labels, or
    probabilities (the error is then the one they expect)."""
    n = len(order_labels)
    wrong_rejected = np.concatenate([[0.0], np.cumsum(order_labels)])  # i lowest rejected: relevant ones are wrong
    wrong_accepted = np.concatenate([[0.0], np.cumsum(1.0 - order_labels[::-1])])  # j highest accepted
    best = (1.0, 0, 0)
    for i in range(n + 1):
        j = np.arange(0, n - i + 1)
        decided = i + j
        with np.errstate(invalid="ignore", divide="ignore"):
            error = (wrong_rejected[i] + wrong_accepted[j]) / decided
        ok = (decided > 0) & (error <= target + 1e-12)
        if ok.any():
            k = int(j[ok].max())
            if 1 - (i + k) / n < best[0]:
                best = (1 - (i + k) / n, i, k)
    return best


def realised(y: np.ndarray, order: np.ndarray, i: int, j: int) -> dict[str, float]:
    labels = y[order]
    decided = i + j
    wrong = labels[:i].sum() + (1 - labels[len(labels) - j:]).sum() if j else labels[:i].sum()
    return {"auto_error": float(wrong / decided) if decided else 0.0, "escalated": 1 - decided / len(y)}


def label_shift_em(p: np.ndarray, prior: float, iterations: int = 200) -> tuple[float, np.ndarray]:
    """The share of relevant pairs that best explains ``p`` under label shift, and ``p`` re-weighted by it."""
    share, adjusted = prior, p
    for _ in range(iterations):
        a = share / prior * p
        adjusted = a / (a + (1 - share) / (1 - prior) * (1 - p))
        share = float(adjusted.mean())
    return share, adjusted


def band_stats(s: dict[str, Any], probabilities: np.ndarray, lower: float, upper: float) -> dict[str, Any]:
    rows = {}
    for d in sorted(set(s["groups"].tolist())):
        m = s["groups"] == d
        p, y = probabilities[m], s["y"][m]
        rejected, accepted = p <= lower, p >= upper  # as ThresholdPolicy.verdict
        decided = rejected | accepted
        rows[d] = {"auto_error": float((y[rejected].sum() + (1 - y[accepted]).sum()) / max(decided.sum(), 1)),
                   "escalated": float(1 - decided.mean())}
    return rows


def main() -> None:
    ap = work_parser(__doc__)
    args = ap.parse_args()
    from grader import load_grader

    grader = load_grader("default")
    sets = scored_sets(args.work, lambda pairs: {})
    probs = {name: grader.probabilities(s["fused"]) for name, s in sets.items()}
    prior = float(sets["fuse"]["y"].mean())
    report: dict[str, Any] = {"calibration_share_relevant": prior, "per_domain": {}}
    for name, s in sets.items():
        for d in sorted(set(s["groups"].tolist())):
            m = s["groups"] == d
            p, y = probs[name][m], s["y"][m].astype(float)
            order = np.argsort(p, kind="stable")
            row: dict[str, Any] = {"pairs": int(m.sum()), "share_relevant": float(y.mean()), "oracle": {},
                                   "label_free": {}}
            for target in TARGETS:
                escalated, i, j = least_escalation(y[order], target)
                row["oracle"][str(target)] = {"escalated": escalated, **realised(y, order, i, j)}
            share, adjusted = label_shift_em(p, prior)
            row["label_shift_estimated_share"] = share
            for how, q in (("as_calibrated", p), ("label_shift_em", adjusted)):
                qo = np.argsort(q, kind="stable")
                _, i, j = least_escalation(q[qo], 0.05)
                row["label_free"][how] = realised(y, qo, i, j)
            report["per_domain"][f"{name}/{d}"] = row
    # one band for every domain: thresholds at the fusion data's probability quantiles
    fuse = sets["fuse"]
    grid = np.unique(np.quantile(probs["fuse"], np.linspace(0, 1, 201)))
    best: tuple[float, float, float] | None = None
    for a_index, lower in enumerate(grid):
        for upper in grid[a_index:]:
            rows = band_stats(fuse, probs["fuse"], lower, upper)
            if all(r["auto_error"] <= 0.05 for r in rows.values()):
                mean_escalated = float(np.mean([r["escalated"] for r in rows.values()]))
                if best is None or mean_escalated < best[0]:
                    best = (mean_escalated, float(lower), float(upper))
    thresholds = grader.policy
    report["bundle_thresholds"] = {"lower": thresholds.lower, "upper": thresholds.upper,
                                   **{name: band_stats(s, probs[name], thresholds.lower, thresholds.upper)
                                      for name, s in sets.items()}}
    if best is not None:
        report["best_global"] = {"lower": best[1], "upper": best[2],
                                 **{name: band_stats(s, probs[name], best[1], best[2]) for name, s in sets.items()}}
    emit(report, args.json)


if __name__ == "__main__":
    main()
