"""Choosing CRAG's two thresholds from calibrated data instead of by hand.

Given calibrated probabilities and binary labels of a held-out set, every (lower, upper) pair on a
quantile grid is scored by its escalation rate (share inside the band) and its error on the
auto-decided pairs. A target picks one:

- ``max_escalation``: the least auto-decided error with at most that share escalated;
- ``max_error``: the least escalation whose auto-decided error is at most that rate. With ``delta``,
  the bound holds with probability >= 1 - delta (Learn-then-Test): half the data orders candidate
  bands from widest to narrowest (the best band per escalation level), the other half tests them in
  that fixed sequence with a binomial test of "risk > max_error" at level delta, and the narrowest
  band reached before the first non-rejection is kept. Fixed-sequence testing needs no multiplicity
  correction, so the family-wise guarantee holds even though the path was optimised. When the labelled
  pairs come several per query, the test counts effective pairs (:mod:`grader.clustered`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from grader.clustered import design_effect, effective_counts, risk_above_p_value
from grader.policy import ThresholdPolicy
from models.deps import require
from models.errors import ConfigError

__all__ = [
    "ThresholdChoice",
    "check_targets",
    "choose_thresholds",
    "clopper_pearson_upper",
    "fixed_sequence_test",
    "label_free_bands",
    "labels_needed",
    "labels_needed_all_tested",
    "learn_then_test",
    "min_auto_decided",
    "per_group_figures",
    "small_sample_note",
    "tradeoff_curve",
]

GRID = 201


@dataclass(frozen=True, kw_only=True)
class ThresholdChoice:
    """The chosen policy and what it achieved on the data it was chosen on."""

    policy: ThresholdPolicy
    target: dict[str, Any]  # max_error, max_escalation, delta (and error_estimate when "calibrated")
    feasible: bool
    n: int
    escalation_rate: float
    auto_error_rate: float
    auto_error_upper_bound: float | None
    per_group: dict[str, dict[str, float]] | None = None
    labels_needed: int | None = None
    design_effect: float | None = None  # of the test pairs' errors, when they came in clusters (queries)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.update(self.policy.to_dict())
        out.pop("policy")
        return out


def clopper_pearson_upper(errors: np.ndarray, n: np.ndarray, delta: float) -> np.ndarray:
    """One-sided (1 - delta) upper confidence bound of a binomial rate."""
    stats = require("scipy.stats", "eval")
    errors = np.asarray(errors, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        bound = stats.beta.ppf(1.0 - delta, errors + 1.0, np.maximum(n - errors, 1e-12))
    return np.where(n > 0, np.where(errors >= n, 1.0, bound), 1.0)


def _grid(probs: np.ndarray) -> np.ndarray:
    """Candidate thresholds: midpoints between quantiles, so no threshold sits exactly on a data point
    (a pair exactly at a threshold would flip with any rounding noise, e.g. int8 vs fp32)."""
    qs = np.unique(np.quantile(probs, np.linspace(0.0, 1.0, GRID)))
    mids = (qs[:-1] + qs[1:]) / 2.0
    return np.unique(np.concatenate([[0.0], mids, [1.0]]))


def _table(probs: np.ndarray, labels: np.ndarray, grid: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Counts for every (lower, upper) grid pair: auto-decided pairs and their errors. ``labels`` may be
    probabilities of being relevant: the errors are then expected counts (a rejected pair is wrong with
    probability p, an accepted one with 1 - p)."""
    grid = _grid(probs) if grid is None else grid
    pos = labels.astype(np.float64)
    le = (probs[None, :] <= grid[:, None])
    ge = (probs[None, :] >= grid[:, None])
    n_le, n_ge = le.sum(1), ge.sum(1)
    pos_le = le @ pos
    neg_ge = ge @ (1.0 - pos)
    lower, upper = np.meshgrid(grid, grid, indexing="ij")
    valid = lower <= upper  # equal: no band at all (thresholds never sit on a data point)
    auto = n_le[:, None] + n_ge[None, :]
    errors = pos_le[:, None] + neg_ge[None, :]
    return {"lower": lower, "upper": upper, "valid": valid, "auto": auto, "errors": errors}


