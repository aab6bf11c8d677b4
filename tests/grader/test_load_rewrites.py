"""Exact rewrites made at load: the same outputs, only what was asked for, nothing else of the model changed."""

import numpy as np
import pytest

from grader import load_rewrites
from grader.load_rewrites import Rewrites, model_for_this_cpu, rewritten_model
from grader.session_pool import SessionPool
from models import BundleError, ConfigError
from models.registry import BUNDLES_DIR

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

DEFAULT = BUNDLES_DIR / "default"
SIGNED = Rewrites(drop_nan_guards=False, signed_weights=True)
GUARDS = Rewrites(drop_nan_guards=True, signed_weights=False)


def _save(path, nodes, inputs, outputs, initializers):
    model = helper.make_model(helper.make_graph(nodes, "mini", inputs, outputs, initializers),
                              opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def _matmul_integer_model(path, weights, weight_zero, activation_zero=3):
    """y = MatMulInteger(x, W, x_zero, W_zero), all u8: the form `crag export` writes, in miniature."""
    return _save(path, [helper.make_node("MatMulInteger", ["x", "w", "x_zero", "w_zero"], ["y"])],
                 [helper.make_tensor_value_info("x", TensorProto.UINT8, [None, weights.shape[0]])],
                 [helper.make_tensor_value_info("y", TensorProto.INT32, [None, weights.shape[1]])],
                 [numpy_helper.from_array(weights.astype(np.uint8), "w"),
                  numpy_helper.from_array(np.asarray(weight_zero, np.uint8), "w_zero"),
                  numpy_helper.from_array(np.asarray(activation_zero, np.uint8), "x_zero")])


def _guarded_softmax_model(path, guard_is_output=False):
    """p = Softmax(s); q = Where(IsNaN(p), 0, p); y = q * 2: torch's export of attention, in miniature."""
    last = [] if guard_is_output else [helper.make_node("Mul", ["q", "two"], ["y"])]
    return _save(path, [helper.make_node("Softmax", ["s"], ["p"]), helper.make_node("IsNaN", ["p"], ["nan"]),
                        helper.make_node("Where", ["nan", "zero", "p"], ["q"]), *last],
                 [helper.make_tensor_value_info("s", TensorProto.FLOAT, [None, 4])],
                 [helper.make_tensor_value_info("q" if guard_is_output else "y", TensorProto.FLOAT, [None, 4])],
                 [numpy_helper.from_array(np.float32(0), "zero"), numpy_helper.from_array(np.float32(2), "two")])


def test_signed_weights_subtract_128_from_weights_and_their_zero_points_only(tmp_path):
    rng = np.random.default_rng(0)
    weights = rng.integers(0, 256, size=(16, 4))
    path = _matmul_integer_model(tmp_path / "m.onnx", weights, [120, 128, 131, 7])
    before = path.read_bytes()
    rewritten = onnx.load_from_string(rewritten_model(path, SIGNED))
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

    x = rng.integers(0, 40, size=(3, 16)).astype(np.uint8)  # small values: no CPU saturates these sums
    as_exported = ort.InferenceSession(str(path)).run(None, {"x": x})[0]
    signed = ort.InferenceSession(rewritten_model(path, SIGNED)).run(None, {"x": x})[0]
    assert (as_exported == signed).all()
    assert (signed == (x.astype(int) - 3) @ (weights - np.array([120, 128, 131, 7]))).all()


def test_a_nan_guard_after_softmax_is_dropped_and_its_readers_read_the_softmax(tmp_path):
    path = _guarded_softmax_model(tmp_path / "g.onnx")
    rewritten = onnx.load_from_string(rewritten_model(path, GUARDS))
    assert [n.op_type for n in rewritten.graph.node] == ["Softmax", "Mul"]
    assert list(rewritten.graph.node[1].input) == ["p", "two"]
    s = np.random.default_rng(1).normal(size=(5, 4)).astype(np.float32)
    expected = ort.InferenceSession(str(path)).run(None, {"s": s})[0]
    assert (ort.InferenceSession(rewritten_model(path, GUARDS)).run(None, {"s": s})[0] == expected).all()
    # a guard whose result the graph returns is kept, and a model without guards is loaded as it is
    assert rewritten_model(_guarded_softmax_model(tmp_path / "out.onnx", guard_is_output=True), GUARDS) is None
    assert rewritten_model(_matmul_integer_model(tmp_path / "m.onnx", np.ones((2, 2)), 1), GUARDS) is None
    # an IsNaN that another node reads too is not removed from under it
    shared = _save(tmp_path / "shared.onnx", [
        helper.make_node("Softmax", ["s"], ["p"]), helper.make_node("IsNaN", ["p"], ["nan"]),
        helper.make_node("Where", ["nan", "zero", "p"], ["q"]), helper.make_node("Where", ["nan", "zero", "s"], ["r"]),
        helper.make_node("Add", ["q", "r"], ["y"])], [helper.make_tensor_value_info("s", TensorProto.FLOAT, [None, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 4])],
        [numpy_helper.from_array(np.float32(0), "zero")])
    assert rewritten_model(shared, GUARDS) is None


def _masked_softmax_model(path, masked=-np.inf, read_twice=False, condition="attention_mask"):
    """y = Softmax(s + Where(Cast(mask), 0, masked)): an additive attention mask, in miniature."""
    constants = [helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.float32(v)))
                 for name, v in (("zero", 0.0), ("masked", masked))]
    extra = [helper.make_node("Mul", ["m", "m"], ["m2"])] if read_twice else []
    return _save(path, [*constants, helper.make_node("Cast", [condition], ["keep"], to=TensorProto.BOOL),
                        helper.make_node("Where", ["keep", "zero", "masked"], ["bias"]),
                        helper.make_node("Add", ["s", "bias"], ["m"]), *extra,
                        helper.make_node("Softmax", ["m"], ["y"])],
                 [helper.make_tensor_value_info("s", TensorProto.FLOAT, [None, 4]),
                  helper.make_tensor_value_info("attention_mask", TensorProto.INT64, [None, 4]),
                  helper.make_tensor_value_info("other", TensorProto.INT64, [None, 4])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 4]),
                  *([helper.make_tensor_value_info("m2", TensorProto.FLOAT, [None, 4])] if read_twice else [])], [])


