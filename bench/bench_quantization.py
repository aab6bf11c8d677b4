"""Signed or unsigned int8 weights: how far each int8 grader is from its fp32 model, and how fast, on this CPU.

onnxruntime's dynamic int8 multiplies u8 activations by s8 weights by default; on x86 CPUs without
AVX512-VNNI that product goes through ``vpmaddubsw``, whose int16 sums saturate. This quantises one fp32
cross-encoder four ways (s8 and u8 weights, each with and without ``reduce_range``) and reports, against the
fp32 logits on the same pairs: correlation, mean and max |difference|, AUROC, and the time per pair (one pair
per call, one thread, variants interleaved round by round). ``--nbits`` adds onnxruntime's block-quantised
weight-only ``MatMulNBits`` (8-bit blocks of 32 and 128, 4-bit blocks of 32; int8 compute, accuracy_level 4),
which needs ``pip install onnx-ir`` (its quantiser imports it).

  python bench/bench_quantization.py --model <ONNX bundle with model.onnx> --data runs/v3/fuse.jsonl \
      --pairs 300 [--nbits] --json bench/results_quantization.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def cpu_flags() -> list[str]:
    """The CPU's int8-relevant flags (grader.load_rewrites reads them for the library)."""
    from grader.load_rewrites import cpu_flags as all_flags

    return sorted(f for f in all_flags() if f in ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8"))


def quantize_nbits(source: Path, out: Path, bits: int, block: int) -> None:
    """Weight-only block quantisation of every MatMul (MatMulNBits, int8 compute)."""
    from onnxruntime.quantization import matmul_nbits_quantizer, quant_utils

    config = matmul_nbits_quantizer.DefaultWeightOnlyQuantConfig(
        block_size=block, is_symmetric=True, accuracy_level=4, quant_format=quant_utils.QuantFormat.QOperator,
        op_types_to_quantize=("MatMul",), quant_axes=(("MatMul", 0),), bits=bits)
    quantizer = matmul_nbits_quantizer.MatMulNBitsQuantizer(quant_utils.load_model_with_shape_infer(source),
                                                           algo_config=config)
    quantizer.process()
    quantizer.model.save_model_to_file(str(out), False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True, help="ONNX bundle holding the fp32 model.onnx")
    parser.add_argument("--data", type=Path, required=True, help="labelled pairs (JSONL)")
    parser.add_argument("--pairs", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--nbits", action="store_true", help="also MatMulNBits weight-only variants (needs onnx-ir)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    import onnxruntime as ort
    import tokenizers
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from training.data import load_pairs
    from training.metrics import auroc, binary_labels

    pairs = load_pairs(args.data).pairs
    pairs = pairs[:: max(1, len(pairs) // args.pairs)][: args.pairs]
    y = binary_labels(pairs)
    tokenizer = tokenizers.Tokenizer.from_file(str(args.model / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(256)
    feeds = []
    for p in pairs:
        enc = tokenizer.encode(p.query, p.text)
        ids = np.array([enc.ids], dtype=np.int64)
        feeds.append({"input_ids": ids, "attention_mask": np.ones_like(ids),
                      "token_type_ids": np.array([enc.type_ids], dtype=np.int64)})
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    results: dict = {"model": str(args.model), "pairs": len(pairs), "cpu_flags": cpu_flags(), "variants": {}}
    with tempfile.TemporaryDirectory() as tmp:
        files = {"fp32": args.model / "model.onnx"}
        for name, weight_type, reduce in (("s8", QuantType.QInt8, False), ("s8-reduce-range", QuantType.QInt8, True),
                                          ("u8", QuantType.QUInt8, False), ("u8-reduce-range", QuantType.QUInt8, True)):
            files[name] = Path(tmp) / f"{name}.onnx"
            quantize_dynamic(str(files["fp32"]), str(files[name]), weight_type=weight_type, per_channel=True,
                             reduce_range=reduce)
        if args.nbits:
            for bits, block in ((8, 32), (8, 128), (4, 32)):
                files[f"nbits{bits}-block{block}"] = Path(tmp) / f"nbits{bits}-{block}.onnx"
                quantize_nbits(files["fp32"], files[f"nbits{bits}-block{block}"], bits, block)
        sessions = {name: ort.InferenceSession(str(f), options, providers=["CPUExecutionProvider"])
                    for name, f in files.items()}
        logits = {name: np.zeros(len(feeds)) for name in sessions}
        times: dict[str, list[float]] = {name: [] for name in sessions}
        for _ in range(args.rounds):
            for name, session in sessions.items():
                start = time.perf_counter()
                for i, feed in enumerate(feeds):
                    logits[name][i] = float(session.run(None, feed)[0].ravel()[0])
                times[name].append(1000 * (time.perf_counter() - start) / len(feeds))
    ref = logits["fp32"]
    for name, values in logits.items():
        diff = np.abs(values - ref)
        results["variants"][name] = {"corr_vs_fp32": float(np.corrcoef(values, ref)[0, 1]),
                                     "mean_abs_diff": float(diff.mean()), "max_abs_diff": float(diff.max()),
                                     "auroc": auroc(y, values), "ms_per_pair": statistics.median(times[name])}
        r = results["variants"][name]
        print(f"{name:16s} corr {r['corr_vs_fp32']:.4f}  mean |diff| {r['mean_abs_diff']:.3f}"
              f"  max {r['max_abs_diff']:.3f}  AUROC {r['auroc']:.4f}  {r['ms_per_pair']:.1f} ms/pair", flush=True)
    print("CPU flags:", " ".join(results["cpu_flags"]))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
