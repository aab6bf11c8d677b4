import itertools

import numpy as np
import pytest

from grader.thresholds import (
    choose_thresholds,
    clopper_pearson_upper,
    fixed_sequence_test,
    label_free_bands,
    learn_then_test,
    tradeoff_curve,
)
from models import ConfigError


def _calibrated(n, seed):
    rng = np.random.default_rng(seed)
    p = rng.beta(0.6, 0.6, n)
    y = (rng.random(n) < p).astype(int)
    return p, y


def _auto_error(policy, p, y):
    auto = (p >= policy.upper) | (p <= policy.lower)
    wrong = ((p >= policy.upper) & (y == 0)) | ((p <= policy.lower) & (y == 1))
    return wrong[auto].mean(), 1 - auto.mean()


def test_max_escalation_is_respected():
    p, y = _calibrated(5000, 1)
    choice = choose_thresholds(p, y, max_escalation=0.3)
    assert choice.escalation_rate <= 0.3 + 1e-9
    err, esc = _auto_error(choice.policy, p, y)
    assert esc == pytest.approx(choice.escalation_rate)
    assert err == pytest.approx(choice.auto_error_rate)
    assert choice.policy.lower <= choice.policy.upper


def test_max_error_meets_target_with_least_escalation():
    p, y = _calibrated(5000, 2)
    tight = choose_thresholds(p, y, max_error=0.05)
    loose = choose_thresholds(p, y, max_error=0.15)
    assert tight.auto_error_rate <= 0.05 and loose.auto_error_rate <= 0.15
    assert loose.escalation_rate < tight.escalation_rate


def test_guarantee_holds_on_fresh_data():
    """With delta, the true error (measured on a large fresh draw) exceeds alpha in at most ~delta of trials;
    the point-estimate choice, tuned to the same sample, exceeds it far more often."""
    alpha, delta, trials = 0.08, 0.1, 40
    guarded = naive = 0
    for trial in range(trials):
        p, y = _calibrated(2000, 100 + trial)
        choice = choose_thresholds(p, y, max_error=alpha, delta=delta)
        assert choice.feasible and choice.escalation_rate < 1.0
        p2, y2 = _calibrated(20000, 1000 + trial)
        guarded += _auto_error(choice.policy, p2, y2)[0] > alpha
        naive += _auto_error(choose_thresholds(p, y, max_error=alpha).policy, p2, y2)[0] > alpha
    assert guarded <= trials * delta
    assert naive > guarded


def test_infeasible_target_escalates_everything():
    rng = np.random.default_rng(0)
    p, y = rng.random(500), rng.integers(0, 2, 500)
    choice = choose_thresholds(p, y, max_error=0.0001, delta=0.05)
    assert not choice.feasible and choice.escalation_rate == 1.0


def test_clopper_pearson_bounds():
    ub = clopper_pearson_upper(np.array([0, 5, 10]), np.array([100, 100, 10]), 0.05)
    assert 0.029 < ub[0] < 0.031  # rule of three
    assert ub[1] > 0.05 and ub[2] == 1.0


def test_bad_targets():
    p, y = _calibrated(100, 0)
    with pytest.raises(ConfigError, match="exactly one target"):
        choose_thresholds(p, y)
    with pytest.raises(ConfigError, match="exactly one target"):
        choose_thresholds(p, y, max_error=0.1, max_escalation=0.1)
    with pytest.raises(ConfigError, match="delta"):
        choose_thresholds(p, y, max_escalation=0.1, delta=0.1)
    with pytest.raises(ConfigError, match="one label per probability"):
        choose_thresholds(p, y[:5], max_error=0.1)
    with pytest.raises(ConfigError, match="need labelled pairs to be chosen on; got none"):
        choose_thresholds([], [], max_error=0.1)
    for bad in (0.0, 1.0, 1.5, -0.1, float("nan")):  # no band can show an error of at most 0, or of "at most 1"
        with pytest.raises(ConfigError, match=r"max_error \(--target-error\) must be strictly between 0 and 1"):
            choose_thresholds(p, y, max_error=bad)
        with pytest.raises(ConfigError, match=r"delta \(--delta\) must be strictly between 0 and 1"):
            learn_then_test(p, y, p, y, 0.05, bad)
        with pytest.raises(ConfigError, match="max_error"):
            fixed_sequence_test(label_free_bands(p, 0.5), p, y, bad, 0.1)
    for share in (0.0, 1.0):  # decide everything, escalate everything: both are choices
        assert choose_thresholds(p, y, max_escalation=share).escalation_rate <= share + 1e-9
    with pytest.raises(ConfigError, match=r"max_escalation \(--target-escalation\) must be in \[0, 1\], got 1.5"):
        choose_thresholds(p, y, max_escalation=1.5)


