import subprocess
import sys
import textwrap

import pytest

from grader import Grader, ThresholdPolicy, load_grader
from models import BundleError, Chunk, ConfigError, Verdict

QUERY = "What is the capital of France?"
RELEVANT = "Paris is the capital and largest city of France."
IRRELEVANT = "The mitochondrion is the powerhouse of the cell and produces most of its ATP."


@pytest.fixture(scope="module")
def grader():
    return load_grader("default", threads=2)


def test_grades_in_input_order_with_calibrated_probabilities(grader):
    assert isinstance(grader, Grader)
    chunks = [IRRELEVANT, Chunk(text=RELEVANT, chunk_id="c2"), IRRELEVANT]
    grades = grader.grade(QUERY, chunks)
    assert len(grades) == 3
    assert grades[1].chunk_id == "c2"
    assert grades[1].probability > grades[0].probability
    assert grades[0].probability == pytest.approx(grades[2].probability, abs=1e-6)
    assert grades[0].verdict is Verdict.IRRELEVANT and not grades[0].uncertain
    for g in grades:  # verdicts follow the bundle's thresholds
        assert (g.verdict, g.uncertain) == grader.policy.verdict(g.probability)
    assert all(g.decided_by == "model" and 0 <= g.probability <= 1 for g in grades)
    assert chunks[0] == IRRELEVANT  # inputs untouched


def test_a_grade_does_not_depend_on_the_other_chunks_nor_on_the_cores_used():
    """int8 runs one pair per call on single-thread sessions, so neither batch mates nor the pairs graded at
    the same time on other cores can shift a chunk's score (no cache here: every grade is computed)."""
    one_core = load_grader("default", threads=1, cache_pairs=0)
    two_cores = load_grader("default", threads=2, cache_pairs=0)
    assert one_core.batch_size == two_cores.batch_size == 1 and two_cores.threads == 2
    alone = one_core.grade(QUERY, [RELEVANT])[0]
    others = [IRRELEVANT * 20, "A short one about Lyon, France.", "Berlin is the capital of Germany."] * 3
    crowded = two_cores.grade(QUERY, [*others, RELEVANT, *reversed(others)])[len(others)]
    assert (crowded.probability, crowded.logit) == (alone.probability, alone.logit)
    assert two_cores.pairs_scored == 1 + len(set(others))  # a pair asked twice in one call is scored once


def test_a_bundle_already_read_loads_without_reading_it_again(grader):
    from models.bundle import read_bundle
    from models.registry import resolve_bundle

    bundle = read_bundle(resolve_bundle("default"))
    loaded = load_grader(bundle, threads=1)
    assert loaded.bundle is bundle
    assert loaded.grade(QUERY, [RELEVANT])[0].probability == pytest.approx(
        grader.grade(QUERY, [RELEVANT])[0].probability, abs=1e-6)


def test_repeated_pairs_come_from_the_cache_with_the_same_grade():
    grader = load_grader("default", threads=2, cache_pairs=2)
    first = grader.grade(QUERY, [RELEVANT, IRRELEVANT])
    assert grader.pairs_scored == 2
    again = grader.grade(QUERY, [IRRELEVANT, RELEVANT])
    assert grader.pairs_scored == 2
    assert [(g.probability, g.logit, g.verdict) for g in (again[1], again[0])] == [
        (g.probability, g.logit, g.verdict) for g in first]
    grader.grade("Another question about France?", [RELEVANT])  # evicts the least recently used pair
    assert len(grader.cache) == 2
    grader.grade(QUERY, [IRRELEVANT, RELEVANT])
    assert grader.pairs_scored == 4
    assert grader.cache.stats()["hits"] >= 3


def test_batched_int8_grades_are_not_cached_and_bad_sizes_are_refused():
    assert load_grader("default", threads=1, batch_size=4).cache.max_items == 0  # they depend on batch mates
    with pytest.raises(ConfigError, match="cache size"):
        load_grader("default", cache_pairs=-1)
    with pytest.raises(ConfigError, match="threads must be a positive int"):
        load_grader("default", threads=0)


def test_explicit_batches_cover_every_chunk(grader):
    chunks = [RELEVANT, IRRELEVANT] * 5
    single = [g.probability for g in grader.grade(QUERY, chunks)]
    batched = load_grader("default", threads=1, batch_size=3).grade(QUERY, chunks)
    assert len(batched) == 10
    assert [g.probability for g in batched] == pytest.approx(single, abs=0.1)
    assert batched[0].probability > batched[1].probability


def test_long_chunks_are_truncated_and_flagged(grader):
    long_text = " ".join(["Paris is in France."] * 400)
    grade = grader.grade(QUERY, [long_text, RELEVANT])
    assert grade[0].truncated and "truncated" in (grade[0].reason or "")
    assert grade[0].windows == grader.max_windows
    assert not grade[1].truncated and grade[1].windows == 1


def test_a_long_chunk_is_read_in_windows_and_the_best_window_counts(grader):
    """The answer at the end of a long page is found: it lies beyond the first window."""
    filler = " ".join(["The mitochondrion is the powerhouse of the cell."] * 40)  # ~400 tokens
    page = filler + " " + RELEVANT
    windowed = grader.grade(QUERY, [page])[0]
    first_only = load_grader("default", threads=1, max_windows=1).grade(QUERY, [page])[0]
    assert windowed.windows >= 2 and not windowed.truncated
    assert first_only.windows == 1 and first_only.truncated
    assert windowed.probability > first_only.probability
    alone = grader.grade(QUERY, [filler])[0]
    assert windowed.probability > alone.probability


