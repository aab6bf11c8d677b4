"""Grading latency of the shipped default bundle against sentence-transformers CrossEncoder, in one run.

Measures, on this machine with N threads, 20 chunks of 256 tokens per call:
- CrossEncoder.predict (torch fp32) on the all-MiniLM-L6-v2 weights (CrossEncoder cannot load the
  grader's segment-pooling head; the encoder and its FLOPs are the same);
- ONNX fp32 and dynamic int8 exported from those same weights (same run, temp dir);
- the shipped default bundle (int8), and the same with fewer layers as a lever;
- a mixed-length batch with and without length bucketing;
- achieved FLOP/s of each against a measured fp32 GEMM peak (numpy 2048x2048).

Run: python bench/bench_grade.py [--threads 2] [--repeats 30] [--json bench/results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

QUERY = "what does the grader return for a retrieved passage?"


def gemm_peak(threads: int, n: int = 2048, repeats: int = 5) -> float:
    """fp32 GFLOP/s of a square matmul with numpy on ``threads`` threads."""
    from threadpoolctl import threadpool_limits

    a = np.random.default_rng(0).random((n, n), dtype=np.float32)
    b = np.random.default_rng(1).random((n, n), dtype=np.float32)
    with threadpool_limits(limits=threads):
        a @ b
        best = min(_timed(lambda: a @ b) for _ in range(repeats))
    return 2 * n**3 / best / 1e9


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def model_flops(layers: int, hidden: int, intermediate: int, seq: int) -> float:
    """Forward FLOPs of a BERT encoder on one sequence (matmuls only: projections, attention, FFN)."""
    per_token = 2 * (4 * hidden * hidden + 2 * hidden * intermediate)
    attention = 2 * 2 * seq * seq * hidden
    return layers * (per_token * seq + attention)


def chunk_text(encoder, tokens: int) -> str:
    """A text that tokenises (with the query) to at least ``tokens`` tokens."""
    words = [
        "the", "grader", "reads", "a", "query", "and", "a", "retrieved", "passage", "and", "returns", "a",
        "calibrated", "probability", "that", "the", "passage", "answers", "the", "question", "while",
        "uncertain", "chunks", "go", "to", "an", "llm"
    ]
    text, i = "", 0
    target = min(tokens, encoder.max_length)  # counts are capped at max_length (truncation)
    while encoder.token_count(QUERY, text) < target:
        text += " " + words[i % len(words)]
        i += 1
    return text.strip()


def stats_ms(samples: list[float]) -> dict[str, float]:
    ms = sorted(1000 * s for s in samples)
    return {"p50_ms": statistics.median(ms), "p95_ms": float(np.percentile(ms, 95)), "min_ms": ms[0]}


def run(args: argparse.Namespace) -> dict:
    import torch

    from grader.factory import load_grader
    from grader.onnx_backend import OnnxGrader
    from models.bundle import read_bundle
    from models.registry import resolve_bundle

    torch.set_num_threads(args.threads)
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    default = load_grader("default", threads=args.threads)  # int8: one pair per run (batch-independent)
    batched = load_grader("default", threads=args.threads, batch_size=args.chunks)
    seq = default.encoder.max_length
    chunks = [chunk_text(default.encoder, seq)] * args.chunks
    timings: dict[str, dict] = {}

    def bench(name: str, fn, flops_per_call: float) -> None:
        fn()
        samples = [_timed(fn) for _ in range(args.repeats)]
        row = stats_ms(samples)
        row["gflops_per_s"] = flops_per_call / (row["p50_ms"] / 1000) / 1e9
        timings[name] = row
        print(f"{name:38s} p50 {row['p50_ms']:8.1f} ms  p95 {row['p95_ms']:8.1f} ms  "
              f"{row['gflops_per_s']:6.1f} GFLOP/s", flush=True)

    flops = args.chunks * model_flops(6, 384, 1536, seq)
    peak = gemm_peak(args.threads)
    print(f"fp32 GEMM peak (numpy 2048^3, {args.threads} threads): {peak:.1f} GFLOP/s", flush=True)
    print(f"model: 6 layers, 384 hidden, {args.chunks} chunks x {seq} tokens = {flops / 1e9:.1f} GFLOP per call")

    from sentence_transformers import CrossEncoder

    from training.base_models import resolve_base

    # CrossEncoder cannot load the grader's segment-pooling head, so both sides use the same base weights:
    # identical encoder, identical FLOPs (the head is one dot product).
    torch_dir = resolve_base("default-base")

    ce = CrossEncoder(str(torch_dir), num_labels=1, max_length=seq, device="cpu", local_files_only=True)
    pairs = [(QUERY, c) for c in chunks]
    bench("sentence-transformers CrossEncoder", lambda: ce.predict(pairs, batch_size=args.chunks,
                                                                   show_progress_bar=False), flops)

    with tempfile.TemporaryDirectory() as tmp:
        from training.export import _onnx_export, _quantize

        fp32 = Path(tmp) / "m.onnx"
        _onnx_export(ce.model, fp32)
        _quantize(fp32, Path(tmp) / "m.int8.onnx")
        bundle = read_bundle(resolve_bundle("default"))
        for variant, path in (("fp32", fp32), ("int8", Path(tmp) / "m.int8.onnx")):
            g = OnnxGrader(bundle, threads=args.threads, batch_size=args.chunks)
            g.session = _session(path, args.threads)
            g._inputs = [i.name for i in g.session.get_inputs()]
            bench(f"crag ONNX {variant}, batch 20 (same weights)", lambda g=g: g.grade(QUERY, chunks), flops)

    bench("crag default bundle (int8, per pair)", lambda: default.grade(QUERY, chunks), flops)
    bench("crag default bundle (int8, batch 20)", lambda: batched.grade(QUERY, chunks), flops)
    one = [chunks[0]]
    bench("crag default bundle, 1 chunk", lambda: default.grade(QUERY, one), flops / args.chunks)

    mixed = [chunk_text(default.encoder, n) for n in np.linspace(16, seq, args.chunks).astype(int)]
    mixed_flops = sum(model_flops(6, 384, 1536, default.encoder.token_count(QUERY, c)) for c in mixed)
    padded_flops = args.chunks * model_flops(6, 384, 1536, seq)
    bucketed = load_grader("default", threads=args.threads, batch_size=4)
    bench("default, mixed lengths, bucketed b=4", lambda: bucketed.grade(QUERY, mixed), mixed_flops)
    whole = load_grader("default", threads=args.threads, batch_size=args.chunks)
    bench("default, mixed lengths, one batch", lambda: whole.grade(QUERY, mixed), mixed_flops)
    print(f"  (a batch padded to {seq} would cost {padded_flops / 1e9:.1f} GFLOP; the real tokens cost "
          f"{mixed_flops / 1e9:.1f})")

    for layers in (4, 3):
        path = Path(tempfile.mkdtemp()) / f"l{layers}.onnx"
        ce.model.bert.encoder.layer = ce.model.bert.encoder.layer[:layers]
        _onnx_export(ce.model, path)
        _quantize(path, path.with_suffix(".int8.onnx"))
        g = OnnxGrader(read_bundle(resolve_bundle("default")), threads=args.threads)
        g.session = _session(path.with_suffix(".int8.onnx"), args.threads)
        g._inputs = [i.name for i in g.session.get_inputs()]
        bench(f"int8, first {layers} layers (speed only)", lambda g=g: g.grade(QUERY, chunks),
              args.chunks * model_flops(layers, 384, 1536, seq))

    return {"threads": args.threads, "chunks": args.chunks, "tokens_per_chunk": seq, "gemm_peak_gflops": peak,
            "gflop_per_call": flops / 1e9, "timings": timings,
            "machine": {"cpus": os.cpu_count(), "platform": sys.platform}}


def _session(path: Path, threads: int):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def main() -> None:
    warnings.filterwarnings("ignore")
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--chunks", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    result = run(args)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
