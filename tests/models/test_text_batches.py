"""Lists of texts and pairs checked where the models take them: one string alone is refused, not read by letter."""

import pytest

from grader import load_grader
from grader.embedder import OnnxMiniLMEmbedder
from models import ConfigError
from models.text_batches import pair_list, text_list


def test_a_list_of_texts_is_made_of_whole_characters_and_one_string_alone_is_refused():
    assert text_list(["a", "\ud83d\ude00 b", "x\ud83d"]) == ["a", "\U0001f600 b", "x\ufffd"]
    assert text_list(t for t in ["a"]) == ["a"]
    for bad, said in (("hello world", "got one str: wrap it in a list"), (b"hi", "got one bytes"),
                      (["ok", None], "text 1 is a NoneType"), ([3], "text 0 is a int")):
        with pytest.raises(ConfigError, match=said):
            text_list(bad)


def test_a_list_of_pairs_takes_tuples_or_lists_of_two_strings_and_refuses_one_pair_alone():
    assert pair_list([("q", "t"), ["q2", "t2"]]) == [("q", "t"), ("q2", "t2")]
    for bad, said in ((("q", "t"), "got one tuple: wrap it in a list"), ("qt", "got one str"),
                      ([("q", "t", "x")], "pair 0 is not a"), ([("q", None)], "pair 0 is not a"),
                      ([("q", "t"), "qt"], "pair 1 is not a")):
        with pytest.raises(ConfigError, match=said):
            pair_list(bad)


def test_the_embedder_and_the_grader_refuse_one_text_or_pair_alone():
    with pytest.raises(ConfigError, match="embed takes a list of texts"):
        OnnxMiniLMEmbedder().embed("hello world")  # was 11 vectors, one per character
    with pytest.raises(ConfigError, match="score_pairs takes a list of"):
        load_grader("default").score_pairs(("q", "t"))  # was "not enough values to unpack"
