"""Grading latency against sentence-transformers CrossEncoder, interleaved in one run, 2 threads in all.

Contenders, each called once per round, rounds interleaved so that a noisy machine hits all alike:
- ``CrossEncoder.predict`` (torch fp32) on the all-MiniLM-L6-v2 weights (CrossEncoder cannot load the
  grader's segment-pooling head; the encoder and its FLOPs are the same);
- the same weights exported to dynamic int8 ONNX, graded the way crag grades: one pair per call on
  single-thread sessions side by side (``OnnxGrader``'s pool), and the old way (one two-thread session,
  pairs one after another) for comparison;
- the shipped default bundle as users get it (cross-encoder + the fused bi-encoder cosine), and the shipped
  ``fast`` bundle (its fusion gives its 3-layer student no weight, so it grades by the calibrated cosine
  alone and never runs the student), caches emptied before every call so that nothing is reused.
Two workloads: 20 chunks of 256 tokens, and 20 chunks of mixed length (40-250 tokens). Reports p50/p95,
the median of the per-round speed-up over CrossEncoder, achieved GFLOP/s against measured fp32 (numpy
GEMM) and int8 (onnxruntime MatMulInteger) peaks, the cost of tokenisation per pair, and the largest score
difference between the pool and one pair at a time (0 means grades are bit-identical).

Run: python bench/bench_grade.py [--threads 2] [--rounds 30] [--json bench/results_grade.json]
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
WORDS = ("the", "grader", "reads", "a", "query", "and", "a", "retrieved", "passage", "and", "returns", "a",
         "calibrated", "probability", "that", "the", "passage", "answers", "the", "question", "while", "uncertain",
         "chunks", "go", "to", "an", "llm")


def fp32_peak(threads: int, n: int = 2048, repeats: int = 5) -> float:
    """fp32 GFLOP/s of a square matmul with numpy on ``threads`` threads."""
    from threadpoolctl import threadpool_limits

    a = np.random.default_rng(0).random((n, n), dtype=np.float32)
    b = np.random.default_rng(1).random((n, n), dtype=np.float32)
    with threadpool_limits(limits=threads):
        a @ b
        best = min(_timed(lambda: a @ b) for _ in range(repeats))
    return 2 * n**3 / best / 1e9


def int8_peak(threads: int, n: int = 2048, repeats: int = 5) -> float:
    """int8 GOP/s of onnxruntime's MatMulInteger (u8 x s8, the kernels dynamic int8 models use)."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["a", "b"], ["c"])], "peak",
        [helper.make_tensor_value_info("a", TensorProto.UINT8, [n, n]),
         helper.make_tensor_value_info("b", TensorProto.INT8, [n, n])],
        [helper.make_tensor_value_info("c", TensorProto.INT32, [n, n])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(onnx._serialize(model) if hasattr(onnx, "_serialize") else
                                   model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feeds = {"a": rng.integers(0, 255, (n, n), dtype=np.uint8), "b": rng.integers(-127, 127, (n, n), dtype=np.int8)}
    session.run(None, feeds)
    best = min(_timed(lambda: session.run(None, feeds)) for _ in range(repeats))
    return 2 * n**3 / best / 1e9


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def interleaved(contenders: dict, chunks: list[str], rounds: int) -> dict[str, list[float]]:
    """Seconds per call of each contender on ``chunks``: one warm-up call each, then ``rounds`` rounds in which
    every contender is called once in turn, so that a noisy machine slows all alike."""
    for fn in contenders.values():
        fn(chunks)
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(rounds):
        for name, fn in contenders.items():
            samples[name].append(_timed(lambda fn=fn: fn(chunks)))
    return samples


def model_flops(layers: int, hidden: int, intermediate: int, seq: int) -> float:
    """Forward FLOPs of a BERT encoder on one sequence (matmuls only: projections, attention, FFN)."""
    per_token = 2 * (4 * hidden * hidden + 2 * hidden * intermediate)
    attention = 2 * 2 * seq * seq * hidden
    return layers * (per_token * seq + attention)


def chunk_text(encoder, tokens: int, offset: int = 0) -> str:
    """A text that tokenises (with the query) to about ``tokens`` tokens."""
    words, i = [], offset
    target = min(tokens, encoder.max_length)
    while encoder.token_count(QUERY, " ".join(words)) < target:
        words.append(WORDS[i % len(WORDS)])
        i += 1
    return " ".join(words)


class SequentialSessions:
    """The pre-pool way, for comparison: one session with ``threads`` intra-op threads, pairs in turn."""

    def __init__(self, path: Path, threads: int) -> None:
        import onnxruntime as ort

        from grader.load_rewrites import model_for_this_cpu, rewrites_in_use, unpadded_model

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # the model and options the pool runs for these unpadded pairs (grader/load_rewrites.py), the setting read once
        rewrites = rewrites_in_use()
        model = unpadded_model(path, rewrites) or model_for_this_cpu(path, rewrites) or str(path)
        self.session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"],
                                            disabled_optimizers=rewrites.disabled_optimizers())
        self.input_names = [i.name for i in self.session.get_inputs()]
        self.workers = 1

    def run(self, feeds):
        return self.session.run(None, {k: feeds[k] for k in self.input_names})[0]

    def map(self, fn, items):
        return [fn(item) for item in items]


def run(args: argparse.Namespace) -> dict:
    import torch
    from sentence_transformers import CrossEncoder

    from grader.factory import load_grader
    from grader.onnx_backend import OnnxGrader
    from grader.session_pool import SessionPool
    from models.bundle import read_bundle
    from models.registry import resolve_bundle
    from training.base_models import resolve_base
    from training.export import _onnx_export, quantize_weights

    torch.set_num_threads(args.threads)
    default = load_grader("default", threads=args.threads, cache_pairs=0)
    fast = load_grader("fast", threads=args.threads, cache_pairs=0)
    encoder = default.encoder
    seq = encoder.max_length
    rng = np.random.default_rng(0)
    workloads = {
        "256 tokens": [chunk_text(encoder, seq, offset=i) for i in range(args.chunks)],
        "mixed 40-250 tokens": [chunk_text(encoder, int(n), offset=i)
                                for i, n in enumerate(rng.integers(40, 251, args.chunks))],
    }
    lengths = {name: [encoder.token_count(QUERY, c) for c in chunks] for name, chunks in workloads.items()}
    flops = {name: sum(model_flops(6, 384, 1536, n) for n in ns) for name, ns in lengths.items()}

    # same weights on both sides: the base model, as CrossEncoder loads it and as crag exports it
    ce = CrossEncoder(str(resolve_base("default-base")), num_labels=1, max_length=seq, device="cpu",
                      local_files_only=True)
    tmp = Path(tempfile.mkdtemp())
    _onnx_export(ce.model, tmp / "m.onnx")
    quantize_weights(tmp / "m.onnx", tmp / "m.int8.onnx")
    bundle = read_bundle(resolve_bundle("default"))

    def same_weights(sessions) -> OnnxGrader:
        grader = OnnxGrader(bundle, threads=args.threads, cache_pairs=0)
        grader.sessions, grader.fusion = sessions, None  # the base weights' logit, no fused cosine
        return grader

    pooled = same_weights(SessionPool(tmp / "m.int8.onnx", args.threads))
    sequential = same_weights(SequentialSessions(tmp / "m.int8.onnx", args.threads))
    contenders = {
        "sentence-transformers CrossEncoder.predict (torch fp32)":
            lambda chunks: ce.predict([(QUERY, c) for c in chunks], batch_size=len(chunks), show_progress_bar=False),
        "same weights, crag int8 per pair, pool of 1-thread sessions": lambda chunks: pooled.grade(QUERY, chunks),
        "same weights, crag int8 per pair, one 2-thread session (before)":
            lambda chunks: sequential.grade(QUERY, chunks),
        "default bundle as shipped (fused cosine, pool, caches emptied)": lambda chunks: _cold(default, chunks),
        "fast bundle (calibrated cosine, student not run; caches emptied)": lambda chunks: _cold(fast, chunks),
    }
    results: dict[str, dict] = {}
    for workload, chunks in workloads.items():
        samples = interleaved(contenders, chunks, args.rounds)
        baseline = samples[next(iter(contenders))]
        rows = {}
        for name, values in samples.items():
            ms = sorted(1000 * v for v in values)
            rows[name] = {"p50_ms": statistics.median(ms), "p95_ms": float(np.percentile(ms, 95)),
                          "speedup_vs_crossencoder": statistics.median(b / v for b, v in zip(baseline, values,
                                                                                             strict=True)),
                          "gflops_per_s": flops[workload] / statistics.median(values) / 1e9}
            print(f"{workload:20s} {name:66s} p50 {rows[name]['p50_ms']:7.1f} ms  p95 {rows[name]['p95_ms']:7.1f} ms"
                  f"  x{rows[name]['speedup_vs_crossencoder']:.2f}", flush=True)
        alone = np.array([sequential.grade(QUERY, [c])[0].logit for c in chunks])
        together = np.array([g.logit for g in pooled.grade(QUERY, chunks)])
        results[workload] = {"tokens_per_pair": {"min": min(lengths[workload]), "max": max(lengths[workload]),
                                                 "mean": statistics.fmean(lengths[workload])},
                             "gflop_per_call": flops[workload] / 1e9, "timings": rows,
                             "max_logit_diff_pool_vs_one_at_a_time": float(np.abs(alone - together).max())}
    tokenise = [_timed(lambda: encoder.encode_windows([(QUERY, c) for c in workloads["mixed 40-250 tokens"]],
                                                      max_windows=4, batch_size=1)) for _ in range(args.rounds)]
    from grader.load_rewrites import rewrites_in_use

    return {"threads": args.threads, "chunks": args.chunks, "rounds": args.rounds,
            "onnx_rewrites": rewrites_in_use().describe(),
            "fp32_peak_gflops": fp32_peak(args.threads), "int8_peak_gops": int8_peak(args.threads),
            "tokenise_ms_per_pair": 1000 * statistics.median(tokenise) / args.chunks,
            "workloads": results, "machine": {"cpus": os.cpu_count(), "platform": sys.platform}}


def _cold(grader, chunks):
    """Grade with nothing reused: the shared embedding cache is emptied first."""
    grader.fusion_embedder.cache.clear()
    return grader.grade(QUERY, chunks)


def main() -> None:
    warnings.filterwarnings("ignore")
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--chunks", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    result = run(args)
    print(json.dumps({k: v for k, v in result.items() if k != "workloads"}, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
