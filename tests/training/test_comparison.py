"""After training, the new grader and the one the user has are scored on the same validation pairs."""

import logging

from training.comparison import compare_on_validation, whole_queries
from training.data import load_pairs


def test_both_graders_score_the_same_whole_queries_and_a_worse_new_grader_is_told_so(
        tiny_onnx_bundle, squad_pairs_file, caplog):
    val = load_pairs(squad_pairs_file)
    with caplog.at_level(logging.WARNING, logger="training.comparison"):
        out = compare_on_validation(tiny_onnx_bundle, "default", val, limit=40, seed=1)
    assert out["pairs"] == len(whole_queries(val, 40, seed=1).pairs)
    assert out["model"] == "default" and out["this_grader_auroc"] < out["auroc"]  # 3 steps of training lose
    assert "crag calibrate --model default" in out["advice"] and out["advice"] in caplog.text
    assert "crag train --init default" in out["advice"]
    started = compare_on_validation(tiny_onnx_bundle, "default", val, limit=40, seed=1, started_from="default")
    assert "advice" in started and "--init" not in started["advice"]  # it already started from the default
    same = compare_on_validation("default", "default", val, limit=40, seed=1)
    assert same["auroc"] == same["this_grader_auroc"] and "advice" not in same
    everything = compare_on_validation("default", "fast", val, limit=len(val.pairs))
    assert everything["pairs"] == len(val.pairs)


def test_whole_queries_keeps_every_pair_of_the_queries_it_draws(squad_pairs_file):
    val = load_pairs(squad_pairs_file)
    count = {}
    for p in val.pairs:
        count[p.query_id] = count.get(p.query_id, 0) + 1
    part = whole_queries(val, 40, seed=1)
    drawn = {p.query_id for p in part.pairs}
    assert 0 < len(part.pairs) <= 40 and len(part.pairs) == sum(count[q] for q in drawn)
    assert whole_queries(val, 40, seed=1).pairs == part.pairs and whole_queries(val, 40, seed=2).pairs != part.pairs
    assert whole_queries(val, len(val.pairs), seed=1) is val
    assert len(whole_queries(val, 1, seed=1).pairs) == count[whole_queries(val, 1, seed=1).pairs[0].query_id]
