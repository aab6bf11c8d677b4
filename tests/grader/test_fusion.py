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
