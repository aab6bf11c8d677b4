"""The answerability floor: fitted per group on questions with and without an answer, stored in a new bundle,
read by the grader, and refused when the data cannot support it."""

import json

import pytest

from grader.factory import load_grader
from models import ConfigError
from models.bundle import read_bundle
from models.types import Verdict
from pipeline.cli.main import main
from training.answerability import QueryBest, answerability_report, best_per_query, fit_answer_floor
from training.data import LabelledPair, load_pairs
from training.recalibrate import cross_encoder_grader


def _rows(group, answerable, unanswerable):
    return ([QueryBest(f"{group}-a{i}", group, True, p) for i, p in enumerate(answerable)]
            + [QueryBest(f"{group}-u{i}", group, False, p) for i, p in enumerate(unanswerable)])


def test_floor_is_the_highest_that_keeps_the_answer_rate():
    rows = _rows("wiki", [0.5, 0.6, 0.7, 0.8], [0.1, 0.2, 0.3, 0.55])
    fit = fit_answer_floor(rows, min_answer_rate=0.75, min_per_class=4)
    assert fit["floor"] == 0.6  # 3 of 4 answerable questions reach it; 0.55 is abstained on too
    assert fit["fit"]["wiki"] == {"answerable": 4, "unanswerable": 4, "answer_rate": 0.75, "abstention_rate": 1.0,
                                  "balanced_accuracy": 0.875, "auroc": 0.9375}
    assert fit["binding_group"] == "wiki" and fit["mean_abstention_rate"] == 1.0 and fit["questions"] == 8
    assert fit_answer_floor(rows, min_answer_rate=1.0, min_per_class=4)["floor"] == 0.5
    assert fit_answer_floor(rows, min_answer_rate=0.5, min_per_class=4)["floor"] == 0.7


def test_the_worst_group_binds_and_small_groups_are_only_reported():
    easy = _rows("easy", [0.9] * 40, [0.6] * 40)
    hard = _rows("hard", [0.2] * 5 + [0.4] * 15, [])  # no unanswerable questions: it still binds the floor
    tiny = _rows("tiny", [0.05], [0.95] * 10)  # one answerable question cannot bind it
    fit = fit_answer_floor(easy + hard + tiny, min_answer_rate=0.75, min_per_class=10)
    assert fit["answer_groups"] == ["easy", "hard"] and fit["abstain_groups"] == ["easy", "tiny"]
    assert fit["floor"] == 0.4 and fit["binding_group"] == "hard"
    assert fit["fit"]["easy"]["abstention_rate"] == 0.0 and fit["fit"]["tiny"]["answer_rate"] == 0.0
    assert answerability_report(easy, 0.7)["easy"]["balanced_accuracy"] == 1.0


def test_data_that_cannot_support_a_floor_is_refused_with_the_counts():
    with pytest.raises(ConfigError, match=r"at least 10 answerable and 10 unanswerable.*wiki: 12 answerable / 2"):
        fit_answer_floor(_rows("wiki", [0.5] * 12, [0.1] * 2))
    with pytest.raises(ConfigError, match=r"not in their chunks; or lower --min-per-class$"):
        fit_answer_floor(_rows("wiki", [0.5] * 12, [0.1] * 2))  # a few unanswerable: a lower minimum may do
    with pytest.raises(ConfigError, match=r"To fix: add questions with a relevant or partial chunk$"):
        fit_answer_floor(_rows("wiki", [], [0.1] * 12))  # none answerable: no minimum would do
    with pytest.raises(ConfigError, match="min_per_class"):
        fit_answer_floor(_rows("wiki", [0.5], [0.1]), min_per_class=0)
    with pytest.raises(ConfigError, match="min_answer_rate"):
        fit_answer_floor(_rows("wiki", [0.5], [0.1]), min_answer_rate=0, min_per_class=1)


def test_best_probability_per_question_is_what_grade_gives(squad_pairs_file):
    grader = cross_encoder_grader("default")
    pairs = load_pairs(squad_pairs_file).pairs
    rows = best_per_query(grader, pairs, "source")
    assert len(rows) == 30 and sum(r.answerable for r in rows) == 18
    first = pairs[0].query_id
    members = [p for p in pairs if p.query_id == first]
    expected = max(g.probability for g in grader.grade(members[0].query, [p.text for p in members]))
    assert next(r.best for r in rows if r.query_id == first) == pytest.approx(expected, abs=1e-6)
    with pytest.raises(ConfigError, match="empty"):
        best_per_query(grader, [])
    partial = [LabelledPair(query="What is the capital of France?", text=text, label=label, query_id=qid)
               for qid, text, label in (("q1", "Paris is in France.", Verdict.PARTIAL),
                                        ("q1", "Bananas are yellow.", Verdict.IRRELEVANT),
                                        ("q2", "Bananas are yellow.", Verdict.IRRELEVANT))]
    assert [(r.query_id, r.answerable) for r in best_per_query(grader, partial)] == [("q1", True), ("q2", False)]


def test_command_writes_a_new_bundle_whose_grader_carries_the_floor(squad_pairs_file, tmp_path, capsys):
    out = tmp_path / "with-floor"
    assert main(["answerability", "--data", str(squad_pairs_file), "--test", str(squad_pairs_file),
                 "--out", str(out)]) == 0
    printed = json.loads(capsys.readouterr().out)
    manifest = read_bundle(out).manifest
    floor = manifest.answerability["floor"]
    assert printed["floor"] == floor and 0 < floor < 1
    assert manifest.answerability["fitted_on"]["queries"] == 30
    assert manifest.answerability["test"]["groups"]["all"]["answerable"] == 18
    assert load_grader(str(out)).answer_floor == floor
    card = (out / "MODEL_CARD.md").read_text(encoding="utf-8")
    assert f"reaches P = {floor:.3f}" in card and "| test | all | 18 |" in card
    assert "## Metrics" in card and "## Shift reference" in card  # the rest of the source's card is kept
    # the source is never overwritten, and too few unanswerable questions is a clear refusal, nothing written
    assert main(["answerability", "--data", str(squad_pairs_file), "--out", str(out)]) == 2
    refused = tmp_path / "refused"
    assert main(["answerability", "--data", str(squad_pairs_file), "--min-per-class", "13",
                 "--out", str(refused)]) == 2
    assert "unanswerable" in capsys.readouterr().err and not refused.exists()