def _check(probs: Any, labels: Any) -> tuple[np.ndarray, np.ndarray]:
    p = np.asarray(probs, dtype=np.float64).ravel()
    y = np.asarray(labels).astype(int).ravel()
    if p.size == 0:
        raise ConfigError("thresholds need labelled pairs to be chosen on; got none")
    if p.shape != y.shape:
        raise ConfigError(f"need one label per probability, got {p.size} probabilities and {y.size} labels")
    if np.any((p < 0) | (p > 1)) or not np.all(np.isin(y, (0, 1))):
        raise ConfigError("probabilities must lie in [0, 1] and labels be 0 or 1")
    return p, y


def check_targets(*, max_error: float | None = None, max_escalation: float | None = None,
                  delta: float | None = None) -> None:
    """Refuse a target no band can be chosen for, naming it: an error rate and a delta strictly between 0 and 1
    (0 would need infinitely many labels, 1 promises nothing), an escalation share in [0, 1]."""
    for name, value, low_ok, example in (("max_error (--target-error)", max_error, False, "0.05"),
                                         ("max_escalation (--target-escalation)", max_escalation, True, "0.3"),
                                         ("delta (--delta)", delta, False, "0.1")):
        if value is None:
            continue
        inside = (0.0 <= value <= 1.0) if low_ok else (0.0 < value < 1.0)
        if not inside:  # also refuses NaN, which no comparison lets through
            bounds = "in [0, 1]" if low_ok else "strictly between 0 and 1"
            raise ConfigError(f"{name} must be {bounds}, got {value}; for example {example}")


