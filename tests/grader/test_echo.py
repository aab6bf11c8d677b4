"""Echoes of the question are decided irrelevant before the model, which scores them high."""

import pytest

from grader import load_grader
from grader.echo import non_answer_reason, repeats_query, rule_decided


@pytest.mark.parametrize(("query", "text", "echo"), [
    ("hello", "hello", True),
    ("Is there an IKEA in Dubai?", "So is there an IKEA there?", True),
    ("Is there an IKEA in Dubai?", "i have the same problem too", True),
    ("What is the capital of France?", "???", True),
    ("What is the capital of France?", "Paris.", False),
    ("When was the Eiffel Tower built?", "1889", False),
    ("x", "y", False),
    # forum filler around a restated question adds no information either
    ("How do I keep a local copy of a youtube video?",
     "Same problem here. How do I keep a local copy of a youtube video? Any ideas?", True),
    ("what is a divorce bench trial", "Hi, can someone tell me what a divorce bench trial is?", True),
    ("what is a divorce bench trial", "Can someone tell me? A bench trial is decided by a judge, not a jury.", False),
])
def test_repeats_query(query, text, echo):
    assert repeats_query(query, text) is echo


def test_grader_decides_echoes_without_the_model_and_grades_the_rest():
    grader = load_grader("default")
    echo, answer = grader.grade("Is there an IKEA in Dubai?",
                                ["So is there an IKEA there?", "Yes, IKEA Dubai is at Festival City."])
    assert (echo.verdict.value, echo.decided_by, echo.probability) == ("irrelevant", "heuristic", 0.0)
    assert "repeats" in echo.reason and not echo.uncertain
    assert answer.decided_by == "model" and answer.probability > 0.3


@pytest.mark.parametrize(("query", "text", "reason"), [
    ("What is the capital of France?", "   ", "empty"),
    ("hello", "hello", "repeats"),
    ("return policy", "a", "only common words"),  # repeats nothing of the query: not called an echo
    ("What is the capital of France?", "???", "only common words"),
    ("Is there an IKEA in Dubai?", "So is there an IKEA there?", "repeats"),
    ("x", "y", "no word"),
    ("What is the capital of France?", "- - z", "no word"),
    ("What is the capital of France?", "Paris.", None),
    ("When was the Eiffel Tower built?", "1889", None),
    ("Why does my login fail?", "Have you looked at your account's permissions?", None),  # answers as a question
])
def test_non_answer_reason(query, text, reason):
    got = non_answer_reason(query, text)
    assert got is None if reason is None else reason in got


def test_grader_decides_wordless_chunks_without_the_model():
    (grade,) = load_grader("default").grade("x", ["y"])
    assert (grade.verdict.value, grade.decided_by, grade.probability) == ("irrelevant", "heuristic", 0.0)
    assert "no word" in grade.reason


def test_rule_decided_marks_the_pairs_grade_decides_without_the_model():
    pairs = [("hello", "hello"), ("x", "y"), ("What is the capital of France?", "Paris."),
             ("What is the capital of France?", "   ")]
    assert rule_decided(pairs).tolist() == [True, True, False, True]
    assert rule_decided([]).shape == (0,)


def test_scores_as_graded_gives_every_pair_what_grade_gives_it():
    """Evaluation, grade-file and the cascade's evaluation read these numbers: they must be grade's."""
    grader = load_grader("default")
    query = "What is the capital of France?"
    texts = ["Paris is the capital of France.", "capital of France?", "   ", "Bananas are yellow.", "- - z"]
    graded = grader.scores_as_graded([(query, t) for t in texts], block=2)
    grades = grader.grade(query, texts)
    assert graded.ruled.tolist() == [g.decided_by == "heuristic" for g in grades] == [False, True, True, False, True]
    assert graded.probabilities.tolist() == pytest.approx([g.probability for g in grades], abs=1e-12)
    assert len(graded.scored.logits) == 2 and graded.truncated.tolist() == [False] * 5
    ce, cosine = graded.scored.fusion_inputs  # blocks merged without losing the fused bundle's inputs
    assert len(ce) == len(cosine) == 2
    assert len(grader.scores_as_graded([(query, "   ")]).scored.logits) == 0  # all ruled: the model never runs
    assert grader.scores_as_graded([]).probabilities.shape == (0,)
