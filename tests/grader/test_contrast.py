"""Swapped opposites: scored high by the model, not accepted without a second opinion."""

import json

import pytest

from grader import ThresholdPolicy, decide
from grader.cascade import CascadeGrader
from grader.contrast import contrast_reason
from grader.llm import LLMConfig, LLMGrader
from grader.resilience import RetryPolicy
from models import Decision, Verdict
from training.data import LabelledPair, PairSet
from training.evaluate import evaluate_grader

QUERY = "left ventricular hypertrophy treatment"
SWAPPED = "Right ventricular hypertrophy is treated by addressing the pulmonary cause."
RIGHT_ONE = "Left ventricular hypertrophy is treated by lowering blood pressure."


@pytest.mark.parametrize(("query", "text", "flagged"), [
    (QUERY, SWAPPED, True),
    ("Symptoms of acute pancreatitis?", "Chronic pancreatitis causes steady pain after meals.", True),
    ("How do I disable encryption on my phone?", "To enable encryption, open the security settings.", True),
    (QUERY, RIGHT_ONE, False),
    (QUERY, "Left and right ventricular hypertrophy differ in cause.", False),  # a comparison names both
    (QUERY, "The left ventricular wall thickens; right ventricular failure may follow.", False),
    ("What dynasty came before the Yuan?", "The Ming came after the Yuan.", False),  # 'the' is no content word
    ("Is the hotel near the city centre?", "The hotel is right next to the station.", False),  # no opposite pair
])
def test_contrast_reason(query, text, flagged):
    reason = contrast_reason(query, text)
    assert (reason is not None) is flagged
    if flagged:
        assert "where the question asks about" in reason


@pytest.fixture(scope="module")
def grader(swap_grader):
    return swap_grader


def test_a_swapped_opposite_is_scored_but_not_accepted(grader):
    assert grader.policy.verdict(grader.grade(QUERY, [SWAPPED])[0].probability) == (Verdict.RELEVANT, False)
    swapped, right = grader.grade(QUERY, [SWAPPED, RIGHT_ONE])
    assert swapped.uncertain and swapped.withheld and swapped.decided_by == "model"
    assert "'right ventricular' where the question asks about 'left ventricular'" in swapped.reason
    assert not right.uncertain and not right.withheld and right.verdict is Verdict.RELEVANT
    assert decide([swapped]) is Decision.AMBIGUOUS and decide([swapped], grader.policy) is Decision.AMBIGUOUS
    assert decide([swapped, right], grader.policy) is Decision.CORRECT


def test_the_cascade_asks_the_llm_about_a_swapped_opposite(grader, server):
    llm = LLMGrader(LLMConfig(model="fake", base_url=server.base_url, mode="json_object",
                              retry=RetryPolicy(attempts=2, base_s=0.01), timeout_s=2.0))
    cascade = CascadeGrader(primary=grader, escalate_to=llm, policy=grader.policy)
    swapped, right = cascade.grade(QUERY, [SWAPPED, RIGHT_ONE])
    assert len(server.requests) == 1 and swapped.decided_by == "llm" and right.decided_by == "model"
    assert SWAPPED in json.dumps(server.requests[0]) and RIGHT_ONE not in json.dumps(server.requests[0])
    alone = CascadeGrader(primary=grader, escalate_to=None, policy=ThresholdPolicy(lower=0.0, upper=0.5))
    (flagged,) = alone.grade(QUERY, [SWAPPED])  # re-banded by another policy: still withheld, and still says why
    assert flagged.uncertain and flagged.escalation_failed
    assert flagged.reason.startswith("escalation failed: no LLM") and "'right ventricular'" in flagged.reason


def test_evaluation_counts_a_withheld_pair_as_escalated(grader):
    data = PairSet([LabelledPair(query=QUERY, text=SWAPPED, label=Verdict.IRRELEVANT, query_id="q1"),
                    LabelledPair(query=QUERY, text=RIGHT_ONE, label=Verdict.RELEVANT, query_id="q1")])
    report = evaluate_grader(grader, data)
    assert report["withheld_swapped_opposites"] == 1
    assert report["escalation_rate"] == 0.5 and report["auto_decided"] == 1 and report["auto_error_rate"] == 0.0