def choose_thresholds(
    probs: Any,
    labels: Any,
    *,
    max_error: float | None = None,
    max_escalation: float | None = None,
    delta: float | None = None,
    groups: Any = None,
    error_estimate: str = "counted",
    clusters: Any = None,
) -> ThresholdChoice:
    """Pick (lower, upper) for one target; see the module docstring.

    ``groups`` (one name per pair: a domain or source) makes a ``max_error`` target hold in every group,
    not only on the pooled data: the worst domain decides, and the choice reports each group's figures.
    ``clusters`` (one id per pair, its query) makes a guarantee (``delta``) count effective pairs
    (:mod:`grader.clustered`).
    ``error_estimate="calibrated"`` (no ``delta``) chooses on the errors the calibrated probabilities expect
    rather than on the labelled errors counted: on a few hundred labels, counting picks the band that was
    luckiest on those pairs, while the expectation depends on the labels only through the calibration map
    (`bench/bench_learning_curve.py --no-guarantee`). The reported figures are still counted on the labels.
    """
    if error_estimate not in ("counted", "calibrated"):
        raise ConfigError(f"error_estimate must be 'counted' or 'calibrated', got {error_estimate!r}")
    if error_estimate == "calibrated" and delta is not None:
        raise ConfigError("a guarantee (delta) is tested on labelled errors; error_estimate='calibrated' has none")
    if (max_error is None) == (max_escalation is None):
        raise ConfigError("set exactly one target: max_error (auto-decided error) or max_escalation (band share)")
    check_targets(max_error=max_error, max_escalation=max_escalation, delta=delta)
    if delta is not None and max_error is None:
        raise ConfigError("delta (a confidence level) only applies to a max_error target")
    p, y = _check(probs, labels)
    if delta is not None and max_error is not None:
        return _learn_then_test(p, y, max_error, delta, groups=_group_names(groups, p.size),
                                clusters=None if clusters is None else np.asarray(clusters))
    n = p.size
    weights = p if error_estimate == "calibrated" else y
    t = _table(p, weights)
    auto, errors, valid = t["auto"], t["errors"], t["valid"]
    escalation = 1.0 - auto / n
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = np.where(auto > 0, errors / np.maximum(auto, 1), 0.0)
    g = _group_names(groups, n)
    if g is not None and max_error is not None:
        grid = t["lower"][:, 0]
        for name in np.unique(g):
            sub = _table(p[g == name], weights[g == name], grid)
            with np.errstate(invalid="ignore", divide="ignore"):
                sub_rate = np.where(sub["auto"] > 0, sub["errors"] / np.maximum(sub["auto"], 1), 0.0)
            rate = np.maximum(rate, sub_rate)  # the worst group's error must meet the target
    if max_escalation is not None:
        ok = valid & (escalation <= max_escalation + 1e-12)
        key = np.where(ok, rate + 1e-9 * escalation, np.inf)
    else:
        limit = float(max_error) if max_error is not None else 0.0
        ok = valid & (rate <= limit + 1e-12) & (auto > 0)
        key = np.where(ok, escalation + 1e-9 * rate, np.inf)
    feasible = bool(ok.any())
    if feasible:
        i, j = np.unravel_index(int(np.argmin(key)), key.shape)
        lower, upper = float(t["lower"][i, j]), float(t["upper"][i, j])
        esc, err = float(escalation[i, j]), float(rate[i, j])
    else:  # nothing meets the target: escalate everything and say so
        lower, upper, esc, err = 0.0, 1.0, 1.0, 0.0
    policy = ThresholdPolicy(lower=lower, upper=upper)
    target = {"max_error": max_error, "max_escalation": max_escalation, "delta": delta,
              **({"error_estimate": "calibrated"} if error_estimate == "calibrated" else {})}
    if g is not None or error_estimate == "calibrated":  # report the pooled rate counted on the labels
        auto_n, errors_n = _auto_counts(p, y, policy)
        err = errors_n / auto_n if auto_n else 0.0
    return ThresholdChoice(
        policy=policy, target=target, feasible=feasible, n=n,
        escalation_rate=esc, auto_error_rate=err, auto_error_upper_bound=None,
        per_group=None if g is None else per_group_figures(p, y, g, policy),
    )


def _group_names(groups: Any, n: int) -> np.ndarray | None:
    if groups is None:
        return None
    g = np.asarray([str(x) for x in groups])
    if g.shape != (n,):
        raise ConfigError(f"need one group name per probability, got {g.size} names for {n} probabilities")
    return g


def _decided_and_wrong(p: np.ndarray, y: np.ndarray, policy: ThresholdPolicy) -> tuple[np.ndarray, np.ndarray]:
    """Per pair: decided without the LLM, and decided wrongly."""
    accept, reject = p >= policy.upper, p <= policy.lower
    return accept | reject, (accept & (y == 0)) | (reject & (y == 1))


def _auto_counts(p: np.ndarray, y: np.ndarray, policy: ThresholdPolicy) -> tuple[int, int]:
    """(auto-decided pairs, errors among them) of a band on labelled data."""
    decided, wrong = _decided_and_wrong(p, y, policy)
    return int(decided.sum()), int(wrong.sum())


def per_group_figures(probs: Any, labels: Any, groups: Any, policy: ThresholdPolicy) -> dict[str, dict[str, float]]:
    """Auto-decided error, escalation and size of each group under ``policy``."""
    p, y = _check(probs, labels)
    g = _group_names(groups, p.size)
    out: dict[str, dict[str, float]] = {}
    for name in np.unique(g) if g is not None else []:
        size = int((g == name).sum())
        auto, errors = _auto_counts(p[g == name], y[g == name], policy)
        out[str(name)] = {"n": size, "auto_error_rate": errors / auto if auto else 0.0,
                          "escalation_rate": 1.0 - auto / size, "auto_decided": auto}
    return out


