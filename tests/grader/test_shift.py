import re

import numpy as np
import pytest

from grader.shift import ShiftMonitor, ks_two_sample, make_reference, monitoring_paused, not_monitored
from models import ConfigError


def _reference(rng, n=3000):
    return make_reference(rng.normal(0.0, 1.0, n), rng.integers(100, 800, n))


def test_ks_matches_a_direct_two_sample_computation():
    rng = np.random.default_rng(0)
    ref = rng.normal(size=5000)
    same, shifted = rng.normal(size=300), rng.normal(0.8, 1.0, size=300)
    q = np.quantile(ref, np.linspace(0, 1, 201))
    d_same, p_same = ks_two_sample(same, q, ref.size)
    d_shift, p_shift = ks_two_sample(shifted, q, ref.size)
    assert d_same < 0.1 and p_same > 0.01
    assert d_shift > 0.25 and p_shift < 1e-6


def test_silent_on_unshifted_data_and_fires_soon_after_a_change():
    rng = np.random.default_rng(1)
    monitor = ShiftMonitor(_reference(rng))
    for _ in range(100):  # 10,000 chunks like the calibration data
        status = monitor.observe(rng.normal(0.0, 1.0, 100), rng.integers(100, 800, 100))
    assert not status.shifted and status.checks >= 90 and status.message == ""
    fired_at = None
    for i in range(20):  # the data moves: scores shift down, chunks get longer
        status = monitor.observe(rng.normal(-0.7, 1.0, 20), rng.integers(600, 2000, 20))
        if status.shifted and fired_at is None:
            fired_at = (i + 1) * 20
    assert fired_at is not None and fired_at <= 200
    assert "crag calibrate" in status.message


def test_the_grader_warns_once_and_keeps_its_verdicts(tmp_path):
    from grader import load_grader
    from grader.cross_encoder import DataShiftWarning

    grader = load_grader("default", threads=1)
    grader.shift_monitor = ShiftMonitor(make_reference(np.full(50, 40.0) + np.arange(50) * 0.01,
                                                       np.full(50, 10.0)), window=20, check_every=5)
    chunks = ["Paris is the capital of France.", "The mitochondrion makes ATP."] * 10
    before = [g.probability for g in load_grader("default", threads=1).grade("What is the capital of France?", chunks)]
    with pytest.warns(DataShiftWarning, match="recalibrate"):
        after = [g.probability for g in grader.grade("What is the capital of France?", chunks)]
    assert after == before
    assert grader.shift_status().shifted


def test_grades_made_while_not_monitored_are_not_watched():
    from grader import load_grader

    grader = load_grader("default", threads=1)
    grader.shift_monitor = ShiftMonitor(make_reference(np.arange(50) * 0.01, np.full(50, 10.0)), window=20,
                                        check_every=5)
    with not_monitored():
        assert monitoring_paused()
        grader.grade("What is the capital of France?", ["Paris is the capital of France."] * 3)
    assert not monitoring_paused() and grader.shift_status().seen == 0
    grader.grade("What is the capital of France?", ["Paris is the capital of France.", "Lyon is in France."])
    assert grader.shift_status().seen == 2


def test_data_like_one_calibration_domain_is_not_a_shift():
    rng = np.random.default_rng(5)
    short = (rng.normal(1.0, 0.5, 1500), rng.integers(50, 150, 1500))  # two unlike calibration domains
    long = (rng.normal(-1.0, 0.5, 1500), rng.integers(800, 1500, 1500))
    logits, lengths = np.concatenate([short[0], long[0]]), np.concatenate([short[1], long[1]])
    groups = ["short"] * 1500 + ["long"] * 1500
    by_domain = ShiftMonitor(make_reference(logits, lengths, groups=groups))
    pooled_only = ShiftMonitor(make_reference(logits, lengths))
    for _ in range(30):  # a stream of the short domain alone
        chunk = (rng.normal(1.0, 0.5, 100), rng.integers(50, 150, 100))
        mine, pooled = by_domain.observe(*chunk), pooled_only.observe(*chunk)
    assert pooled.shifted and not mine.shifted  # unlike the mixture, but like one of its domains
    for _ in range(4):  # then a third kind of data
        mine = by_domain.observe(rng.normal(0.0, 0.5, 50), rng.integers(300, 500, 50))
    assert mine.shifted and "each of its 2 calibration domains" in mine.message
    assert re.search(r"\(closest: (short|long|all of them pooled)\)", mine.message)  # a domain, or all of them


def test_bad_reference_is_a_config_error():
    with pytest.raises(ConfigError):
        ShiftMonitor({"n": 10})
    with pytest.raises(ConfigError):
        make_reference([1.0, 2.0], [1, 2])


def _retrieval_results(rng, queries, per_query=10, shift=0.0):
    """Chunks grouped by query as retrieval returns them: each query has its own score level."""
    logits, lengths, names = [], [], []
    for q in range(queries):
        level, size = rng.normal(shift, 1.0), rng.integers(150, 600)
        logits += list(rng.normal(level, 0.5, per_query))
        lengths += list(rng.normal(size, 40.0, per_query))
        names += [f"q{q}"] * per_query
    return np.array(logits), np.array(lengths), names


