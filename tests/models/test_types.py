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


def test_a_grade_takes_a_verdicts_name_as_that_verdict_and_refuses_other_values():
    grade = Grade(verdict="relevant", probability=0.9, llm_verdict="partial")  # from a grader of your own
    assert grade.verdict is Verdict.RELEVANT and grade.llm_verdict is Verdict.PARTIAL  # decide() compares by identity
    for bad in ({"verdict": "relevent"}, {"verdict": 1}, {"verdict": Verdict.RELEVANT, "llm_verdict": "yes"}):
        with pytest.raises(ConfigError, match="must be a Verdict or one of"):
            Grade(probability=0.5, **bad)


def test_a_chunk_refuses_ids_sources_and_metadata_of_the_wrong_type():
    for bad, said in (({"chunk_id": 5}, "Chunk.chunk_id must be a str or None, got int"),
                      ({"source": b"x"}, "Chunk.source must be a str or None"),
                      ({"metadata": [1]}, "Chunk.metadata must be a dict, got list")):
        with pytest.raises(ConfigError, match=said):
            Chunk(text="x", **bad)
