"""Exact rewrites of an ONNX model made in memory when it is loaded: the same scores, bit for bit, in less time.

Three rewrites, each exact for the inputs it is used on (a tokenised text has at least its [CLS] token, so no
attention row is ever wholly masked):

- **NaN guards dropped.** torch's export of scaled-dot-product attention writes ``Where(IsNaN(p), 0, p)`` after
  every softmax, for rows whose keys are all masked; such a row cannot occur here, so ``p`` passes through
  unchanged and the guard only costs time: 17-19% of a pair's model time in the shipped cross-encoder and
  embedder (two full passes over each layer's 12 x L x L attention probabilities).
- **Signed int8 weights on AVX512-VNNI CPUs.** `crag export` writes unsigned (u8) weights
  (``training.export.quantize_weights``): without AVX512-VNNI onnxruntime's signed path sums in saturating int16
  and flipped 4% of a grader's verdicts. *With* AVX512-VNNI the signed path is ``vpdpbusd``, which sums in int32
  and saturates nothing, while unsigned weights take a slower generic path (the default's cross-encoder: 2.0x
  the time per pair). ``MatMulInteger`` computes ``(a - za) * (w - zw)``; subtracting 128 from every weight and
  from its zero point (``w ^ 0x80`` read as int8) leaves each product unchanged.
- **Attention mask skipped for unpadded inputs.** Each layer adds ``Where(mask, 0, -inf)`` to its 12 x L x L
  attention scores before the softmax. For a call whose attention mask is all ones (one text per call, as the
  int8 graders and the embedder run by default) that term is +0.0 everywhere, and ``x + 0.0 == x``: a second
  model without those additions (and the mask's own subgraph) serves such calls, 8-9% of a pair's time saved.
  :class:`grader.session_pool.SessionPool` picks it per call; a padded call gets the model with its mask.

Measured with ``python bench/bench_load_rewrites.py`` (bench/results_load_rewrites.json). The files on disk and
their checksums stay as exported. ``CRAG_ONNX_REWRITES`` chooses: ``auto`` (the default: guards dropped, weights
signed where the CPU has AVX512-VNNI, mask skipped for unpadded inputs), ``all`` (weights signed on any CPU: only
to measure), ``none`` (load the file as it is).

One choice of onnxruntime's is made with them, and it is not a rewrite: its ``SkipLayerNormalization`` fusion (a
residual ``Add`` and the ``LayerNormalization`` after it, made one kernel) is left off, so the graph's own Add and
LayerNormalization run. Its CPU kernel took 14.5% of a pair's time in the default's cross-encoder, 8x the two ops
it replaces (onnxruntime 1.32). Both compute the same function; their float rounding differs, and int8's dynamic
quantisation carries that on: on the recipe's held-out pairs (6 domains, 2,488 pairs) the default's and the fast
bundle's probabilities moved by 0.001-0.004 on average (at most 0.035), AUROC by -0.0009 to +0.0020, and 0-3
verdicts in 400 changed (bench/bench_skip_layer_norm.py); ``CRAG_ONNX_REWRITES=none`` keeps the fusion.

The model is read and written with protobuf, which onnxruntime itself depends on, through a minimal schema of the
few ONNX fields touched; every other field passes through unparsed, so nothing else of the model can change.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from models.deps import require
from models.errors import ConfigError

__all__ = ["CHOICES", "ENV", "Rewrites", "cpu_flags", "cpu_runs_signed_exactly", "model_for_this_cpu",
           "rewrites_in_use", "rewritten_model", "unpadded_model"]

ENV = "CRAG_ONNX_REWRITES"
CHOICES = ("auto", "all", "none")
FLOAT, UINT8, INT8 = 1, 2, 3  # onnx.TensorProto.DataType
EXTERNAL = 1  # onnx.TensorProto.DataLocation: values in another file, which this rewrite does not touch
WEIGHT_INPUTS = {1, 3}  # MatMulInteger(A, B, a_zero_point, b_zero_point): B and its zero point
MASK_INPUT = "attention_mask"
MASKED_SCORE = -1e4  # a mask's "ignore this key" term is at most this (torch writes -inf)


@dataclass(frozen=True)
class Rewrites:
    """Which rewrites to make."""

    drop_nan_guards: bool = True
    signed_weights: bool = False
    skip_mask_when_unpadded: bool = True
    unfused_skip_layer_norm: bool = True

    def describe(self) -> str:
        parts = [name for name, on in (("NaN guards dropped", self.drop_nan_guards),
                                       ("int8 weights signed", self.signed_weights),
                                       ("attention mask skipped for unpadded inputs", self.skip_mask_when_unpadded),
                                       ("SkipLayerNormalization fusion off", self.unfused_skip_layer_norm))
                 if on]
        return ", ".join(parts) or "none: as exported"

    def disabled_optimizers(self) -> list[str]:
        """onnxruntime graph optimisers to leave off (the names its InferenceSession takes)."""
        return ["SkipLayerNormFusion"] if self.unfused_skip_layer_norm else []


def rewrites_in_use() -> Rewrites:
    """The rewrites ``CRAG_ONNX_REWRITES`` (validated) asks for on this CPU."""
    value = os.environ.get(ENV, "auto").strip().lower() or "auto"
    if value not in CHOICES:
        raise ConfigError(f"{ENV}={value!r} is not a choice: use one of {', '.join(CHOICES)}")
    if value == "none":
        return Rewrites(drop_nan_guards=False, skip_mask_when_unpadded=False, unfused_skip_layer_norm=False)
    return Rewrites(signed_weights=value == "all" or cpu_runs_signed_exactly())


@cache
def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags from Linux's /proc/cpuinfo; empty elsewhere."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return frozenset()
    return frozenset(next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")),
                          []))


def cpu_runs_signed_exactly() -> bool:
    """Whether this CPU has AVX512-VNNI (where the flags are unknown the answer is no, and weights are left as
    exported, which is exact everywhere)."""
    return "avx512_vnni" in cpu_flags()


def model_for_this_cpu(model_path: Path, rewrites: Rewrites | None = None) -> bytes | None:
    """The model at ``model_path`` with ``rewrites`` (default: :func:`rewrites_in_use`), as bytes for onnxruntime;
    None when nothing applies (load the file as it is)."""
    rewrites = rewrites or rewrites_in_use()
    if not (rewrites.drop_nan_guards or rewrites.signed_weights):
        return None
    return rewritten_model(model_path, rewrites)


def unpadded_model(model_path: Path, rewrites: Rewrites | None = None) -> bytes | None:
    """The model for calls whose attention mask is all ones: ``rewrites`` (default: :func:`rewrites_in_use`) and
    the attention mask skipped; None when there is no mask to skip (use :func:`model_for_this_cpu`'s for every
    call)."""
    rewrites = rewrites or rewrites_in_use()
    if not rewrites.skip_mask_when_unpadded:
        return None
    return rewritten_model(model_path, rewrites, unpadded=True)


def rewritten_model(model_path: Path, rewrites: Rewrites, *, unpadded: bool = False) -> bytes | None:
    """The model with ``rewrites`` made, serialised; None when the model has nothing they change. ``unpadded``:
    the variant for all-ones attention masks, None when the model has no attention mask to skip."""
    model = _schema()["ModelProto"]()
    model.ParseFromString(model_path.read_bytes())
    changed = 0
    if unpadded:
        skipped = _skip_attention_masks(model.graph)
        if not skipped:
            return None
        changed += skipped
    if rewrites.signed_weights:
        changed += _sign_weights(model.graph)
    if rewrites.drop_nan_guards:
        changed += _drop_nan_guards(model.graph)
    return model.SerializeToString() if changed else None


def _consumers(graph: Any) -> dict[str, set[tuple[str, int]]]:
    uses: dict[str, set[tuple[str, int]]] = {}
    for node in graph.node:
        for index, name in enumerate(node.input):
            uses.setdefault(name, set()).add((node.op_type, index))
    return uses


def _sign_weights(graph: Any) -> int:
    """Make every u8 initializer read only as a ``MatMulInteger`` weight or weight zero point signed."""
    uses = _consumers(graph)
    changed = 0
    for tensor in graph.initializer:
        used = uses.get(tensor.name, set())
        if tensor.data_type != UINT8 or tensor.data_location == EXTERNAL or not used or \
                any(op != "MatMulInteger" or index not in WEIGHT_INPUTS for op, index in used):
            continue  # a u8 tensor read anywhere else (an activation's zero point) keeps its meaning
        if tensor.raw_data:
            tensor.raw_data = (np.frombuffer(tensor.raw_data, np.uint8) ^ 0x80).tobytes()
        else:  # small tensors may hold their values in int32_data
            values = np.asarray(tensor.int32_data, np.int64) - 128
            del tensor.int32_data[:]
            tensor.int32_data.extend(int(v) for v in values)
        tensor.data_type = INT8
        changed += 1
    return changed


def _drop_nan_guards(graph: Any) -> int:
    """Remove each ``Where(IsNaN(p), c, p)`` whose IsNaN feeds nothing else, reading ``p`` where it was read."""
    made_by = {output: index for index, node in enumerate(graph.node) for output in node.output}
    readers = Counter(name for node in graph.node for name in node.input)
    graph_outputs = {value.name for value in graph.output}
    replaced: dict[str, str] = {}
    dropped: set[int] = set()
    for index, node in enumerate(graph.node):
        if node.op_type != "Where" or len(node.input) != 3 or node.output[0] in graph_outputs:
            continue
        test_index = made_by.get(node.input[0], -1)  # -1: a graph input or an initializer, made by no node
        test = graph.node[test_index] if test_index >= 0 else None
        if test is None or test.op_type != "IsNaN" or test.input[0] != node.input[2] or \
                readers[test.output[0]] != 1 or test.output[0] in graph_outputs:
            continue  # an IsNaN read anywhere else stays, and so does its guard
        replaced[node.output[0]] = node.input[2]
        dropped.update((index, test_index))
    for index in sorted(dropped, reverse=True):
        del graph.node[index]
    _read_instead(graph, replaced)
    return len(replaced)


def _skip_attention_masks(graph: Any) -> int:
    """Read the scores where ``Add(scores, Where(<from attention_mask>, 0, -inf))`` fed a Softmax, and remove what
    only computed the mask. Exact only for all-ones masks (the ``Where`` then gives +0.0 everywhere)."""
    made_by = {output: node for node in graph.node for output in node.output}
    readers = Counter(name for node in graph.node for name in node.input)
    softmax_inputs = {node.input[0] for node in graph.node if node.op_type == "Softmax"}
    graph_outputs = {value.name for value in graph.output}
    from_mask = _computed_from(graph, MASK_INPUT)
    replaced: dict[str, str] = {}
    for node in graph.node:
        if node.op_type != "Add" or len(node.input) != 2 or node.output[0] not in softmax_inputs or \
                readers[node.output[0]] != 1 or node.output[0] in graph_outputs:
            continue
        for mask, scores in (node.input, reversed(node.input)):
            where = made_by.get(mask)
            if where is not None and where.op_type == "Where" and len(where.input) == 3 and \
                    _is_mask_term(made_by, where) and where.input[0] in from_mask:
                replaced[node.output[0]] = scores
                break
    if not replaced:
        return 0
    _read_instead(graph, replaced)
    _drop_unread_nodes(graph)
    return len(replaced)


def _read_instead(graph: Any, replaced: dict[str, str]) -> None:
    """Every node that read a value named in ``replaced`` reads its replacement instead."""
    for node in graph.node:
        for slot, name in enumerate(node.input):
            if name in replaced:
                node.input[slot] = replaced[name]


def _is_mask_term(made_by: dict[str, Any], where: Any) -> bool:
    """``Where(c, a, b)`` with scalar constants {a, b} = {0, <= MASKED_SCORE}: an additive attention mask."""
    values = [value for name in where.input[1:] if (value := _scalar_constant(made_by, name)) is not None]
    return len(values) == 2 and max(values) == 0.0 and min(values) <= MASKED_SCORE


def _scalar_constant(made_by: dict[str, Any], name: str) -> float | None:
    """The value of a float scalar ``Constant`` node's output; None for anything else."""
    node = made_by.get(name)
    if node is None or node.op_type != "Constant" or len(node.attribute) != 1 or node.attribute[0].name != "value":
        return None
    tensor = node.attribute[0].t
    if tensor.data_type != FLOAT or any(d != 1 for d in tensor.dims):
        return None
    values = np.frombuffer(tensor.raw_data, "<f4") if tensor.raw_data else np.asarray(tensor.float_data, np.float32)
    return float(values[0]) if values.size == 1 else None


