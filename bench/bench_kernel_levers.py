"""Three more onnxruntime levers for the cross-encoder's time per pair, each measured on one thread, interleaved:

1. ``MatMulNBits`` with 8-bit block-wise weights (``accuracy_level=4``: int8 activations per block) in place of
   crag's dynamic int8 (``DynamicQuantizeLinear`` + ``MatMulInteger``, fused by onnxruntime), on single MatMuls of
   the model's shapes (256 tokens x 384 x 384 / 1536). Block-wise scales read activations more finely than one
   scale per tensor, so it could be both closer to fp32 and, if its kernel were as fast, a drop-in. Needs
   ``onnx-ir`` (onnxruntime's quantiser imports it): ``pip install onnx-ir``; left out with a note otherwise.
2. Attention in head groups: each layer's Q x K, softmax and x V split into G groups of 12/G heads, so that a
   group's 256 x 256 scores stay in the core's cache instead of one 12 x 256 x 256 tensor (3 MB) going out and
   back between the three operators. The default's cross-encoder as crag loads it (unpadded variant), whole.
3. The GELU of each feed-forward block (exact, erf-based; 256 x 1536 values per layer): onnxruntime's fused
   ``Gelu``, the erf subgraph it comes from, the tanh approximation (``FastGelu``), against a memory-bound
   elementwise op (``Relu``) on the same tensor for scale.

Run: python bench/bench_kernel_levers.py [--rounds 25] [--json bench/results_kernel_levers.json]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.output import emit  # noqa: E402

HEADS = 12


def _session(model: bytes | str, disabled: list[str] | None = None) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.log_severity_level = 3
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"], disabled_optimizers=disabled or [])


def _interleaved(runs: dict[str, Callable[[], Any]], rounds: int) -> dict[str, float]:
    """Median ms of each callable, called in turn ``rounds`` times after one warm-up each."""
    for run in runs.values():
        run()
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            times[name].append((time.perf_counter() - start) * 1000)
    return {name: statistics.median(samples) for name, samples in times.items()}


def _one_op_model(nodes: list[Any], shape_in: list[int], shape_out: list[int], initializers: list[Any]) -> bytes:
    from onnx import TensorProto, helper

    graph = helper.make_graph(nodes, "lever", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape_in)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape_out)], initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 8
    return model.SerializeToString()


def matmul_nbits(rounds: int) -> dict[str, Any]:
    """Lever 1: ms per MatMul and mean relative error against fp32, dynamic int8 (crag's) against 8-bit MatMulNBits."""
    import onnx
    from onnx import helper, numpy_helper
    from onnxruntime import quantization

    try:
        from onnxruntime.quantization.matmul_nbits_quantizer import (
            DefaultWeightOnlyQuantConfig,
            MatMulNBitsQuantizer,
        )
    except ImportError as exc:
        return {"skipped": f"onnxruntime's MatMulNBits quantiser cannot be imported ({exc}); pip install onnx-ir"}
    rng = np.random.default_rng(0)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for rows, inner, cols in ((256, 384, 384), (256, 384, 1536), (256, 1536, 384)):
            weight = numpy_helper.from_array((rng.standard_normal((inner, cols)) * 0.05).astype(np.float32), "W")
            fp32 = _one_op_model([helper.make_node("MatMul", ["x", "W"], ["y"])], [rows, inner], [rows, cols], [weight])
            src, dyn = Path(tmp) / "fp32.onnx", Path(tmp) / "dyn.onnx"
            src.write_bytes(fp32)
            quantization.quantize_dynamic(str(src), str(dyn), weight_type=quantization.QuantType.QInt8,
                                          per_channel=True)
            models: dict[str, bytes | str] = {"fp32": fp32, "dynamic int8 (crag)": str(dyn)}
            for block in (32, 128):
                quantiser = MatMulNBitsQuantizer(onnx.load_from_string(fp32), algo_config=DefaultWeightOnlyQuantConfig(
                    block_size=block, is_symmetric=False, accuracy_level=4, bits=8))
                quantiser.process()
                models[f"MatMulNBits 8-bit, block {block}"] = quantiser.model.model.SerializeToString()
            sessions = {name: _session(model) for name, model in models.items()}
            x = rng.standard_normal((rows, inner)).astype(np.float32)
            reference = sessions["fp32"].run(None, {"x": x})[0]
            ms = _interleaved({name: (lambda s=s, x=x: s.run(None, {"x": x})) for name, s in sessions.items()}, rounds)
            results[f"{rows}x{inner}x{cols}"] = {
                name: {"ms": round(ms[name], 3),
                       "mean_relative_error": round(float(np.abs(s.run(None, {"x": x})[0] - reference).mean()
                                                          / np.abs(reference).mean()), 5)}
                for name, s in sessions.items()}
    return results


def head_groups(model_bytes: bytes, groups: int) -> bytes:
    """The model with each layer's attention (MatMul -> Softmax -> MatMul) run in ``groups`` groups of heads."""
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load_from_string(model_bytes)
    graph = model.graph
    producer = {output: node for node in graph.node for output in node.output}
    consumers: dict[str, list[Any]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    replaced: dict[int, list[Any]] = {}
    dropped: set[int] = set()
    for softmax in [node for node in graph.node if node.op_type == "Softmax"]:
        scores = producer[softmax.input[0]]
        (weighted,) = consumers[softmax.output[0]]
        if scores.op_type != "MatMul" or weighted.op_type != "MatMul":
            raise SystemExit(f"unexpected attention around {softmax.name}: {scores.op_type}, {weighted.op_type}")
        prefix = f"{softmax.name}_group"
        sizes = numpy_helper.from_array(np.full(groups, HEADS // groups, np.int64), f"{prefix}_sizes")
        graph.initializer.append(sizes)
        parts, nodes = {}, []
        for operand, tag in ((scores.input[0], "q"), (scores.input[1], "k"), (weighted.input[1], "v")):
            parts[tag] = [f"{prefix}_{tag}{g}" for g in range(groups)]
            nodes.append(helper.make_node("Split", [operand, sizes.name], parts[tag], axis=1))
        outputs = []
        for g in range(groups):
            nodes += [helper.make_node("MatMul", [parts["q"][g], parts["k"][g]], [f"{prefix}_s{g}"]),
                      helper.make_node("Softmax", [f"{prefix}_s{g}"], [f"{prefix}_p{g}"], axis=-1),
                      helper.make_node("MatMul", [f"{prefix}_p{g}", parts["v"][g]], [f"{prefix}_o{g}"])]
            outputs.append(f"{prefix}_o{g}")
        nodes.append(helper.make_node("Concat", outputs, [weighted.output[0]], axis=1))
        replaced[id(scores)] = nodes
        dropped |= {id(softmax), id(weighted)}
    kept = []
    for node in graph.node:
        if id(node) in replaced:
            kept += replaced[id(node)]
        elif id(node) not in dropped:
            kept.append(node)
    del graph.node[:]
    graph.node.extend(kept)
    return model.SerializeToString()


def attention_groups(rounds: int) -> dict[str, Any]:
    """Lever 2: ms per pair of the default's cross-encoder with attention in 1 (as loaded), 2, 3, 4, 6, 12 groups."""
    from grader.load_rewrites import rewrites_in_use, unpadded_model
    from models.registry import resolve_bundle

    rewrites = rewrites_in_use()
    loaded = unpadded_model(resolve_bundle("default") / "model.int8.onnx", rewrites)
    variants = {"as loaded": loaded, **{f"{g} groups": head_groups(loaded, g) for g in (2, 3, 4, 6, 12)}}
    sessions = {name: _session(model, rewrites.disabled_optimizers()) for name, model in variants.items()}
    inputs = [i.name for i in sessions["as loaded"].get_inputs()]
    rng = np.random.default_rng(0)
    results = {}
    for tokens in (256, 128):
        ids = rng.integers(1000, 20000, (1, tokens)).astype(np.int64)
        ids[0, 0] = 101  # [CLS]
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
        feeds = {name: feeds[name] for name in inputs}
        reference = sessions["as loaded"].run(None, feeds)[0]
        ms = _interleaved({name: (lambda s=s, feeds=feeds: s.run(None, feeds)) for name, s in sessions.items()}, rounds)
        results[f"{tokens} tokens"] = {
            name: {"ms": round(ms[name], 2), "speedup": round(ms["as loaded"] / ms[name], 3),
                   "max_logit_difference": float(np.abs(s.run(None, feeds)[0] - reference).max())}
            for name, s in sessions.items()}
    return results


def gelu(rounds: int) -> dict[str, Any]:
    """Lever 3: ms for one layer's GELU (256 x 1536) each way, and a memory-bound op on the same tensor."""
    from onnx import helper, numpy_helper

    shape = [256, 1536]
    constants = [numpy_helper.from_array(np.array(value, np.float32), name)
                 for name, value in (("root2", 2 ** 0.5), ("one", 1.0), ("half", 0.5))]
    erf = [helper.make_node("Div", ["x", "root2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
           helper.make_node("Add", ["e", "one"], ["a"]), helper.make_node("Mul", ["x", "a"], ["m"]),
           helper.make_node("Mul", ["m", "half"], ["y"])]
    variants = {
        "Gelu (fused, exact)": (_one_op_model([helper.make_node("Gelu", ["x"], ["y"], domain="com.microsoft")], shape,
                                              shape, []), []),
        "erf subgraph, fusion off": (_one_op_model(erf, shape, shape, constants), ["GeluFusion"]),
        "FastGelu (tanh approximation)": (_one_op_model([helper.make_node("FastGelu", ["x"], ["y"],
                                                                          domain="com.microsoft")], shape, shape, []),
                                          []),
        "Erf alone": (_one_op_model([helper.make_node("Erf", ["x"], ["y"])], shape, shape, []), []),
        "Relu (memory-bound reference)": (_one_op_model([helper.make_node("Relu", ["x"], ["y"])], shape, shape, []),
                                          []),
    }
    sessions = {name: _session(model, disabled) for name, (model, disabled) in variants.items()}
    x = (np.random.default_rng(0).standard_normal(shape) * 2).astype(np.float32)
    reference = sessions["Gelu (fused, exact)"].run(None, {"x": x})[0]
    ms = _interleaved({name: (lambda s=s, x=x: s.run(None, {"x": x})) for name, s in sessions.items()}, rounds * 4)
    return {name: {"ms": round(ms[name], 3), "max_difference_from_gelu": float(np.abs(s.run(None, {"x": x})[0]
                                                                                       - reference).max())
                   if "Erf alone" not in name and "Relu" not in name else None}
            for name, s in sessions.items()}


def main() -> None:
    logging.disable(logging.WARNING)  # the quantisers log every tensor
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=25)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    emit({"rounds": args.rounds, "matmul_nbits": matmul_nbits(args.rounds),
          "attention_head_groups": attention_groups(args.rounds), "gelu": gelu(args.rounds)}, args.json)


if __name__ == "__main__":
    main()
