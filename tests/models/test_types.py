import pytest

from models import Chunk, ConfigError, Grade, Verdict, as_chunk


def test_grade_validates_probability_and_decider():
    with pytest.raises(ConfigError, match="probability"):
        Grade(verdict=Verdict.RELEVANT, probability=1.5)
    with pytest.raises(ConfigError, match="decided_by"):
        Grade(verdict=Verdict.RELEVANT, probability=0.5, decided_by="guess")


def test_grade_to_dict_uses_plain_values():
    d = Grade(verdict=Verdict.PARTIAL, probability=0.4, llm_verdict=Verdict.RELEVANT, decided_by="llm").to_dict()
    assert d["verdict"] == "partial" and d["llm_verdict"] == "relevant"


def test_as_chunk():
    assert as_chunk("x") == Chunk(text="x")
    with pytest.raises(ConfigError, match="must be a str or Chunk"):
        as_chunk(3)  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        Chunk(text=None)  # type: ignore[arg-type]


def test_verdict_positive():
    assert Verdict.PARTIAL.is_positive and not Verdict.IRRELEVANT.is_positive
