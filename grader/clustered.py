"""Testing a band's auto-decided error when the labelled pairs come in clusters (the chunks of one query).

The binomial test behind a guarantee counts every labelled pair as an independent draw. Pairs of one query
are not: a query the model misreads yields several wrong pairs at once. On tech-support FAQ labels, ~27
pairs per query, bands "shown" to err at most 5% with probability 0.9 erred more than 5% in 21-23% of 100
random samples of 1,000-2,000 labels (`bench/bench_clustered_guarantee.py`). Kish's design effect says how
many times the variance of the error rate exceeds the binomial one; dividing the counts by it gives the
effective number of independent pairs, which the same binomial test then uses. With one pair per query, or
errors spread as independent pairs would spread them, nothing changes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from models.deps import require

__all__ = ["VARIANCE_CONFIDENCE", "design_effect", "effective_counts", "risk_above_p_value"]

# The clustered variance is estimated from the labelled queries, and a few queries the model misreads weigh on it
# more than a chi-square law allows; bench/bench_clustered_guarantee.py measures 0.9 and 0.99 beside it.
VARIANCE_CONFIDENCE = 0.97


def design_effect(wrong: np.ndarray, decided: np.ndarray, clusters: Any, confidence: float | None = None) -> float:
    """Variance of the error rate among ``decided`` pairs, counted by cluster (its upper ``confidence`` bound,
    default VARIANCE_CONFIDENCE), over its binomial variance; at least 1, and 1 when it cannot be measured
    (fewer than two clusters, no error or no right answer)."""
    if clusters is None:
        return 1.0
    decided = np.asarray(decided, dtype=bool)
    wrong = np.asarray(wrong, dtype=bool) & decided
    n = int(decided.sum())
    errors = int(wrong.sum())
    if n == 0 or errors in (0, n):
        return 1.0
    _, which = np.unique(np.asarray(clusters)[decided], return_inverse=True)
    per_cluster_n = np.bincount(which)
    per_cluster_errors = np.bincount(which, weights=wrong[decided].astype(np.float64))
    k = per_cluster_n.size
    if k < 2 or per_cluster_n.max() == 1:  # one pair per cluster: the pairs are the independent draws
        return 1.0
    rate = errors / n
    clustered = k / (k - 1) * float(np.sum((per_cluster_errors - rate * per_cluster_n) ** 2)) / n**2
    independent = rate * (1.0 - rate) / n
    # the clustered variance is itself estimated from k clusters: take its upper ``confidence`` bound
    stats = require("scipy.stats", "eval")
    level = VARIANCE_CONFIDENCE if confidence is None else confidence
    widen = (k - 1) / float(stats.chi2.ppf(1.0 - level, k - 1))
    return max(1.0, widen * clustered / independent)


def effective_counts(errors: int, decided: int, deff: float) -> tuple[float, float]:
    """(errors, decided pairs) as independent pairs would give the same variance of the rate."""
    return errors / deff, decided / deff


def risk_above_p_value(errors: float, decided: float, alpha: float) -> float:
    """P(at most ``errors`` wrong in ``decided`` pairs | error rate alpha), for real-valued (effective) counts:
    the binomial CDF through the regularised incomplete beta, which at a fractional count is at least the CDF
    at the whole count below it (so never less cautious)."""
    special = require("scipy.special", "eval")
    if decided <= 0:
        return 1.0
    if errors >= decided:
        return 1.0
    return float(special.betainc(decided - errors, errors + 1.0, 1.0 - alpha))
