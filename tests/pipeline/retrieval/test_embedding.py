"""The shipped ONNX embedder: agrees with sentence-transformers, is deterministic per text, and is verified."""

import shutil

import numpy as np
import pytest

from models import BundleError
from pipeline.retrieval.embedding import EMBEDDER_DIR, OnnxMiniLMEmbedder, SentenceTransformerEmbedder

TEXTS = ["What is the capital of France?", "Paris is the capital and largest city of France.",
         "Bananas grow in tropical regions.", "x"]


def test_onnx_embedder_matches_sentence_transformers():
    onnx = OnnxMiniLMEmbedder().embed(TEXTS)
    reference = SentenceTransformerEmbedder().embed(TEXTS)
    assert onnx.shape == (4, 384) and np.allclose(np.linalg.norm(onnx, axis=1), 1.0, atol=1e-5)
    assert float(np.min((onnx * reference).sum(axis=1))) > 0.98
    assert onnx[0] @ onnx[1] > onnx[0] @ onnx[2]  # the capital sentence is nearer the question than bananas


def test_a_vector_does_not_depend_on_its_batch_mates():
    embedder = OnnxMiniLMEmbedder()
    alone = embedder.embed([TEXTS[1]])[0]
    together = embedder.embed(TEXTS)[1]
    assert np.array_equal(alone, together)


def test_tampered_bundle_is_refused(tmp_path):
    copy = tmp_path / "emb"
    shutil.copytree(EMBEDDER_DIR, copy)
    with (copy / "tokenizer.json").open("a", encoding="utf-8") as handle:
        handle.write(" ")
    with pytest.raises(BundleError, match="sha256"):
        OnnxMiniLMEmbedder(copy)
    with pytest.raises(BundleError, match="manifest"):
        OnnxMiniLMEmbedder(tmp_path / "missing")
