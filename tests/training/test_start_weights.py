"""Training from a grader bundle: its cross-encoder rebuilt in torch from the ONNX file it ships."""


import numpy as np
import pytest

from models import BundleError, ConfigError, read_bundle
from training.base_models import resolve_base
from training.data import PairSet, load_pairs
from training.finetune import TrainConfig, train_grader
from training.start_weights import model_from_bundle, onnx_state


def test_an_fp32_export_is_rebuilt_to_the_exact_weights_it_was_exported_from(tiny_torch_bundle, tiny_onnx_bundle):
    from grader.torch_model import load_cross_encoder

    original = {k: v.numpy() for k, v in load_cross_encoder(tiny_torch_bundle).state_dict().items()}
    rebuilt = onnx_state(tiny_onnx_bundle / "model.onnx")
    assert set(rebuilt) == {k for k in original if not k.startswith("encoder.pooler.")}
    for key, value in rebuilt.items():
        assert np.allclose(value, original[key], atol=1e-6), key


def test_the_int8_default_is_rebuilt_and_checked_against_its_own_scores(squad_pairs_file):
    pairs = [(p.query, p.text) for p in load_pairs(squad_pairs_file).pairs[:12]]
    model, record = model_from_bundle("default", resolve_base("default-base"), pairs)
    assert record["variant"] == "int8" and record["layers"] == 6 and record["fused"] is True
    assert record["rebuild_correlation"] >= 0.98 and len(record["sha256"]) == 64
    assert model.training  # ready to be trained


def test_training_can_start_from_the_default_and_records_where_it_started(squad_pairs_file, tmp_path):
    from grader import load_grader
    from models.bundle import sha256_file

    pairs = load_pairs(squad_pairs_file).pairs
    out = tmp_path / "from-default"
    train_grader(PairSet(pairs[:24]), PairSet(pairs[40:70]), out,
                 TrainConfig(max_steps=1, batch_size=8, progress=False, init="default",
                             learning_rate=2e-5, target_escalation=0.5, target_error=None, name="from-default"))
    training = read_bundle(out).manifest.training
    started = training["config"]["extra"]["init_bundle"]
    default = read_bundle(load_grader("default").bundle.path)
    assert training["config"]["init"] == "default" and started["name"] == "default"
    assert started["sha256"] == sha256_file(default.file("model.int8.onnx"))
    # one small step from the default: it still scores like the default's cross-encoder, not like a fresh model
    tuned = load_grader(out, backend="torch", cache_pairs=0)
    shipped = load_grader("default", cache_pairs=0, max_windows=1)
    sample = [(p.query, p.text) for p in pairs[70:100]]
    own = shipped.score_pairs(sample).fusion_inputs[0]
    assert np.corrcoef(tuned.score_pairs(sample).logits, own)[0, 1] > 0.95


def test_an_init_that_is_neither_a_checkpoint_nor_a_bundle_is_refused(squad_pairs_file, tmp_path):
    pairs = load_pairs(squad_pairs_file).pairs
    with pytest.raises(ConfigError, match=r"neither a trained checkpoint .* nor a grader bundle"):
        train_grader(PairSet(pairs[:24]), PairSet(pairs[40:70]), tmp_path / "out",
                     TrainConfig(max_steps=1, progress=False, init=str(tmp_path)))
    assert not (tmp_path / "out").exists()


def test_a_graph_without_the_graders_weights_is_refused(tmp_path, squad_pairs_file):
    from grader.embedder import EMBEDDER_DIR

    pairs = [(p.query, p.text) for p in load_pairs(squad_pairs_file).pairs[:4]]
    # the frozen bi-encoder's ONNX file: an encoder, but no grader head
    assert "cross.weight" not in onnx_state(EMBEDDER_DIR / "model.int8.onnx")
    with pytest.raises((BundleError, ConfigError)):
        model_from_bundle(EMBEDDER_DIR, resolve_base("default-base"), pairs)
