import pytest

from grader import ThresholdPolicy, decide
from models import ConfigError, Decision, Grade, Verdict


def _g(p, by="model", verdict=None, uncertain=False):
    policy = ThresholdPolicy(lower=0.2, upper=0.8)
    v, u = policy.verdict(p)
    return Grade(verdict=verdict or v, probability=p, decided_by=by, uncertain=u if by == "model" else uncertain)


def test_verdict_band():
    policy = ThresholdPolicy(lower=0.2, upper=0.8, decision=0.5)
    assert policy.verdict(0.9) == (Verdict.RELEVANT, False)
    assert policy.verdict(0.1) == (Verdict.IRRELEVANT, False)
    assert policy.verdict(0.6) == (Verdict.RELEVANT, True)
    assert policy.verdict(0.4) == (Verdict.IRRELEVANT, True)


@pytest.mark.parametrize("kwargs", [{"lower": 0.9, "upper": 0.1}, {"lower": -0.1}, {"upper": 2.0},
                                    {"lower": 0.6, "decision": 0.5}])
def test_policy_rejects_bad_values(kwargs):
    with pytest.raises(ConfigError):
        ThresholdPolicy(**kwargs)


def test_policy_dict_roundtrip():
    policy = ThresholdPolicy(lower=0.1, upper=0.7, decision=0.4)
    assert ThresholdPolicy.from_dict({**policy.to_dict(), "escalation_rate": 0.3}) == policy
    with pytest.raises(ConfigError, match="malformed"):
        ThresholdPolicy.from_dict({"lower": "x", "upper": 1})


def test_decide_crag_rule():
    assert decide([_g(0.1), _g(0.9)]) is Decision.CORRECT
    assert decide([_g(0.1), _g(0.05)]) is Decision.INCORRECT
    assert decide([_g(0.1), _g(0.5)]) is Decision.AMBIGUOUS
    assert decide([]) is Decision.INCORRECT


def test_decide_refuses_what_is_not_a_list_of_grades_and_reads_any_iterable():
    for bad, said in (("x", "got one str"), (_g(0.9), "got one Grade"), ([_g(0.9), 0.9], "item of type float"),
                      ([{"probability": 0.9}], "item of type dict")):
        with pytest.raises(ConfigError, match=said):
            decide(bad)
    with pytest.raises(ConfigError, match="policy must be a ThresholdPolicy"):
        decide([_g(0.9)], {"lower": 0.1, "upper": 0.8})
    assert decide(g for g in [_g(0.1), _g(0.9)]) is Decision.CORRECT  # a generator is read once, whole


def test_decide_with_policy_rereads_model_grades_only():
    grades = [_g(0.5), _g(0.3, by="llm", verdict=Verdict.IRRELEVANT)]
    assert decide(grades) is Decision.AMBIGUOUS
    assert decide(grades, ThresholdPolicy(lower=0.1, upper=0.45)) is Decision.CORRECT
    llm_partial = [Grade(verdict=Verdict.PARTIAL, probability=0.5, decided_by="llm")]
    assert decide(llm_partial, ThresholdPolicy(lower=0.1, upper=0.2)) is Decision.AMBIGUOUS


def test_answer_floor_is_read_from_the_manifest_entry_and_validated():
    from grader.policy import answer_floor_of

    assert answer_floor_of({}) is None and answer_floor_of({"floor": None}) is None
    assert answer_floor_of({"floor": 0.3, "objective": "x"}) == 0.3
    for bad in (1.5, -0.1, "0.3", True):
        with pytest.raises(ConfigError, match=r"mine: answerability floor.*crag answerability"):
            answer_floor_of({"floor": bad}, "mine")
