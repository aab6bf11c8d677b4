"""Signed int8 weights made at load time: exact, only where asked for, nothing else of the model changed."""

import numpy as np
import pytest

from grader import int8_weights
from grader.int8_weights import signed_weight_model
from grader.session_pool import SessionPool
from models import BundleError, ConfigError
from models.registry import BUNDLES_DIR

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

DEFAULT_MODEL = BUNDLES_DIR / "default" / "model.int8.onnx"


def _matmul_integer_model(path, weights, weight_zero, activation_zero=3):
    """y = MatMulInteger(x, W, x_zero, W_zero), all u8: the form `crag export` writes, in miniature."""
    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["x", "w", "x_zero", "w_zero"], ["y"])], "mini",
        [helper.make_tensor_value_info("x", TensorProto.UINT8, [None, weights.shape[0]])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, [None, weights.shape[1]])],
        [numpy_helper.from_array(weights.astype(np.uint8), "w"),
         numpy_helper.from_array(np.asarray(weight_zero, np.uint8), "w_zero"),
         numpy_helper.from_array(np.asarray(activation_zero, np.uint8), "x_zero")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def test_the_rewrite_subtracts_128_from_weights_and_their_zero_points_only(tmp_path, monkeypatch):
    monkeypatch.setenv("CRAG_INT8_WEIGHTS", "signed")
    rng = np.random.default_rng(0)
    weights = rng.integers(0, 256, size=(16, 4))
    path = _matmul_integer_model(tmp_path / "m.onnx", weights, [120, 128, 131, 7])
    before = path.read_bytes()
    rewritten = onnx.load_from_string(signed_weight_model(path))
    assert path.read_bytes() == before  # the file (and the bundle's checksum) stay as exported
    tensors = {t.name: t for t in rewritten.graph.initializer}
    assert tensors["w"].data_type == TensorProto.INT8
    assert (numpy_helper.to_array(tensors["w"]).astype(int) == weights - 128).all()
    assert numpy_helper.to_array(tensors["w_zero"]).tolist() == [-8, 0, 3, -121]
    assert tensors["x_zero"].data_type == TensorProto.UINT8  # the activations' zero point keeps its meaning
    original = onnx.load(path)
    for model in (original, rewritten):
        del model.graph.initializer[:]
    assert original == rewritten  # nodes, inputs, outputs, opsets: untouched

    ort = pytest.importorskip("onnxruntime")
    x = rng.integers(0, 40, size=(3, 16)).astype(np.uint8)  # small values: no CPU saturates these sums
    as_exported = ort.InferenceSession(str(path)).run(None, {"x": x})[0]
    signed = ort.InferenceSession(signed_weight_model(path)).run(None, {"x": x})[0]
    assert (as_exported == signed).all()
    expected = (x.astype(int) - 3) @ (weights - np.array([120, 128, 131, 7]))
    assert (signed == expected).all()


def test_the_setting_decides_and_a_bad_value_is_named(tmp_path, monkeypatch):
    path = _matmul_integer_model(tmp_path / "m.onnx", np.full((4, 2), 200), 128)
    monkeypatch.setenv("CRAG_INT8_WEIGHTS", "as-stored")
    assert signed_weight_model(path) is None
    monkeypatch.setenv("CRAG_INT8_WEIGHTS", "auto")
    monkeypatch.setattr(int8_weights, "cpu_runs_signed_exactly", lambda: False)  # a CPU without AVX512-VNNI
    assert signed_weight_model(path) is None
    monkeypatch.setattr(int8_weights, "cpu_runs_signed_exactly", lambda: True)
    assert signed_weight_model(path) is not None
    monkeypatch.setenv("CRAG_INT8_WEIGHTS", "s9")
    with pytest.raises(ConfigError, match=r"CRAG_INT8_WEIGHTS='s9' is not a choice: use one of auto, signed"):
        signed_weight_model(path)
    with pytest.raises(ConfigError, match="CRAG_INT8_WEIGHTS='s9'"):
        SessionPool(path, 1)  # named as a setting, not as a broken model


def test_a_model_without_unsigned_weights_is_loaded_as_it_is(tmp_path, monkeypatch):
    monkeypatch.setenv("CRAG_INT8_WEIGHTS", "signed")
    embedder = next((BUNDLES_DIR / "default" / "embedder").glob("*.onnx"))  # exported with signed weights
    assert signed_weight_model(embedder) is None
    (tmp_path / "bad.onnx").write_bytes(b"not a model")
    with pytest.raises(BundleError, match=r"cannot load the grader model .*bad\.onnx"):
        SessionPool(tmp_path / "bad.onnx", 1, what="grader model")


@pytest.mark.skipif(not int8_weights.cpu_runs_signed_exactly(), reason="signed products saturate without AVX512-VNNI")
def test_on_a_vnni_cpu_the_default_grader_scores_identically_either_way(monkeypatch):
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(BUNDLES_DIR / "default" / "tokenizer.json"))
    tokenizer.enable_truncation(256)
    pools = {}
    for choice in ("as-stored", "signed"):
        monkeypatch.setenv("CRAG_INT8_WEIGHTS", choice)
        pools[choice] = SessionPool(DEFAULT_MODEL, 1)
    texts = ["The Normans gave their name to Normandy, a region in France.", "Steam engines burn coal. " * 60]
    for text in texts:
        encoded = tokenizer.encode("In what country is Normandy located?", text)
        feeds = {"input_ids": np.array([encoded.ids]), "attention_mask": np.array([encoded.attention_mask]),
                 "token_type_ids": np.array([encoded.type_ids])}
        assert (pools["as-stored"].run(feeds) == pools["signed"].run(feeds)).all()
