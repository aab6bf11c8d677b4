"""The shipped bi-encoder reads a long text in overlapping windows; the first window is the indexed vector."""

import numpy as np
import pytest

from grader.embedder import EMBEDDER_DIR, OnnxMiniLMEmbedder
from grader.fusion import cosines
from models.errors import ConfigError

FILLER = "Our office hours, parking rules and the cafeteria menu for the coming weeks are listed below. " * 60
LATE_ANSWER = FILLER + "The Normans gave their name to Normandy, a region in northern France."
QUERY = "In what country is Normandy located?"


@pytest.fixture(scope="module")
def embedder():
    return OnnxMiniLMEmbedder(EMBEDDER_DIR, batch_size=1)


def test_short_text_has_one_window_equal_to_its_vector(embedder):
    vectors, owner = embedder.embed_windows(["Paris is the capital of France."], max_windows=4)
    assert owner.tolist() == [0]
    assert np.array_equal(vectors[0], embedder.embed(["Paris is the capital of France."])[0])


def test_long_text_is_read_in_at_most_max_windows(embedder):
    texts = ["short text", LATE_ANSWER]
    vectors, owner = embedder.embed_windows(texts, max_windows=3)
    assert owner.tolist() == [0, 1, 1, 1]  # first windows of every text first, then the extra ones
    assert np.array_equal(vectors[1], embedder.embed([LATE_ANSWER])[0])
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    again, _ = embedder.embed_windows(texts, max_windows=3)  # the extra windows come back from the cache
    assert np.array_equal(again, vectors)
    embedder.cache.clear()  # window count still known, vectors gone: tokenised and embedded again, same result
    assert np.array_equal(embedder.embed_windows(texts, max_windows=3)[0], vectors)
    _, more_owner = embedder.embed_windows([LATE_ANSWER], max_windows=8)
    assert 3 < len(more_owner) <= 8


def test_window_reading_says_how_many_windows_were_read_and_whether_text_was_left(embedder):
    texts = ["short text", LATE_ANSWER, "word " * 300]
    for max_windows in (1, 3, 8):
        fresh = OnnxMiniLMEmbedder(EMBEDDER_DIR, batch_size=1)  # nothing remembered: tokenised to find out
        read, unread = fresh.window_reading(texts, max_windows=max_windows)
        _, owner = embedder.embed_windows(texts, max_windows=max_windows)
        assert read.tolist() == np.bincount(owner, minlength=len(texts)).tolist()
        assert embedder.window_reading(texts, max_windows=max_windows)[1].tolist() == unread.tolist()
        assert unread.tolist() == [False, max_windows < len(embedder._windowed.encode(LATE_ANSWER).overflowing) + 1,
                                   max_windows == 1]  # 300 words: two windows of 256 tokens
    huge = "word " * 100_000  # past what 8 windows could read: never tokenised whole, still flagged
    assert [a.tolist() for a in embedder.window_reading([huge], max_windows=8)] == [[8], [True]]
    assert embedder.window_reading([], max_windows=8)[0].shape == (0,)


def test_answer_past_the_first_window_raises_the_best_window_cosine(embedder):
    first = cosines(embedder, [(QUERY, LATE_ANSWER)])[0]
    best = cosines(embedder, [(QUERY, LATE_ANSWER)], max_windows=8)[0]
    assert best > first + 0.1


@pytest.mark.parametrize("bad", [0, -1, 2.5, None])
def test_bad_window_count_is_refused(embedder, bad):
    with pytest.raises(ConfigError, match="max_windows"):
        embedder.embed_windows(["text"], max_windows=bad)


def test_the_cosine_reads_the_question_that_ends_a_long_message(embedder):
    story = "Last summer my family drove across Europe and we visited many castles, museums and old harbours. " * 16
    answer = "The Normans gave their name to Normandy, a region in northern France."
    long_query = story + QUERY  # ~330 tokens: plain truncation keeps only the story
    fitted, cut = embedder.fit_query(long_query)
    assert cut and fitted.endswith(QUERY) and embedder.fit_query(QUERY) == (QUERY, False)
    truncated = float(embedder.embed([long_query])[0] @ embedder.embed([answer])[0])
    (read_by_ends,) = cosines(embedder, [(long_query, answer)])
    assert read_by_ends > truncated + 0.05
    assert cosines(embedder, [(QUERY, answer)])[0] == pytest.approx(
        float(embedder.embed([QUERY])[0] @ embedder.embed([answer])[0]))  # a short query: as before
