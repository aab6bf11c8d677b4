"""onnxruntime's fused BERT attention, quantised (``QAttention``), against crag's int8 path: same weights, one pair.

onnxruntime's transformer optimizer fuses no attention in crag's export: transformers' default attention exports
as scaled-dot-product attention, a pattern it does not know. With the model loaded with ``eager`` attention
it fuses all 6 layers into ``Attention`` (and the embeddings into ``EmbedLayerNormalization``), and dynamic
quantisation turns those into ``QAttention`` / ``QEmbedLayerNormalization``: int8 kernels written for BERT.
Contenders, one pair per call on one thread, interleaved, at 256 / 128 / 48 tokens:
- crag's int8 model as it loads it (``quantize_weights`` of the plain export, with ``grader/load_rewrites.py``);
- the fused model in fp32, and quantised with signed and with unsigned weights;
- the plain export in fp32.

    python bench/bench_qattention.py --json bench/results_qattention.json

Needs the ``train`` extra (torch, sentence-transformers) for the export.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.output import emit

LENGTHS = (256, 128, 48)


def export_models(folder: Path) -> dict[str, Path]:
    """The plain export (fp32, crag's int8) and the fused one (fp32, QAttention s8 / u8), same weights."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers import optimizer
    from sentence_transformers import CrossEncoder

    from training.base_models import resolve_base
    from training.export import _onnx_export, quantize_weights

    base = str(resolve_base("default-base"))
    plain = CrossEncoder(base, num_labels=1, max_length=256, device="cpu", local_files_only=True)
    eager = CrossEncoder(base, num_labels=1, max_length=256, device="cpu", local_files_only=True,
                         model_kwargs={"attn_implementation": "eager"})
    eager.model.load_state_dict(plain.model.state_dict())  # the same (randomly started) head on both
    paths = {"plain fp32": folder / "plain.onnx", "crag int8": folder / "plain.int8.onnx",
             "fused fp32": folder / "fused.onnx", "QAttention s8": folder / "fused.s8.onnx",
             "QAttention u8": folder / "fused.u8.onnx"}
    _onnx_export(plain.model, paths["plain fp32"])
    quantize_weights(paths["plain fp32"], paths["crag int8"])
    _onnx_export(eager.model, folder / "eager.onnx")
    fused = optimizer.optimize_model(str(folder / "eager.onnx"), model_type="bert", num_heads=12, hidden_size=384)
    fused.save_model_to_file(str(paths["fused fp32"]))
    for weight_type, name in ((QuantType.QInt8, "QAttention s8"), (QuantType.QUInt8, "QAttention u8")):
        quantize_dynamic(str(paths["fused fp32"]), str(paths[name]), weight_type=weight_type, per_channel=True,
                         extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
    return paths


def session(path: Path, crag_way: bool) -> Any:
    import onnxruntime as ort

    from grader.load_rewrites import model_for_this_cpu, rewrites_in_use, unpadded_model

    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if not crag_way:
        return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    rewrites = rewrites_in_use()
    model = unpadded_model(path, rewrites) or model_for_this_cpu(path, rewrites) or str(path)
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"],
                                disabled_optimizers=rewrites.disabled_optimizers())


def call(s: Any, feeds: dict[str, np.ndarray]) -> float:
    return float(s.run(None, {i.name: feeds[i.name] for i in s.get_inputs()})[0].ravel()[0])


def main() -> None:
    import onnx

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    paths = export_models(Path(tempfile.mkdtemp()))
    sessions = {name: session(path, name == "crag int8") for name, path in paths.items()}
    report: dict[str, Any] = {"operators": {name: dict(Counter(n.op_type for n in onnx.load(str(p)).graph.node))
                                            for name, p in paths.items() if name in ("crag int8", "QAttention s8")},
                              "lengths": {}}
    rng = np.random.default_rng(0)
    for length in LENGTHS:
        ids = rng.integers(1000, 20000, (1, length)).astype(np.int64)
        ids[0, 0], ids[0, -1] = 101, 102
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}

        logits = {name: call(s, feeds) for name, s in sessions.items()}
        seconds: dict[str, list[float]] = {name: [] for name in sessions}
        for _ in range(args.rounds):
            for name, s in sessions.items():
                start = time.perf_counter()
                call(s, feeds)
                seconds[name].append(time.perf_counter() - start)
        crag = statistics.median(seconds["crag int8"])
        report["lengths"][str(length)] = {
            name: {"p50_ms": 1000 * statistics.median(v), "speed_vs_crag_int8": crag / statistics.median(v),
                   "logit": logits[name], "logit_diff_vs_plain_fp32": abs(logits[name] - logits["plain fp32"])}
            for name, v in seconds.items()}
    emit(report, args.json)


if __name__ == "__main__":
    main()