def test_tradeoff_curve_is_monotone():
    p, y = _calibrated(3000, 3)
    curve = tradeoff_curve(p, y, points=11)
    errors = [c["auto_error_rate"] for c in curve]
    assert errors[0] >= errors[-1]
    assert all(b <= a + 1e-9 for a, b in itertools.pairwise(errors))


def test_grouped_target_holds_in_the_worst_group_not_only_pooled():
    rng = np.random.default_rng(7)
    y_a = rng.integers(0, 2, 3000)
    p_a = np.clip(np.where(y_a == 1, rng.beta(6, 2, 3000), rng.beta(2, 6, 3000)), 0, 1)  # easy domain
    y_b = rng.integers(0, 2, 1000)
    p_b = np.clip(np.where(y_b == 1, rng.beta(3, 2, 1000), rng.beta(2, 3, 1000)), 0, 1)  # hard domain
    p, y = np.concatenate([p_a, p_b]), np.concatenate([y_a, y_b])
    groups = ["a"] * 3000 + ["b"] * 1000
    pooled = choose_thresholds(p, y, max_error=0.05)
    grouped = choose_thresholds(p, y, max_error=0.05, groups=groups)
    assert pooled.per_group is None and set(grouped.per_group) == {"a", "b"}
    assert all(g["auto_error_rate"] <= 0.05 + 1e-9 for g in grouped.per_group.values())
    assert grouped.escalation_rate >= pooled.escalation_rate
    with pytest.raises(ConfigError, match="group name"):
        choose_thresholds(p, y, max_error=0.05, groups=["a"])


def test_label_free_bands_widen_from_escalating_nothing_to_everything():
    from grader.thresholds import label_free_bands

    p, _ = _calibrated(400, 3)
    bands = label_free_bands(p, 0.5)
    escalation = [1 - ((p >= b.upper) | (p <= b.lower)).mean() for b in bands]
    assert escalation[0] == pytest.approx(1.0, abs=0.01) and escalation[-1] == pytest.approx(0.0, abs=0.01)
    assert all(a >= b - 0.01 for a, b in itertools.pairwise(escalation))  # ordered without any label
    assert all(b.lower <= b.upper for b in bands)


def test_fixed_sequence_on_all_labels_holds_the_target_over_many_splits():
    from grader.thresholds import fixed_sequence_test, label_free_bands

    violations, feasible = 0, 0
    for seed in range(200):
        p, y = _calibrated(400, 100 + seed)
        choice = fixed_sequence_test(label_free_bands(p, 0.5), p, y, 0.05, 0.1)
        if choice is None:
            continue
        feasible += 1
        fresh_p, fresh_y = _calibrated(20_000, 10_000 + seed)
        error, _ = _auto_error(choice.policy, fresh_p, fresh_y)
        violations += error > 0.05
    assert feasible > 100 and violations / 200 <= 0.1  # the guarantee: at most delta of the runs violate


def test_choosing_on_expected_errors_overfits_a_small_sample_less_than_counting():
    """200 calibrated pairs: the band chosen on the errors the probabilities expect lands closer to the target
    on fresh data than the band chosen on the errors counted in the sample, which picks the luckiest band."""
    alpha, trials = 0.05, 60
    counted, expected = [], []
    fresh_p, fresh_y = _calibrated(50000, 999)
    for trial in range(trials):
        p, y = _calibrated(200, 300 + trial)
        counted.append(_auto_error(choose_thresholds(p, y, max_error=alpha).policy, fresh_p, fresh_y)[0])
        choice = choose_thresholds(p, y, max_error=alpha, error_estimate="calibrated")
        expected.append(_auto_error(choice.policy, fresh_p, fresh_y)[0])
        assert choice.target["error_estimate"] == "calibrated"
        err, _ = _auto_error(choice.policy, p, y)  # the reported rate is still the one counted on the labels
        assert choice.auto_error_rate == pytest.approx(err)
    assert np.mean(expected) < np.mean(counted) and np.mean(expected) <= alpha + 0.01
    with pytest.raises(ConfigError, match="error_estimate"):
        choose_thresholds(p, y, max_error=alpha, error_estimate="guess")
    with pytest.raises(ConfigError, match="guarantee"):
        choose_thresholds(p, y, max_error=alpha, delta=0.1, error_estimate="calibrated")