def test_a_long_query_is_read_at_both_ends_and_the_grade_says_so(grader):
    """A question after a long story: the text keeps its windows, the question is read, the reason tells."""
    story = "I moved to Lyon last spring with my family and we have been travelling around Europe a lot since. " * 12
    page = " ".join(["The mitochondrion is the powerhouse of the cell."] * 40) + " " + RELEVANT
    long_query, short = story + QUERY, grader.grade(QUERY, [page, RELEVANT])
    graded = grader.grade(long_query, [page, RELEVANT])
    assert all("long query: the model read its first and last" in (g.reason or "") for g in graded)
    assert graded[0].windows >= 2 and not graded[0].truncated  # the page's end was read despite the query
    assert not any("long query" in (g.reason or "") for g in short)
    assert graded[1].probability > grader.grade(story, [RELEVANT])[0].probability  # the question was seen
    fast = load_grader("fast", threads=1)
    assert "long query" in (fast.grade(story * 2 + QUERY, [RELEVANT])[0].reason or "")  # past its 254 tokens
    assert fast.grade(long_query, [RELEVANT])[0].reason is None  # within them: read whole


def test_max_windows_must_be_positive():
    with pytest.raises(ConfigError, match="max_windows"):
        load_grader("default", max_windows=0)


def test_empty_chunk_is_decided_by_heuristic(grader):
    grades = grader.grade(QUERY, ["   ", RELEVANT])
    assert grades[0].decided_by == "heuristic" and grades[0].verdict is Verdict.IRRELEVANT
    assert grades[0].reason == "empty chunk text"
    assert grader.grade(QUERY, []) == []


def test_policy_override_sets_uncertain(grader):
    wide = load_grader("default", policy=ThresholdPolicy(lower=0.0, upper=1.0, decision=0.5))
    assert all(g.uncertain for g in wide.grade(QUERY, [RELEVANT, IRRELEVANT]))


@pytest.mark.parametrize("query", ["", "   ", None, 3])
def test_bad_query(grader, query):
    with pytest.raises(ConfigError, match="query must be a non-empty string"):
        grader.grade(query, [RELEVANT])


def test_bad_chunks(grader):
    with pytest.raises(ConfigError, match="not a single chunk"):
        grader.grade(QUERY, RELEVANT)
    with pytest.raises(ConfigError, match="must be a str or Chunk"):
        grader.grade(QUERY, [RELEVANT, 5])
    with pytest.raises(ConfigError, match=r"grade_many takes a list of \(query, chunks\) requests"):
        grader.grade_many((QUERY, [RELEVANT]))  # was "too many values to unpack"
    with pytest.raises(ConfigError, match=r"request 1 must be a \(query, chunks\) pair"):
        grader.grade_many([(QUERY, [RELEVANT]), QUERY])
    assert len(grader.grade_many([(QUERY, [RELEVANT]), [QUERY, [RELEVANT, RELEVANT]]])[1]) == 2
    assert [len(g) for g in grader.grade_many(((QUERY, [RELEVANT]), (QUERY, [RELEVANT])))] == [1, 1]  # requests: fine


def test_factory_errors(tmp_path):
    with pytest.raises(ConfigError, match="did you mean 'onnx'"):
        load_grader("default", backend="onx")
    with pytest.raises(BundleError):
        load_grader(tmp_path / "missing")
    with pytest.raises(ConfigError, match="threads"):
        load_grader("default", threads=0)
    with pytest.raises(ConfigError, match=r"no option 'thread' for the onnx backend \(did you mean 'threads'\?\)"):
        load_grader("default", thread=2)  # was Python's TypeError from the backend's constructor
    with pytest.raises(ConfigError, match=r"no option 'device' for the onnx backend; it takes \['batch_size'"):
        load_grader("fast", device="cuda")
    for model in (None, 3, ["default"]):
        with pytest.raises(ConfigError, match="model must be a bundle's name"):
            load_grader(model)


def test_onnx_path_imports_no_torch():
    code = textwrap.dedent("""
        import sys
        from grader import load_grader
        g = load_grader("default")
        g.grade("q?", ["some text"])
        bad = [m for m in ("torch", "transformers", "sklearn", "sentence_transformers") if m in sys.modules]
        print("LOADED:" + ",".join(bad))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "LOADED:"


def test_text_with_utf16_halves_is_graded_as_the_characters_they_stand_for(grader):
    # JSON's "\ud83d\ude00" escapes decode to two halves; a lone one cannot be tokenised (was a TypeError)
    chunk = "The Normans gave their name to Normandy, a region in France."
    halves = grader.grade("In what country is Normandy located? \ud83d\ude00", [chunk + " \ud83d"])[0]
    whole = grader.grade("In what country is Normandy located? \U0001f600", [chunk + " \ufffd"])[0]
    assert halves.decided_by == "model" and halves.probability == whole.probability
    assert load_grader("fast").grade("Normandy \ud83d", [chunk])[0].decided_by == "model"