def test_design_effect_keeps_clustered_retrieval_results_from_false_alarms():
    rng = np.random.default_rng(2)
    logits, lengths, queries = _retrieval_results(rng, 300)
    plain, clustered = make_reference(logits, lengths), make_reference(logits, lengths, queries)
    assert clustered["design_effect"]["logit"] > 2.0 and clustered["design_effect"]["length"] > 2.0
    live_logits, live_lengths, _ = _retrieval_results(rng, 300)  # new queries of the same domain
    alarms = {"plain": 0, "clustered": 0}
    for name, reference in (("plain", plain), ("clustered", clustered)):
        monitor = ShiftMonitor(reference)
        for i in range(0, live_logits.size, 10):
            if monitor.observe(live_logits[i:i + 10], live_lengths[i:i + 10]).shifted:
                alarms[name] += 1
                monitor = ShiftMonitor(reference)
    assert alarms["plain"] > 0 and alarms["clustered"] == 0
    monitor, fired_at = ShiftMonitor(clustered), None  # a real change still fires soon
    shifted_logits, shifted_lengths, _ = _retrieval_results(rng, 40, shift=-2.5)
    for i in range(0, 200, 10):
        monitor.observe(live_logits[i:i + 10], live_lengths[i:i + 10])
    for i in range(0, shifted_logits.size, 10):
        if monitor.observe(shifted_logits[i:i + 10], shifted_lengths[i:i + 10] * 3).shifted:
            fired_at = i + 10
            break
    assert fired_at is not None and fired_at <= 200


def test_few_queries_mean_no_design_effect_and_old_references_still_load():
    rng = np.random.default_rng(3)
    logits, lengths, queries = _retrieval_results(rng, 8)
    effect = make_reference(logits, lengths, queries)["design_effect"]
    assert effect["logit"] == effect["length"] == 1.0 and "fewer than" in effect["note"]
    old = make_reference(logits, lengths)  # written before design effects: chunks treated as independent
    assert "design_effect" not in old and ShiftMonitor(old).status().shifted is False
    with pytest.raises(ConfigError, match="design effects must be >= 1"):
        ShiftMonitor({**old, "design_effect": {"logit": 0.5}})


def test_the_shipped_bundles_carry_design_effects():
    from models.bundle import read_bundle
    from models.registry import resolve_bundle

    for name in ("default", "fast"):
        effect = read_bundle(resolve_bundle(name)).manifest.reference["design_effect"]
        assert effect["logit"] > 1.0 and effect["queries"] >= 600


def test_censored_at_a_floor_the_test_compares_the_share_below_it_and_the_shape_above():
    rng = np.random.default_rng(7)
    ref = rng.normal(size=20000)
    q = np.quantile(ref, np.linspace(0, 1, 201))
    same = rng.normal(size=400)
    # what a settling grader reports: every score below the floor at the floor
    censored = np.maximum(same, -0.5)
    d_exact, _ = ks_two_sample(same, q, ref.size, floor=-0.5)
    d_censored, p_censored = ks_two_sample(censored, q, ref.size, floor=-0.5)
    assert d_censored == d_exact and p_censored > 0.01  # the same test whichever scores were settled
    share_below = float(np.mean(same <= -0.5))
    assert d_censored >= abs(share_below - float(np.mean(ref <= -0.5))) - 0.01
    assert ks_two_sample(censored, q, ref.size)[1] < 1e-6  # uncensored, the atom at the floor looks like a shift
    moved_above = np.maximum(rng.normal(0.8, 1.0, 400), -0.5)  # moves above the floor are still seen
    assert ks_two_sample(moved_above, q, ref.size, floor=-0.5)[1] < 1e-6
    more_below = np.where(rng.random(400) < 0.7, -3.0, same)  # so is more mass below it
    assert ks_two_sample(more_below, q, ref.size, floor=-0.5)[1] < 1e-6
    with pytest.raises(ConfigError, match="floor"):
        ShiftMonitor(make_reference(ref[:100], np.full(100, 10.0)), floor=float("nan"))


def test_a_settling_grader_feeds_its_monitor_what_an_exact_one_would_after_censoring():
    from grader import load_grader

    query = "What is the capital of France?"
    chunks = ["Paris is the capital of France.", "Lyon is a city in France.", "Bananas are rich in potassium.",
              "The mitochondrion makes ATP.", "Warsaw is the capital of Poland."] * 4
    statuses = []
    for settle in (None, 0.05):
        grader = load_grader("default", threads=1)
        assert grader.settle_floor is not None  # the shipped default can settle
        reference = grader.bundle.manifest.reference
        grader.shift_monitor = ShiftMonitor(reference, window=20, check_every=5, floor=grader.settle_floor)
        grader.grade(query, chunks, settle_below=settle)
        statuses.append(grader.shift_status())
    exact, settled = statuses
    assert settled.seen == exact.seen == 20 and settled.checks == exact.checks >= 1
    assert settled.logit_statistic == pytest.approx(exact.logit_statistic, abs=1e-12)
    assert settled.length_statistic == exact.length_statistic
