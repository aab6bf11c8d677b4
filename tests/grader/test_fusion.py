"""The fused score: weights read from a manifest entry, validated, and applied the same way everywhere."""

import numpy as np
import pytest

from grader.fusion import FEATURES, FusionHead, cosines
from models.errors import BundleError


def test_head_round_trips_and_combines_linearly():
    head = FusionHead(weights=(0.5, 4.0), bias=-1.0)
    again = FusionHead.from_dict(head.to_dict())
    assert again == head
    fused = again.combine(np.array([2.0, -2.0]), np.array([0.5, 0.0]))
    assert fused.tolist() == [0.5 * 2 + 4 * 0.5 - 1, 0.5 * -2 - 1]


@pytest.mark.parametrize(("entry", "message"), [
    ({"weights": [1, 2], "bias": 0}, "malformed"),
    ({"features": list(FEATURES), "weights": [1, "x"], "bias": 0}, "malformed"),
    ({"features": ["ce_logit", "bm25"], "weights": [1, 2], "bias": 0}, "re-run `crag fuse`"),
    ({"features": list(FEATURES), "weights": [1, 2, 3], "bias": 0}, "re-run `crag fuse`"),
    ({"features": list(FEATURES), "weights": [1, float("nan")], "bias": 0}, "finite"),
])
def test_malformed_manifest_entries_name_the_fix(entry, message):
    with pytest.raises(BundleError, match=message):
        FusionHead.from_dict(entry)


class _Embedder:
    """Unit vectors keyed by text, counting how often each text is embedded."""

    def __init__(self):
        self.calls: list[str] = []

    def embed(self, texts):
        self.calls += list(texts)
        vectors = {"q": [1.0, 0.0], "same": [1.0, 0.0], "other": [0.0, 1.0], "half": [0.6, 0.8]}
        return np.array([vectors[t] for t in texts], dtype=np.float32)


def test_cosines_embed_each_distinct_text_once():
    embedder = _Embedder()
    got = cosines(embedder, [("q", "same"), ("q", "other"), ("q", "half"), ("q", "same")])
    assert np.allclose(got, [1.0, 0.0, 0.6, 1.0])
    assert sorted(embedder.calls) == ["half", "other", "q", "same"]


class _WindowedEmbedder(_Embedder):
    """Texts named "long:a,b" have windows a and b; others one window."""

    def embed_windows(self, texts, *, max_windows):
        vectors, owner = [], []
        for i, text in enumerate(texts):
            parts = text.removeprefix("long:").split(",")[:max_windows]
            vectors += [self.embed([p])[0] for p in parts]
            owner += [i] * len(parts)
        return np.array(vectors), np.array(owner)


def test_cosines_count_the_best_window_of_a_long_text():
    pairs = [("q", "long:other,same"), ("q", "half")]
    assert np.allclose(cosines(_WindowedEmbedder(), pairs, max_windows=4), [1.0, 0.6])
    assert np.allclose(cosines(_WindowedEmbedder(), [("q", "half")], max_windows=1), [0.6])


def test_cosines_read_windows_in_whatever_order_the_embedder_returns_them():
    # sorted texts: "long:other,same" (rows 0-1), then "z-half" (row 2): a text's first window is not its index
    embedder = _WindowedEmbedder()
    embedder.embed = lambda texts: _Embedder.embed(embedder, [t.removeprefix("z-") for t in texts])
    pairs = [("q", "z-half"), ("q", "long:other,same"), ("q", "z-half")]
    assert np.allclose(cosines(embedder, pairs, max_windows=4), [0.6, 1.0, 0.6])


def test_a_head_without_cross_encoder_weight_ignores_its_logits():
    head = FusionHead(weights=(0.0, 4.0), bias=-1.0)
    assert not head.uses_cross_encoder and FusionHead(weights=(0.1, 4.0), bias=0.0).uses_cross_encoder
    fused = head.combine(np.array([np.nan, np.nan]), np.array([0.5, 0.0]))  # a grader that did not run it
    assert fused.tolist() == [1.0, -1.0]


