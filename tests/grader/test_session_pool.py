"""Single-thread sessions side by side: results in input order, safe from many threads, bad sizes refused."""

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from grader.embedder import EMBEDDER_DIR, OnnxMiniLMEmbedder
from grader.session_pool import SessionPool
from models import BundleError, ConfigError

MODEL = EMBEDDER_DIR / "model.int8.onnx"


def feeds(length: int) -> dict[str, np.ndarray]:
    ids = np.full((1, length), 2023, dtype=np.int64)
    ids[0, 0], ids[0, -1] = 101, 102
    return {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}


def test_map_keeps_input_order_and_matches_one_call_at_a_time():
    pool = SessionPool(MODEL, 2)
    lengths = [40, 3, 17, 64, 5, 9]
    alone = [pool.run(feeds(n)) for n in lengths]
    together = pool.map(lambda n: pool.run(feeds(n)), lengths)
    assert [a.shape for a in together] == [(1, n, 384) for n in lengths]
    assert all(np.array_equal(a, b) for a, b in zip(alone, together, strict=True))
    with ThreadPoolExecutor(6) as callers:  # more callers than sessions: they wait for a free one
        crowded = list(callers.map(lambda n: pool.run(feeds(n)), lengths * 3))
    assert all(np.array_equal(a, b) for a, b in zip(alone * 3, crowded, strict=True))
    pool.close()


def test_bad_sizes_and_models_are_refused(tmp_path):
    for bad in (0, -2, 1.5, True):
        with pytest.raises(ConfigError, match="threads must be a positive int"):
            SessionPool(MODEL, bad)
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"not a model")
    with pytest.raises(BundleError, match="cannot load the grader model"):
        SessionPool(broken, 1, what="grader model")


def test_embedders_of_one_model_share_exact_vectors():
    first, second = OnnxMiniLMEmbedder(threads=2), OnnxMiniLMEmbedder(threads=1)
    assert first.cache is second.cache and first.vector_identity == second.vector_identity
    first.cache.clear()
    texts = ["Paris is the capital of France.", "A much longer text " * 20, "Paris is the capital of France."]
    vectors = first.embed(texts)
    assert len(first.cache) == 2  # the repeated text was embedded once
    first.cache.clear()
    assert np.array_equal(second.embed(texts[::-1]), vectors[::-1])  # one text per call: same bits on any path
    batched = OnnxMiniLMEmbedder(batch_size=4)
    assert batched.cache.max_items == 0 and batched.vector_identity is None