def _learn_then_test(p: np.ndarray, y: np.ndarray, alpha: float, delta: float, seed: int = 0,
                     groups: np.ndarray | None = None, clusters: np.ndarray | None = None) -> ThresholdChoice:
    """Learn-then-Test on a random half split of one labelled set (see :func:`learn_then_test`); with
    ``clusters``, whole clusters go to one half, so the test half is independent of the fit half."""
    rng = np.random.default_rng(seed)
    if clusters is None:
        order = rng.permutation(p.size)
        fit_idx, test_idx = order[: p.size // 2], order[p.size // 2 :]
    else:
        names = rng.permutation(np.unique(clusters))
        in_fit = np.isin(clusters, names[: names.size // 2])
        fit_idx, test_idx = np.flatnonzero(in_fit), np.flatnonzero(~in_fit)
    return learn_then_test(p[fit_idx], y[fit_idx], p[test_idx], y[test_idx], alpha, delta,
                           groups=None if groups is None else groups[test_idx],
                           clusters=None if clusters is None else clusters[test_idx],
                           fit_clusters=None if clusters is None else clusters[fit_idx])


def learn_then_test(p_fit: np.ndarray, y_fit: np.ndarray, p_test: np.ndarray, y_test: np.ndarray, alpha: float,
                    delta: float, *, groups: np.ndarray | None = None, clusters: Any = None,
                    fit_clusters: Any = None) -> ThresholdChoice:
    """Bands ordered widest to narrowest on the fit part, tested in that fixed sequence on the test part.

    With ``groups`` (one name per test pair), every group must reject "risk > alpha" (Bonferroni:
    delta / number of groups); ``clusters`` (one id per test pair, its query) as in :func:`fixed_sequence_test`.
    When nothing passes, the choice is infeasible and says how many labelled pairs would be needed
    (``labels_needed``, an estimate from the fit part's error rates, inflated by the design effect of their
    errors by query when ``fit_clusters`` names the fit pairs' queries).
    """
    check_targets(max_error=alpha, delta=delta)
    p_fit, y_fit, p_test, y_test = (np.asarray(a, dtype=np.float64) for a in (p_fit, y_fit, p_test, y_test))
    y_fit, y_test = y_fit.astype(int), y_test.astype(int)
    n = int(p_fit.size + p_test.size)
    target = {"max_error": alpha, "max_escalation": None, "delta": delta}
    chosen: ThresholdChoice | None = None
    if p_fit.size >= 2 and p_test.size >= 1 and len(set(y_fit.tolist())) == 2:
        bands = [choose_thresholds(p_fit, y_fit, max_escalation=float(level)).policy
                 for level in np.linspace(1.0, 0.0, 101)]
        chosen = fixed_sequence_test(bands, p_test, y_test, alpha, delta, groups=groups, clusters=clusters, n=n)
    if chosen is None:
        return ThresholdChoice(policy=ThresholdPolicy(lower=0.0, upper=1.0), target=target, feasible=False,
                               n=n, escalation_rate=1.0, auto_error_rate=0.0, auto_error_upper_bound=None,
                               labels_needed=labels_needed(p_fit, y_fit, alpha, delta, clusters=fit_clusters))
    return chosen


def label_free_bands(probs: np.ndarray, decision: float, levels: int = 101) -> list[ThresholdPolicy]:
    """Candidate bands for escalation 100%, 99%, ... 0%, each the split of auto-rejected (lowest) and
    auto-accepted (highest) probabilities whose *expected* error under the model's own probabilities is least.
    No label is used, so every label can go to testing (see :func:`fixed_sequence_test`)."""
    p = np.sort(np.asarray(probs, dtype=np.float64))
    n = p.size
    reject_cost = np.concatenate([[0.0], np.cumsum(p)])  # expected errors when the k lowest are rejected
    accept_cost = np.concatenate([[0.0], np.cumsum(1.0 - p[::-1])])  # ... when the j highest are accepted
    bands = []
    for level in np.linspace(1.0, 0.0, levels):
        m = round((1.0 - level) * n)  # pairs decided without the LLM
        k = int(np.argmin(reject_cost[: m + 1] + accept_cost[m::-1])) if m else 0
        lower = float(p[k - 1]) if k else 0.0
        upper = float(p[n - (m - k)]) if m - k else 1.0
        if k and m - k and lower >= upper:  # the two sides met: everything is decided at the cut
            lower, upper = decision, decision
        bands.append(ThresholdPolicy(lower=lower, upper=max(upper, lower), decision=decision))
    return bands


def fixed_sequence_test(bands: list[ThresholdPolicy], p_test: np.ndarray, y_test: np.ndarray, alpha: float,
                        delta: float, *, groups: np.ndarray | None = None, clusters: Any = None,
                        n: int | None = None) -> ThresholdChoice | None:
    """Fixed-sequence testing of ``bands`` (widest first) on labelled pairs: the last band for which every
    group rejects "auto-decided error > alpha" at delta (Bonferroni over groups); None when the first fails.

    ``clusters`` (one id per pair, e.g. its query) makes the test count effective pairs rather than pairs
    (:mod:`grader.clustered`): errors that come a query at a time are less evidence than as many apart."""
    check_targets(max_error=alpha, delta=delta)
    p_test, y_test = np.asarray(p_test, dtype=np.float64), np.asarray(y_test).astype(int)
    gt = np.asarray(groups) if groups is not None else np.zeros(p_test.size, dtype=str)
    ct = None if clusters is None else np.asarray(clusters)
    names = np.unique(gt)

    def shown_in_every_group(decided: np.ndarray, wrong: np.ndarray) -> bool:
        for name in names:
            mine = gt == name
            g_auto, g_err = int(decided[mine].sum()), int(wrong[mine].sum())
            deff = design_effect(wrong[mine], decided[mine], None if ct is None else ct[mine])
            if g_auto and risk_above_p_value(*effective_counts(g_err, g_auto, deff), alpha) > delta / len(names):
                return False
        return True

    # bands deciding too few pairs to ever reject are skipped, not failed: whether a band is skipped depends on
    # the probabilities only, never on the labels, so the fixed sequence stays valid
    fewest = min_auto_decided(alpha, delta / len(names))
    last: ThresholdPolicy | None = None
    for band in bands:
        decided, wrong = _decided_and_wrong(p_test, y_test, band)
        if int(decided.sum()) < fewest:
            continue
        if not shown_in_every_group(decided, wrong):
            break  # cannot reject "risk > alpha" here: stop the fixed sequence
        last = band
    if last is None:
        return None
    decided, wrong = _decided_and_wrong(p_test, y_test, last)
    auto, errors = int(decided.sum()), int(wrong.sum())
    deff = design_effect(wrong, decided, ct)
    eff_errors, eff_auto = effective_counts(errors, auto, deff)
    return ThresholdChoice(
        policy=last, target={"max_error": alpha, "max_escalation": None, "delta": delta}, feasible=True,
        n=n or int(p_test.size), escalation_rate=float(1.0 - auto / p_test.size), auto_error_rate=errors / auto,
        auto_error_upper_bound=float(clopper_pearson_upper(np.array([eff_errors]), np.array([eff_auto]), delta)[0]),
        per_group=None if groups is None else per_group_figures(p_test, y_test, gt, last),
        design_effect=None if ct is None else round(deff, 3),
    )


def min_auto_decided(alpha: float, delta: float) -> int:
    """The fewest auto-decided test pairs that can show "error <= alpha" at confidence 1 - delta (zero errors)."""
    return max(1, math.ceil(math.log(delta) / math.log(1.0 - alpha)))


def small_sample_note(n_auto_test: int, alpha: float, delta: float | None) -> str | None:
    """A warning when too few pairs were decided to support the target (None when enough)."""
    needed = min_auto_decided(alpha, delta if delta is not None else 0.1)
    if n_auto_test >= needed:
        return None
    return (f"only {n_auto_test} pairs were auto-decided on the calibration data; showing an error of at most "
            f"{alpha:.1%} needs at least {needed} auto-decided pairs even with no errors (more labelled pairs)")


def _fewest_to_show(err: float, alpha: float, delta: float) -> int:
    """The fewest auto-decided pairs at error rate ``err`` (< alpha) that pass the binomial test."""
    stats = require("scipy.stats", "eval")
    lo, hi = 1, 10_000_000
    while lo < hi:
        mid = (lo + hi) // 2
        if stats.binom.cdf(math.floor(err * mid), mid, alpha) <= delta:
            hi = mid
        else:
            lo = mid + 1
    return lo


def _least_labels(bands: list[ThresholdPolicy], p: np.ndarray, y: np.ndarray, alpha: float, delta: float,
                  tested_share: float, clusters: Any = None) -> int | None:
    """The fewest labelled pairs with which one of ``bands``, at the error rate counted here, would pass the
    binomial test when ``tested_share`` of the labels test it (auto-decided pairs inflated by the design
    effect of its errors by query); None when every band errs at or above ``alpha``."""
    best: int | None = None
    for band in bands:
        decided, wrong = _decided_and_wrong(p, y, band)
        auto = int(decided.sum())
        if auto == 0 or wrong.sum() / auto >= alpha:
            continue
        deff = design_effect(wrong, decided, clusters)
        total = math.ceil(deff * _fewest_to_show(float(wrong.sum()) / auto, alpha, delta) * p.size
                          / (auto * tested_share))
        best = total if best is None else min(best, total)
    return best


def labels_needed(p: np.ndarray, y: np.ndarray, alpha: float, delta: float, clusters: Any = None) -> int | None:
    """Estimated labelled pairs (fit + test halves) for a guaranteed band to exist; None when the model's
    error on ``p`` stays above ``alpha`` at every escalation level (more labels would not help). ``clusters``
    (one id per pair, its query) inflates the estimate by the design effect of the errors, as the test will."""
    p, y = np.asarray(p, dtype=np.float64), np.asarray(y).astype(int)
    if p.size < 2 or len(set(y.tolist())) < 2:
        return None
    bands = [choose_thresholds(p, y, max_escalation=float(level)).policy for level in np.linspace(0.95, 0.0, 20)]
    return _least_labels(bands, p, y, alpha, delta, tested_share=0.5, clusters=clusters)


def labels_needed_all_tested(p: np.ndarray, y: np.ndarray, alpha: float, delta: float, decision: float,
                             clusters: Any = None) -> int | None:
    """Estimated labelled pairs for a guaranteed band when every label tests the label-free bands (the
    bundle's map kept): each band's error counted on these labels, its auto-decided pairs inflated by the
    design effect of its errors by query; the least over the bands. None when every band errs above ``alpha``.
    An estimate from the labels at hand: followed on fresh samples it succeeded a third to three quarters of
    the time (`bench/bench_labels_needed.py`)."""
    p, y = np.asarray(p, dtype=np.float64), np.asarray(y).astype(int)
    if p.size < 2 or len(set(y.tolist())) < 2:
        return None
    return _least_labels(label_free_bands(p, decision, levels=21), p, y, alpha, delta, tested_share=1.0,
                         clusters=clusters)


def tradeoff_curve(probs: Any, labels: Any, points: int = 21) -> list[dict[str, float]]:
    """Best achievable auto-decided error at escalation rates 0, 5%, ..., 100% (for plots and reports)."""
    rows = []
    for esc in np.linspace(0.0, 1.0, points):
        choice = choose_thresholds(probs, labels, max_escalation=float(esc))
        rows.append({"max_escalation": float(esc), "escalation_rate": choice.escalation_rate,
                     "auto_error_rate": choice.auto_error_rate, "lower": choice.policy.lower,
                     "upper": choice.policy.upper})
    return rows