def test_a_bundle_whose_fusion_gives_the_cross_encoder_no_weight_never_runs_it():
    from grader.factory import load_grader

    fast = load_grader("fast")  # its fusion chose the cosine alone (weight 0 on the cross-encoder)
    assert fast.fusion.weights[0] == 0.0 and not fast.runs_cross_encoder
    forced = load_grader("fast", cross_encoder=True)
    pairs = [("What religion were the Normans?", "The Normans were Catholic Christians. " * 3),
             ("What religion were the Normans?", "Warsaw is the capital of Poland. " * 300)]  # past 8 windows
    skipped, run = fast.score_pairs(pairs), forced.score_pairs(pairs)
    assert skipped.batch_seconds == [] and len(run.batch_seconds) >= 2  # no cross-encoder call at all
    assert np.isnan(skipped.fusion_inputs[0]).all() and np.isfinite(run.fusion_inputs[0]).all()
    assert skipped.logits.tolist() == run.logits.tolist()  # the same scores, bit for bit
    # its flags say what it read: the cosine's windows of the text alone, not the unrun cross-encoder's
    read, unread = fast.fusion_embedder.window_reading([t for _, t in pairs], max_windows=fast.max_windows)
    assert skipped.windows.tolist() == read.tolist() == [1, 8] and skipped.truncated.tolist() == unread.tolist()
    assert unread.tolist() == [False, True] and run.windows.tolist() == [1, 8] and run.truncated.tolist()[1]
    long_grade = fast.grade(pairs[1][0], [pairs[1][1]])[0]
    assert long_grade.windows == 8 and long_grade.truncated and "read 8 windows of 256 tokens" in long_grade.reason
    assert fast.describe()["runs_cross_encoder"] is False
    assert fast._sessions is None  # never even loaded: no memory or start-up spent on it


def test_the_cross_encoder_of_a_bundle_that_scores_with_it_cannot_be_left_out():
    from grader.factory import load_grader
    from models.errors import ConfigError

    with pytest.raises(ConfigError, match="cannot be left out"):
        load_grader("default", cross_encoder=False)
    for wrong in ("yes", 1):
        with pytest.raises(ConfigError, match="True, False or None"):
            load_grader("default", cross_encoder=wrong)


def test_a_head_with_a_cross_encoder_range_clips_to_it_and_round_trips():
    head = FusionHead(weights=(0.5, 4.0), bias=-1.0, ce_range=(-2.0, 3.0))
    again = FusionHead.from_dict(head.to_dict())
    assert again == head and again.to_dict()["ce_range"] == [-2.0, 3.0]
    fused = again.combine(np.array([5.0, -5.0, 1.0]), np.zeros(3))
    assert fused.tolist() == [0.5 * 3 - 1, 0.5 * -2 - 1, 0.5 * 1 - 1]
    assert "ce_range" not in FusionHead(weights=(0.5, 4.0), bias=-1.0).to_dict()  # older manifests stay as written


@pytest.mark.parametrize(("ce_range", "message"), [
    ([3.0, 1.0], "low < high"),
    ([float("nan"), 1.0], "low < high"),
    ([1.0], "malformed"),
    (["x", 1.0], "malformed"),
])
def test_a_malformed_cross_encoder_range_is_refused_by_name(ce_range, message):
    entry = {"features": list(FEATURES), "weights": [0.5, 4.0], "bias": 0.0, "ce_range": ce_range}
    with pytest.raises(BundleError, match=message):
        FusionHead.from_dict(entry)


def test_bounds_hold_every_score_the_cross_encoder_could_give():
    rng = np.random.default_rng(0)
    cosine = rng.uniform(-0.2, 1.0, 200)
    for weights in ((0.3, 4.0), (-0.3, 4.0)):  # either sign of the cross-encoder's weight
        head = FusionHead(weights=weights, bias=-1.5, ce_range=(-6.0, 4.0))
        low, high = head.bounds(cosine)
        for ce in (rng.uniform(-20, 20, 200), np.full(200, -6.0), np.full(200, 4.0)):
            fused = head.combine(ce, cosine)
            assert np.all(low <= fused) and np.all(fused <= high)
        assert np.any(high - low > 0.0)
    assert FusionHead(weights=(0.3, 4.0), bias=0.0).bounds(cosine) is None  # unbounded: nothing can be told
    exact = FusionHead(weights=(0.0, 4.0), bias=0.0)  # the cosine alone: the bounds are the score
    low, high = exact.bounds(cosine)
    assert low.tolist() == high.tolist() == exact.combine(np.full(200, np.nan), cosine).tolist()


def test_the_observed_range_is_widened_by_a_tenth_of_its_span():
    from grader.fusion import observed_ce_range
    from models.errors import ConfigError

    assert observed_ce_range(np.array([-4.0, 0.0, 6.0, -np.inf])) == (-5.0, 7.0)
    assert observed_ce_range(np.array([2.0, 2.0])) == (1.0, 3.0)  # no span: one logit each way
    with pytest.raises(ConfigError, match="no finite"):
        observed_ce_range(np.array([np.nan]))