def test_for_unpadded_inputs_the_attention_mask_and_its_subgraph_are_skipped(tmp_path):
    path = _masked_softmax_model(tmp_path / "m.onnx")
    assert rewritten_model(path, GUARDS) is None  # the model for every input keeps its mask
    rewritten = onnx.load_from_string(rewritten_model(path, GUARDS, unpadded=True))
    assert [n.op_type for n in rewritten.graph.node] == ["Softmax"]
    assert list(rewritten.graph.node[0].input) == ["s"]
    assert [i.name for i in rewritten.graph.input] == ["s", "attention_mask", "other"]  # callers feed the same
    s = np.random.default_rng(2).normal(size=(3, 4)).astype(np.float32)
    feeds = {"s": s, "attention_mask": np.ones((3, 4), np.int64), "other": np.zeros((3, 4), np.int64)}
    expected = ort.InferenceSession(str(path)).run(None, feeds)[0]
    assert (ort.InferenceSession(rewritten.SerializeToString()).run(None, feeds)[0] == expected).all()
    # not an additive mask, or not only feeding the softmax, or not computed from the attention mask: kept
    for name, kwargs in (("small.onnx", {"masked": -1.0}), ("twice.onnx", {"read_twice": True}),
                         ("other.onnx", {"condition": "other"})):
        assert rewritten_model(_masked_softmax_model(tmp_path / name, **kwargs), GUARDS, unpadded=True) is None


def test_the_setting_decides_and_a_bad_value_is_named(tmp_path, monkeypatch):
    path = _matmul_integer_model(tmp_path / "m.onnx", np.full((4, 2), 200), 128)
    monkeypatch.setenv("CRAG_ONNX_REWRITES", "none")
    assert model_for_this_cpu(path) is None
    monkeypatch.setenv("CRAG_ONNX_REWRITES", "auto")
    monkeypatch.setattr(load_rewrites, "cpu_runs_signed_exactly", lambda: False)  # a CPU without AVX512-VNNI
    assert model_for_this_cpu(path) is None  # no guard to drop, weights stay unsigned
    expected = "NaN guards dropped, attention mask skipped for unpadded inputs, SkipLayerNormalization fusion off"
    assert load_rewrites.rewrites_in_use().describe() == expected
    monkeypatch.setattr(load_rewrites, "cpu_runs_signed_exactly", lambda: True)
    assert onnx.load_from_string(model_for_this_cpu(path)).graph.initializer[0].data_type == TensorProto.INT8
    monkeypatch.setenv("CRAG_ONNX_REWRITES", "some")
    with pytest.raises(ConfigError, match=r"CRAG_ONNX_REWRITES='some' is not a choice: use one of auto, all, none"):
        model_for_this_cpu(path)
    with pytest.raises(ConfigError, match="CRAG_ONNX_REWRITES='some'"):
        SessionPool(path, 1)  # named as a setting, not as a broken model
    monkeypatch.setenv("CRAG_ONNX_REWRITES", "auto")
    (tmp_path / "bad.onnx").write_bytes(b"not a model")
    with pytest.raises(BundleError, match=r"cannot load the grader model .*bad\.onnx"):
        SessionPool(tmp_path / "bad.onnx", 1, what="grader model")


def _feeds(tokenizer, *texts):
    encoded = tokenizer.encode(*texts)
    return {"input_ids": np.array([encoded.ids]), "attention_mask": np.array([encoded.attention_mask]),
            "token_type_ids": np.array([encoded.type_ids])}


