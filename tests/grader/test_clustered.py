import numpy as np
import pytest
from scipy import stats

from grader.clustered import design_effect, effective_counts, risk_above_p_value
from grader.policy import ThresholdPolicy
from grader.thresholds import fixed_sequence_test, label_free_bands, labels_needed_all_tested


def test_the_p_value_is_the_binomial_cdf_at_whole_counts_and_never_below_it_between():
    for errors, decided in ((0, 45), (3, 120), (10, 150)):
        assert risk_above_p_value(errors, decided, 0.05) == pytest.approx(stats.binom.cdf(errors, decided, 0.05))
    assert risk_above_p_value(3.4, 120, 0.05) >= stats.binom.cdf(3, 120, 0.05)
    assert risk_above_p_value(5, 5, 0.05) == 1.0 and risk_above_p_value(0, 0, 0.05) == 1.0


def test_independent_pairs_have_no_design_effect():
    rng = np.random.default_rng(0)
    wrong = rng.random(400) < 0.05
    decided = np.ones(400, dtype=bool)
    assert design_effect(wrong, decided, None) == 1.0
    assert design_effect(wrong, decided, np.arange(400)) == 1.0  # one pair per cluster
    assert design_effect(np.zeros(400, dtype=bool), decided, np.arange(400) // 10) == 1.0  # no error to measure


def test_errors_that_come_a_query_at_a_time_count_as_fewer_pairs():
    clusters = np.repeat(np.arange(40), 25)
    decided = np.ones(clusters.size, dtype=bool)
    spread = np.zeros(clusters.size, dtype=bool)
    spread[::25] = True  # one wrong pair in each query
    bunched = np.isin(clusters, [3, 17])  # two queries wholly wrong
    assert design_effect(bunched, decided, clusters) > 10 * design_effect(spread, decided, clusters)
    assert design_effect(spread, decided, clusters) == 1.0
    errors, n = effective_counts(50, 1000, 4.0)
    assert (errors, n) == (12.5, 250.0)


def test_a_band_is_not_shown_on_errors_bunched_in_a_few_queries():
    """The same pairs and labels: with the query of each pair known, bunched errors are weaker evidence, so the
    sequence stops at a band escalating more (or none), and the choice records its design effect."""
    rng = np.random.default_rng(1)
    clusters = np.repeat(np.arange(60), 30)
    p = rng.beta(0.5, 0.5, clusters.size)
    y = (p > 0.5).astype(int)
    wrong_queries = np.isin(clusters, [5, 40])  # two queries the model reads backwards
    y[wrong_queries] = 1 - y[wrong_queries]
    bands = label_free_bands(p, 0.5)
    alone = fixed_sequence_test(bands, p, y, 0.05, 0.1)
    clustered = fixed_sequence_test(bands, p, y, 0.05, 0.1, clusters=clusters)
    assert alone is not None and alone.design_effect is None
    assert clustered is None or clustered.escalation_rate > alone.escalation_rate
    if clustered is not None:
        same_band = fixed_sequence_test([clustered.policy], p, y, 0.05, 0.1)
        assert clustered.design_effect > 1 and clustered.auto_error_upper_bound > same_band.auto_error_upper_bound
    assert fixed_sequence_test(bands, p, y, 0.05, 0.1, clusters=np.arange(p.size)).policy == alone.policy


def test_a_policy_band_tested_with_clusters_reports_the_counted_error():
    p = np.r_[np.full(100, 0.01), np.full(100, 0.99)]
    y = np.r_[np.zeros(100, dtype=int), np.ones(100, dtype=int)]
    band = ThresholdPolicy(lower=0.05, upper=0.95)
    choice = fixed_sequence_test([band], p, y, 0.05, 0.1, clusters=np.arange(200) // 4)
    assert choice is not None and choice.auto_error_rate == 0.0 and choice.design_effect == 1.0


def test_labels_needed_counts_every_label_as_a_test_and_more_when_errors_bunch():
    rng = np.random.default_rng(2)
    p = rng.beta(0.5, 0.5, 400)
    y = (rng.random(400) < p).astype(int)
    spread = labels_needed_all_tested(p, y, 0.05, 0.1, 0.5)
    by_query = labels_needed_all_tested(p, y, 0.05, 0.1, 0.5, clusters=np.arange(400) // 10)
    assert spread is not None and 45 <= spread < 400  # calibrated data: a band exists on fewer labels than these
    assert by_query >= spread
    bunched = y.copy()
    bunched[np.isin(np.arange(400) // 10, [1, 2])] = 1 - bunched[np.isin(np.arange(400) // 10, [1, 2])]
    assert labels_needed_all_tested(p, bunched, 0.05, 0.1, 0.5, clusters=np.arange(400) // 10) > \
        labels_needed_all_tested(p, bunched, 0.05, 0.1, 0.5)
    assert labels_needed_all_tested(p, 1 - y, 0.05, 0.1, 0.5) is None  # every band wrong: labels will not help


def test_choose_thresholds_with_a_guarantee_tests_whole_queries():
    from grader.thresholds import choose_thresholds

    rng = np.random.default_rng(3)
    clusters = np.repeat(np.arange(80), 20)
    p = rng.beta(0.5, 0.5, clusters.size)
    y = (rng.random(clusters.size) < p).astype(int)
    choice = choose_thresholds(p, y, max_error=0.1, delta=0.1, clusters=clusters)
    assert choice.feasible and choice.design_effect >= 1.0
    assert choose_thresholds(p, y, max_error=0.1, delta=0.1).design_effect is None  # pairs as independent draws


def test_an_infeasible_learn_then_test_estimates_more_labels_when_the_fit_errors_bunch_by_query():
    """The refit path's refusal (map fitted on one half, band tested on the other) counts the design effect too."""
    from grader.thresholds import learn_then_test

    rng = np.random.default_rng(4)
    queries = np.arange(400) // 10
    p = rng.beta(0.5, 0.5, 400)
    y = (rng.random(400) < p).astype(int)
    bunched = np.isin(queries, [1, 2, 3])
    y[bunched] = 1 - y[bunched]  # three queries the model reads backwards
    few_p, few_y = p[:6], np.array([0, 1, 0, 1, 0, 1])  # a test part far too small to show anything
    alone = learn_then_test(p, y, few_p, few_y, 0.05, 0.1)
    by_query = learn_then_test(p, y, few_p, few_y, 0.05, 0.1, fit_clusters=queries)
    assert not alone.feasible and not by_query.feasible
    assert alone.labels_needed is not None and by_query.labels_needed > alone.labels_needed
