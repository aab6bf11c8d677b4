import numpy as np
import pytest

from grader.encoding import PairEncoder
from models import BundleError, ConfigError, resolve_bundle

TOKENIZER = resolve_bundle("default") / "tokenizer.json"


def test_batches_cover_every_pair_once_and_pad_dynamically():
    enc = PairEncoder(TOKENIZER, max_length=64)
    pairs = [("q", "word " * n) for n in (1, 50, 3, 200, 2)]
    batches = list(enc.encode(pairs, batch_size=2))
    seen = np.concatenate([b.index for b in batches])
    assert sorted(seen.tolist()) == list(range(5))
    widths = [b.input_ids.shape[1] for b in batches]
    assert max(widths) == 64 and min(widths) < 16
    truncated = {int(i): bool(t) for b in batches for i, t in zip(b.index, b.truncated, strict=True)}
    assert truncated[3] and not truncated[0]
    for b in batches:
        assert (b.attention_mask.sum(1) > 0).all()
        assert b.input_ids.dtype == np.int64


def test_errors(tmp_path):
    with pytest.raises(ConfigError, match="max_length"):
        PairEncoder(TOKENIZER, max_length=4)
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{}", encoding="utf-8")
    with pytest.raises(BundleError, match="cannot read tokenizer"):
        PairEncoder(bad, max_length=64)
    with pytest.raises(ConfigError, match="batch_size"):
        list(PairEncoder(TOKENIZER, max_length=64).encode([("a", "b")], batch_size=0))


STORY = ("I ordered a winter coat and two pairs of boots last month for my family, the coat came late and the boots "
         "were the wrong size, and support asked me for my order number three times. ")
QUESTION = "How many days do I have to return an item for a full refund?"


def _tokens(text):
    from tokenizers import Tokenizer

    return len(Tokenizer.from_file(str(TOKENIZER)).encode(text, add_special_tokens=False).ids)


def test_a_long_query_keeps_both_ends_within_half_the_window():
    enc = PairEncoder(TOKENIZER, max_length=256)
    assert enc.fit_query(QUESTION) == (QUESTION, False)
    story_first = STORY * 6 + QUESTION  # ~250 tokens: the question at the end
    fitted, cut = enc.fit_query(story_first)
    assert cut and fitted.endswith(QUESTION) and fitted.startswith("I ordered a winter coat")
    assert " ... " in fitted and _tokens(fitted) <= enc.query_budget
    fitted, cut = enc.fit_query(QUESTION + " Details: " + STORY * 6)  # the question first
    assert cut and fitted.startswith(QUESTION)
    fitted, cut = enc.fit_query("x" * 100_000 + " " + QUESTION)  # one endless "word": never tokenised whole
    assert cut and fitted.endswith(QUESTION) and len(fitted) < 2_000


@pytest.mark.parametrize("repeats", range(6, 13))  # ~170-250 tokens: once the room left for text was under the stride
def test_a_query_of_any_length_leaves_the_text_its_windows(repeats):
    enc = PairEncoder(TOKENIZER, max_length=256)
    text = "The store opens at nine. " * 60 + "Returns are accepted within 45 days."  # ~370 tokens
    windows, batches = enc.encode_windows([(STORY * repeats + QUESTION, text)], max_windows=8)
    assert windows.read[0] > 1 and not windows.unread[0]  # the answer at the end is read
    for batch in batches:
        query_tokens = ((batch.token_type_ids == 0) & (batch.attention_mask == 1)).sum(axis=1)
        assert (query_tokens <= enc.query_budget + 2).all()  # [CLS] query [SEP] in every window
