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


@pytest.fixture(scope="module")
def own_embedder(tmp_path_factory):
    """An export of crag export-embedder other than the shipped one (as a user's fine-tuned embedder would be)."""
    from training.export_embedder import export_embedder

    out = tmp_path_factory.mktemp("own") / "own-onnx"
    export_embedder(out, name="own-embedder")
    return out


def test_crag_embedder_makes_an_index_embed_with_another_export_and_record_it(own_embedder, tmp_path, monkeypatch):
    from models import DataError
    from pipeline.retrieval.embedding import default_embedder, default_embedder_name
    from pipeline.retrieval.index import LocalHybridIndex
    from tests.pipeline.conftest import TENANT_A, make_chunk

    monkeypatch.setenv("CRAG_EMBEDDER", str(own_embedder))
    assert default_embedder_name() == "own-embedder" and default_embedder().name == "own-embedder"
    chunk = make_chunk("a-paris", "Paris is the capital of France.")
    index = LocalHybridIndex(tmp_path / "idx")
    index.write([chunk])
    assert index.stats()["embedder"] == "own-embedder"
    stored = index._conn().execute("SELECT vector FROM vectors").fetchone()[0]
    own = OnnxMiniLMEmbedder(own_embedder).embed([chunk.text])[0]
    assert np.array_equal(np.frombuffer(stored, dtype=np.float32), own)  # its vectors, not the shipped model's
    assert [c.chunk_id for c, _ in index.search("capital of France", TENANT_A, k=1)] == ["a-paris"]
    monkeypatch.delenv("CRAG_EMBEDDER")
    with pytest.raises(DataError, match=r"built with the embedder 'own-embedder'.*CRAG_EMBEDDER=<its folder>"):
        LocalHybridIndex(tmp_path / "idx").search("capital of France", TENANT_A, k=1)


@pytest.mark.parametrize("where", ["missing", "grader bundle", "empty"])
def test_a_crag_embedder_that_is_not_an_embedder_export_is_refused_by_name(where, tmp_path, monkeypatch):
    from models import ConfigError
    from models.registry import resolve_bundle
    from pipeline.retrieval.embedding import default_embedder, default_embedder_name

    folder = {"missing": tmp_path / "typo", "grader bundle": resolve_bundle("default"), "empty": tmp_path}[where]
    monkeypatch.setenv("CRAG_EMBEDDER", str(folder))
    for call in (default_embedder, default_embedder_name):
        with pytest.raises(ConfigError, match=r"CRAG_EMBEDDER=.* is not an embedder .*crag export-embedder"):
            call()


def test_the_cli_indexes_with_crag_embedder_and_says_how_to_read_the_index_without_it(own_embedder, tmp_path,
                                                                                        monkeypatch, capsys):
    from pipeline.cli.main import main

    page = tmp_path / "paris.txt"
    page.write_text("Paris is the capital of France. It lies on the Seine.", encoding="utf-8")
    index = str(tmp_path / "idx")
    monkeypatch.setenv("CRAG_EMBEDDER", str(own_embedder))
    assert main(["index", "add", str(page), "--index", index, "--tenant", "acme"]) == 0
    capsys.readouterr()
    assert main(["index", "search", "capital of France", "--index", index, "--tenant", "acme", "--json"]) == 0
    assert "Paris" in capsys.readouterr().out
    monkeypatch.delenv("CRAG_EMBEDDER")
    assert main(["index", "search", "capital of France", "--index", index, "--tenant", "acme"]) == 2
    said = capsys.readouterr().err
    assert "built with the embedder 'own-embedder'" in said and "CRAG_EMBEDDER=<its folder>" in said