def test_the_shipped_models_give_identical_outputs_with_their_guards_dropped_and_unpadded_masks_skipped():
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(DEFAULT / "tokenizer.json"))
    tokenizer.enable_truncation(256)
    unpadded_tokenizer = Tokenizer.from_file(str(DEFAULT / "tokenizer.json"))  # the shipped one pads to 256
    unpadded_tokenizer.enable_truncation(256)
    unpadded_tokenizer.no_padding()
    embedder = next((DEFAULT / "embedder").glob("*.onnx"))
    texts = [("In what country is Normandy located?", "The Normans gave their name to Normandy, in France."),
             ("In what country is Normandy located?", "Steam engines burn coal. " * 60), ("x",)]
    for model in (DEFAULT / "model.int8.onnx", embedder):
        as_exported = ort.InferenceSession(str(model))
        rewritten = onnx.load_from_string(rewritten_model(model, GUARDS))
        assert sum(n.op_type == "IsNaN" for n in rewritten.graph.node) == 0  # one guard per layer, all six gone
        dropped = ort.InferenceSession(rewritten.SerializeToString())
        unpadded = onnx.load_from_string(rewritten_model(model, GUARDS, unpadded=True))
        made_by = {o: n.op_type for n in unpadded.graph.node for o in n.output}
        softmax_inputs = [made_by[n.input[0]] for n in unpadded.graph.node if n.op_type == "Softmax"]
        assert softmax_inputs == ["MatMul"] * 6  # each layer's softmax reads its scores, no mask added
        assert len(unpadded.graph.node) <= len(rewritten.graph.node) - 6 * 2 - 20  # Adds, Wheres, their subgraph
        skipped = ort.InferenceSession(unpadded.SerializeToString())
        names = [i.name for i in as_exported.get_inputs()]
        assert [i.name for i in skipped.get_inputs()] == names
        for pair in texts:
            feeds = {k: v for k, v in _feeds(tokenizer, *pair).items() if k in names}
            assert (as_exported.run(None, feeds)[0] == dropped.run(None, feeds)[0]).all()
            if not feeds["attention_mask"].all():
                assert not np.array_equal(as_exported.run(None, feeds)[0], skipped.run(None, feeds)[0])  # padded
            feeds = {k: v for k, v in _feeds(unpadded_tokenizer, *pair).items() if k in names}
            assert feeds["attention_mask"].all()
            assert (as_exported.run(None, feeds)[0] == skipped.run(None, feeds)[0]).all()


@pytest.mark.skipif(not load_rewrites.cpu_runs_signed_exactly(), reason="signed products saturate without AVX512-VNNI")
def test_on_a_vnni_cpu_the_default_grader_scores_identically_with_signed_weights():
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(DEFAULT / "tokenizer.json"))
    tokenizer.enable_truncation(256)
    model = DEFAULT / "model.int8.onnx"
    sessions = [ort.InferenceSession(m) for m in (str(model), rewritten_model(model, SIGNED))]
    for text in ("The Normans gave their name to Normandy, a region in France.", "Steam engines burn coal. " * 60):
        feeds = _feeds(tokenizer, "In what country is Normandy located?", text)
        assert (sessions[0].run(None, feeds)[0] == sessions[1].run(None, feeds)[0]).all()


def test_pools_leave_skip_layer_norm_unfused_unless_told_none(monkeypatch):
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(DEFAULT / "tokenizer.json"))
    tokenizer.enable_truncation(256)
    tokenizer.no_padding()
    model = DEFAULT / "model.int8.onnx"
    feeds = _feeds(tokenizer, "In what country is Normandy located?", "Steam engines burn coal. " * 60)
    got = {}
    for choice in ("none", "auto"):
        monkeypatch.setenv("CRAG_ONNX_REWRITES", choice)
        got[choice] = SessionPool(model, 1).run(feeds)
        unfused = choice == "auto"
        reference = ort.InferenceSession(load_rewrites.unpadded_model(model) or str(model),
                                         disabled_optimizers=["SkipLayerNormFusion"] if unfused else [])
        assert (reference.run(None, feeds)[0] == got[choice]).all()
    assert np.allclose(got["none"], got["auto"], atol=0.05)  # the same function, rounded differently


def test_the_pool_skips_the_mask_only_for_unpadded_calls():
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(DEFAULT / "tokenizer.json"))
    tokenizer.enable_truncation(256)
    tokenizer.no_padding()
    pools = {padded: SessionPool(DEFAULT / "model.int8.onnx", 1, padded_calls=padded) for padded in (False, True)}
    assert pools[False].skips_unpadded_mask and not pools[True].skips_unpadded_mask
    short, long = (_feeds(tokenizer, "Where is Normandy?", text) for text in ("In France.", "Steam engines. " * 30))
    padded = {k: np.zeros((2, long[k].shape[1]), np.int64) for k in long}
    for row, one in enumerate((short, long)):
        for k in one:
            padded[k][row, : one[k].shape[1]] = one[k][0]
    for feeds in (short, long, padded):  # one text alone (mask skipped) and a padded batch (mask used)
        assert (pools[False].run(feeds) == pools[True].run(feeds)).all()
    alone = pools[True].run(short)
    assert not np.array_equal(pools[False].run(padded)[0], alone[0])  # the batch's first row is padded ...
    assert np.allclose(pools[False].run(padded)[0], alone[0], atol=0.5)  # ... and masked: near its grade alone
