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
