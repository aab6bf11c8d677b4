"""Int8 weights in the form this CPU multiplies fastest, exactly: unsigned as exported, signed on AVX512-VNNI.

`crag export` writes unsigned (u8) weights (``training.export.quantize_weights``): on x86 CPUs without
AVX512-VNNI onnxruntime's signed path sums in saturating int16 and flipped 4% of a grader's verdicts. On a CPU
*with* AVX512-VNNI the signed path is ``vpdpbusd``, which sums in int32 and saturates nothing, while unsigned
weights take a slower generic path: measured on such a CPU, one pair per call on one thread, the default
grader ran 2.0x faster per pair with signed weights and gave bit-identical logits
(``python bench/bench_int8_weights.py``, bench/results_int8_weights.json).

The rewrite is exact: ``MatMulInteger`` computes ``(a - za) * (w - zw)``; subtracting 128 from every weight and
from its zero point (``w ^ 0x80`` read as int8) leaves each difference, and so every product, unchanged. It is
made in memory when a model is loaded; the file on disk (and its checksum) stay as exported.

``CRAG_INT8_WEIGHTS`` chooses: ``auto`` (the default: signed where the CPU has AVX512-VNNI), ``signed`` or
``as-stored``.

The model is read and written with protobuf, which onnxruntime itself depends on, through a minimal schema of the
few ONNX fields touched; every other field passes through unparsed, so nothing else of the model can change.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from models.deps import require
from models.errors import ConfigError

__all__ = ["CHOICES", "ENV", "cpu_runs_signed_exactly", "int8_weights_choice", "signed_weight_model", "weights_in_use"]

ENV = "CRAG_INT8_WEIGHTS"
CHOICES = ("auto", "signed", "as-stored")
UINT8, INT8 = 2, 3  # onnx.TensorProto.DataType
EXTERNAL = 1  # onnx.TensorProto.DataLocation: values in another file, which this rewrite does not touch
WEIGHT_INPUTS = {1, 3}  # MatMulInteger(A, B, a_zero_point, b_zero_point): B and its zero point


def int8_weights_choice() -> str:
    """The ``CRAG_INT8_WEIGHTS`` setting, validated."""
    value = os.environ.get(ENV, "auto").strip().lower() or "auto"
    if value not in CHOICES:
        raise ConfigError(f"{ENV}={value!r} is not a choice: use one of {', '.join(CHOICES)}")
    return value


@cache
def cpu_runs_signed_exactly() -> bool:
    """Whether this CPU has AVX512-VNNI (Linux's /proc/cpuinfo; elsewhere the answer is no, and weights are
    left as exported, which is exact everywhere)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), [])
    return "avx512_vnni" in flags


def _signs_here() -> bool:
    choice = int8_weights_choice()
    return choice == "signed" or (choice == "auto" and cpu_runs_signed_exactly())


def weights_in_use() -> str:
    """How a model's unsigned int8 weights are run in this process, for reports (``crag bench``)."""
    if not _signs_here():
        return "as stored"
    return "signed at load (this CPU has AVX512-VNNI)" if int8_weights_choice() == "auto" else f"signed at load ({ENV})"


def signed_weight_model(model_path: Path) -> bytes | None:
    """The model at ``model_path`` with its unsigned ``MatMulInteger`` weights made signed, as bytes for
    onnxruntime, when the setting (and for ``auto`` the CPU) asks for it and the model has such weights; None
    means load the file as it is."""
    if not _signs_here():
        return None
    model = _schema()["ModelProto"]()
    model.ParseFromString(model_path.read_bytes())
    graph = model.graph
    uses: dict[str, set[tuple[str, int]]] = {}
    for node in graph.node:
        for index, name in enumerate(node.input):
            uses.setdefault(name, set()).add((node.op_type, index))
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
    return model.SerializeToString() if changed else None


@cache
def _schema() -> dict[str, Any]:
    """Message classes for the ONNX fields read here (field numbers from onnx.proto); all others are kept as
    unknown fields and written back untouched."""
    require("google.protobuf", "onnx")  # onnxruntime depends on protobuf; a broken install is named
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    file = descriptor_pb2.FileDescriptorProto(name="crag_onnx_int8_subset.proto", package="crag_onnx_subset",
                                              syntax="proto2")
    field = descriptor_pb2.FieldDescriptorProto
    optional, repeated = field.LABEL_OPTIONAL, field.LABEL_REPEATED

    def message(name: str, *fields: tuple[str, int, int, int, str]) -> None:
        proto = file.message_type.add(name=name)
        for field_name, number, label, kind, type_name in fields:
            added = proto.field.add(name=field_name, number=number, label=label, type=kind)
            if type_name:
                added.type_name = f".crag_onnx_subset.{type_name}"
            if field_name == "int32_data":
                added.options.packed = True

    message("ModelProto", ("graph", 7, optional, field.TYPE_MESSAGE, "GraphProto"))
    message("GraphProto", ("node", 1, repeated, field.TYPE_MESSAGE, "NodeProto"),
            ("initializer", 5, repeated, field.TYPE_MESSAGE, "TensorProto"))
    message("NodeProto", ("input", 1, repeated, field.TYPE_STRING, ""), ("op_type", 4, optional, field.TYPE_STRING, ""))
    message("TensorProto", ("data_type", 2, optional, field.TYPE_INT32, ""),
            ("int32_data", 5, repeated, field.TYPE_INT32, ""), ("name", 8, optional, field.TYPE_STRING, ""),
            ("raw_data", 9, optional, field.TYPE_BYTES, ""), ("data_location", 14, optional, field.TYPE_INT32, ""))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return {name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"crag_onnx_subset.{name}"))
            for name in ("ModelProto", "GraphProto", "NodeProto", "TensorProto")}
