"""The shipped ONNX embedder: agrees with sentence-transformers, is deterministic per text, and is verified."""

import shutil

import numpy as np
import pytest

from models import BundleError
from pipeline.retrieval.embedding import EMBEDDER_DIR, OnnxMiniLMEmbedder, SentenceTransformerEmbedder

TEXTS = ["What is the capital of France?", "Paris is the capital and largest city of France.",
         "Bananas grow in tropical regions.", "x"]


def test_an_exported_embedder_matches_sentence_transformers(tmp_path):
    from training.export_embedder import export_embedder

    export_embedder(tmp_path / "untrained")  # all-MiniLM-L6-v2 as the package ships it, what the reference runs
    onnx = OnnxMiniLMEmbedder(tmp_path / "untrained").embed(TEXTS)
    reference = SentenceTransformerEmbedder().embed(TEXTS)
    assert onnx.shape == (4, 384) and np.allclose(np.linalg.norm(onnx, axis=1), 1.0, atol=1e-5)
    assert float(np.min((onnx * reference).sum(axis=1))) > 0.98
    assert onnx[0] @ onnx[1] > onnx[0] @ onnx[2]  # the capital sentence is nearer the question than bananas


def test_the_shipped_embedder_is_the_fine_tuned_one_and_reads_as_it_should():
    import json

    manifest = json.loads((EMBEDDER_DIR / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["name"] == "crag-minilm-l6-tuned-v1" and manifest["parity"]["min_cosine_vs_torch_fp32"] > 0.97
    embedder = OnnxMiniLMEmbedder()
    shipped, untrained = embedder.embed(TEXTS), SentenceTransformerEmbedder().embed(TEXTS)
    assert np.allclose(np.linalg.norm(shipped, axis=1), 1.0, atol=1e-5)
    agreement = (shipped * untrained).sum(axis=1)  # moved by training (the untrained export agrees at > 0.99)
    assert float(agreement.min()) > 0.9 and float(agreement.max()) < 0.99
    assert shipped[0] @ shipped[1] > shipped[0] @ shipped[2]
    bundle = EMBEDDER_DIR.parent.parent / "bundles" / "default" / "embedder"  # the default grader fuses this one
    assert (bundle / "model.int8.onnx").read_bytes() == (EMBEDDER_DIR / "model.int8.onnx").read_bytes()


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
