"""Exact rewrites of an ONNX model made in memory when it is loaded: the same scores, bit for bit, in less time.

Two rewrites, each exact for every input crag gives a model (a tokenised text has at least its [CLS] token, so
no attention row is ever wholly masked):

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

Measured with ``python bench/bench_load_rewrites.py`` (bench/results_load_rewrites.json). The files on disk and
their checksums stay as exported. ``CRAG_ONNX_REWRITES`` chooses: ``auto`` (the default: guards dropped, weights
signed where the CPU has AVX512-VNNI), ``all`` (weights signed on any CPU: only to measure), ``none`` (load the
file as it is).

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
           "rewrites_in_use", "rewritten_model"]

ENV = "CRAG_ONNX_REWRITES"
CHOICES = ("auto", "all", "none")
UINT8, INT8 = 2, 3  # onnx.TensorProto.DataType
EXTERNAL = 1  # onnx.TensorProto.DataLocation: values in another file, which this rewrite does not touch
WEIGHT_INPUTS = {1, 3}  # MatMulInteger(A, B, a_zero_point, b_zero_point): B and its zero point


@dataclass(frozen=True)
class Rewrites:
    """Which rewrites to make."""

    drop_nan_guards: bool = True
    signed_weights: bool = False

    def describe(self) -> str:
        parts = [name for name, on in (("NaN guards dropped", self.drop_nan_guards),
                                       ("int8 weights signed", self.signed_weights)) if on]
        return ", ".join(parts) or "none: as exported"


def rewrites_in_use() -> Rewrites:
    """The rewrites ``CRAG_ONNX_REWRITES`` (validated) asks for on this CPU."""
    value = os.environ.get(ENV, "auto").strip().lower() or "auto"
    if value not in CHOICES:
        raise ConfigError(f"{ENV}={value!r} is not a choice: use one of {', '.join(CHOICES)}")
    if value == "none":
        return Rewrites(drop_nan_guards=False)
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


def model_for_this_cpu(model_path: Path) -> bytes | None:
    """The model at ``model_path`` with the rewrites of :func:`rewrites_in_use`, as bytes for onnxruntime;
    None when nothing applies (load the file as it is)."""
    rewrites = rewrites_in_use()
    if not (rewrites.drop_nan_guards or rewrites.signed_weights):
        return None
    return rewritten_model(model_path, rewrites)


def rewritten_model(model_path: Path, rewrites: Rewrites) -> bytes | None:
    """The model with ``rewrites`` made, serialised; None when the model has nothing they change."""
    model = _schema()["ModelProto"]()
    model.ParseFromString(model_path.read_bytes())
    changed = 0
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
    for node in graph.node:
        for slot, name in enumerate(node.input):
            if name in replaced:
                node.input[slot] = replaced[name]
    return len(replaced)


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
            if field_name == "int32_data":
                added.options.packed = True

    message("ModelProto", ("graph", 7, optional, message_type, "GraphProto"))
    message("GraphProto", ("node", 1, repeated, message_type, "NodeProto"),
            ("initializer", 5, repeated, message_type, "TensorProto"),
            ("output", 12, repeated, message_type, "ValueInfoProto"))
    message("NodeProto", ("input", 1, repeated, string, ""), ("output", 2, repeated, string, ""),
            ("op_type", 4, optional, string, ""))
    message("ValueInfoProto", ("name", 1, optional, string, ""))
    message("TensorProto", ("data_type", 2, optional, field.TYPE_INT32, ""),
            ("int32_data", 5, repeated, field.TYPE_INT32, ""), ("name", 8, optional, string, ""),
            ("raw_data", 9, optional, field.TYPE_BYTES, ""), ("data_location", 14, optional, field.TYPE_INT32, ""))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return {name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"crag_onnx_subset.{name}"))
            for name in ("ModelProto", "GraphProto", "NodeProto", "ValueInfoProto", "TensorProto")}