def _reach_pairs(squad_pairs_file):
    import json

    rows = [json.loads(line) for line in squad_pairs_file.read_text(encoding="utf-8").splitlines()]
    by_query: dict[str, list[str]] = {}
    for row in rows:
        by_query.setdefault(row["query"], []).append(row["text"])
        for sentence in row["text"].split(". ")[:3]:  # short texts too: strips are what refinement asks about
            by_query[row["query"]].append(sentence)
    return list(by_query.items())[:8]


def test_upper_bounds_hold_every_grade_and_tell_unrelated_texts_apart(squad_pairs_file):
    from grader.factory import load_grader

    grader = load_grader("default", threads=1)
    assert grader.fusion.ce_range is not None  # the shipped default bounds its cross-encoder
    below_the_floor = 0
    for query, texts in _reach_pairs(squad_pairs_file):
        probs = np.array([g.probability for g in grader.grade(query, texts)])
        bounds = grader.upper_bounds(query, texts)
        assert np.all(probs <= bounds) and np.all(bounds <= 1.0)
        below_the_floor += int((bounds < 0.1).sum())
    assert below_the_floor > 0  # it does tell: unrelated texts are known to stay low without the cross-encoder
    assert grader.upper_bounds("q", []).tolist() == []


def test_upper_bounds_are_0_for_rule_decided_pairs_and_1_where_they_cannot_be_told():
    from dataclasses import replace

    from grader.factory import load_grader

    query = "What religion were the Normans?"
    texts = [query, "The Normans were Catholic Christians.", "Bananas are rich in potassium."]
    grader = load_grader("default", threads=1)
    bounds = grader.upper_bounds(query, texts)
    assert bounds[0] == 0.0 and 0.1 < bounds[1] < 1.0 and bounds[2] < 0.1  # an echo is graded 0
    grader.fusion = replace(grader.fusion, ce_range=None)  # unbounded cross-encoder
    assert grader.upper_bounds(query, texts).tolist() == [0.0, 1.0, 1.0]

    class NotMonotone:  # a calibration map of your own: no promise it peaks at an end of the range
        method = "own"

        def predict(self, logits):
            return np.cos(np.asarray(logits)) ** 2

    own = load_grader("default", threads=1)
    own.calibrator = NotMonotone()
    assert own.upper_bounds(query, texts).tolist() == [0.0, 1.0, 1.0]


def test_settled_chunks_keep_their_exact_verdict_without_the_cross_encoder(squad_pairs_file):
    from grader.cross_encoder import is_settled
    from grader.factory import load_grader
    from models.errors import ConfigError

    exact, settling = load_grader("default", threads=1, cache_pairs=0), load_grader("default", threads=1, cache_pairs=0)
    settled_count = 0
    for query, texts in _reach_pairs(squad_pairs_file):
        texts = [*texts, "Bananas are rich in potassium.", "Warsaw is the capital of Poland."]
        before = settling.pairs_scored
        truth, fast = exact.grade(query, texts), settling.grade(query, texts, settle_below=0.5)
        settled = [is_settled(g) for g in fast]
        assert settling.pairs_scored - before == len(texts) - sum(settled)  # the cross-encoder read the rest only
        for t, f, was_settled in zip(truth, fast, settled, strict=True):
            assert (t.verdict, t.uncertain, t.chunk_id) == (f.verdict, f.uncertain, f.chunk_id)
            if was_settled:  # at most the lower threshold (not 0.5): the band is never settled
                assert t.probability <= f.probability < exact.policy.lower and f.logit is None
            else:
                assert (t.probability, t.logit, t.windows) == (f.probability, f.logit, f.windows)
        settled_count += sum(settled)
    assert settled_count > 0
    assert settling.grade("q", ["Bananas are rich in potassium."], settle_below=0.0)[0].reason is None  # nothing < 0
    for wrong in (1.5, -0.1, True, "0.1", float("nan")):
        with pytest.raises(ConfigError, match="settle_below"):
            settling.grade("q", ["x"], settle_below=wrong)


def test_a_bundle_that_cannot_bound_its_cross_encoder_reads_every_chunk():
    from dataclasses import replace

    from grader.factory import load_grader

    grader = load_grader("default", threads=1)
    grader.fusion = replace(grader.fusion, ce_range=None)
    grader.settle_floor = grader._lower_threshold_logit()
    assert grader.settle_floor is None
    grades = grader.grade("What is the capital of France?", ["Bananas are rich in potassium."], settle_below=0.5)
    assert grades[0].logit is not None and grades[0].reason is None
    assert load_grader("fast").settle_floor is None  # the cosine alone: nothing to skip