def _computed_from(graph: Any, graph_input: str) -> set[str]:
    """Every value computed (at any remove) from ``graph_input``; ONNX lists nodes in topological order."""
    reached = {graph_input}
    for node in graph.node:
        if any(name in reached for name in node.input):
            reached.update(node.output)
    return reached


def _drop_unread_nodes(graph: Any) -> None:
    """Remove nodes none of whose outputs is read by a kept node or returned by the graph: one pass from the last
    node back (ONNX lists nodes in topological order, so every reader of a value comes after its maker)."""
    read = {value.name for value in graph.output}
    unread: list[int] = []
    for index in range(len(graph.node) - 1, -1, -1):
        node = graph.node[index]
        if any(output in read for output in node.output if output):
            read.update(node.input)
        else:
            unread.append(index)
    for index in unread:  # from the last back, so that the indices still to delete do not move
        del graph.node[index]


@cache
def _schema() -> dict[str, Any]:
    """Message classes for the ONNX fields read here (field numbers from onnx.proto); all others are kept as
    unknown fields and written back untouched."""
    require("google.protobuf", "onnx")  # onnxruntime depends on protobuf; a broken install is named
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    file = descriptor_pb2.FileDescriptorProto(name="crag_onnx_rewrite_subset.proto", package="crag_onnx_subset",
                                              syntax="proto2")
    field = descriptor_pb2.FieldDescriptorProto
    optional, repeated = field.LABEL_OPTIONAL, field.LABEL_REPEATED
    string, message_type = field.TYPE_STRING, field.TYPE_MESSAGE

    def message(name: str, *fields: tuple[str, int, int, int, str]) -> None:
        proto = file.message_type.add(name=name)
        for field_name, number, label, kind, type_name in fields:
            added = proto.field.add(name=field_name, number=number, label=label, type=kind)
            if type_name:
                added.type_name = f".crag_onnx_subset.{type_name}"
            if field_name in ("int32_data", "float_data"):  # packed in onnx.proto (dims is not)
                added.options.packed = True

    message("ModelProto", ("graph", 7, optional, message_type, "GraphProto"))
    message("GraphProto", ("node", 1, repeated, message_type, "NodeProto"),
            ("initializer", 5, repeated, message_type, "TensorProto"),
            ("output", 12, repeated, message_type, "ValueInfoProto"))
    message("NodeProto", ("input", 1, repeated, string, ""), ("output", 2, repeated, string, ""),
            ("op_type", 4, optional, string, ""), ("attribute", 5, repeated, message_type, "AttributeProto"))
    message("AttributeProto", ("name", 1, optional, string, ""), ("t", 5, optional, message_type, "TensorProto"))
    message("ValueInfoProto", ("name", 1, optional, string, ""))
    message("TensorProto", ("dims", 1, repeated, field.TYPE_INT64, ""),
            ("data_type", 2, optional, field.TYPE_INT32, ""), ("float_data", 4, repeated, field.TYPE_FLOAT, ""),
            ("int32_data", 5, repeated, field.TYPE_INT32, ""), ("name", 8, optional, string, ""),
            ("raw_data", 9, optional, field.TYPE_BYTES, ""), ("data_location", 14, optional, field.TYPE_INT32, ""))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return {name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"crag_onnx_subset.{name}"))
            for name in ("ModelProto", "GraphProto", "NodeProto", "AttributeProto", "ValueInfoProto", "TensorProto")}
