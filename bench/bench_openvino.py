"""OpenVINO against onnxruntime on the default grader's cross-encoder: one pair per call, 2 cores, interleaved.

Needs openvino and nncf, which crag does not install (a separate environment:
`python -m venv /tmp/ov && /tmp/ov/bin/pip install openvino==2026.4.1 nncf==3.4.0 onnx onnxruntime tokenizers`).
The fp32 ONNX is the cross-encoder the default bundle was quantised from (`crag export` of the recipe's
trained model writes it as model.onnx next to model.int8.onnx). Static int8 is calibrated on the
workload itself, the most favourable case for it.

Run: /tmp/ov/bin/python bench/bench_openvino.py [--rounds 15] [--fp32 runs/v3/onnx/model.onnx]
     [--json bench/results_openvino.json]
"""

from __future__ import annotations

import argparse
import json
import queue
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nncf
import numpy as np
import onnxruntime as ort
import openvino as ov
import tokenizers

ROOT = Path(__file__).resolve().parents[1]
BUNDLE = ROOT / "models" / "bundles" / "default"
QUERY = "what does the grader return for a retrieved passage?"
WORDS = ("the", "grader", "reads", "a", "query", "and", "a", "retrieved", "passage", "and", "returns", "a",
         "calibrated", "probability", "that", "the", "passage", "answers", "the", "question")


def workload(n: int = 20) -> list[dict[str, np.ndarray]]:
    """``n`` tokenised pairs of 30-230 words, one feed each."""
    tok = tokenizers.Tokenizer.from_file(str(BUNDLE / "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(256)
    rng = np.random.default_rng(0)
    feeds = []
    for i, length in enumerate(rng.integers(30, 230, n)):
        encoded = tok.encode(QUERY, " ".join(WORDS[(i + j) % len(WORDS)] for j in range(length)))
        ids = np.array([encoded.ids], dtype=np.int64)
        feeds.append({"input_ids": ids, "attention_mask": np.ones_like(ids),
                      "token_type_ids": np.array([encoded.type_ids], dtype=np.int64)})
    return feeds


def ort_pool(path: Path, feeds: list) -> Callable[[], np.ndarray]:
    """crag's way: two single-thread sessions, one pair per call."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    free: queue.SimpleQueue = queue.SimpleQueue()
    for _ in range(2):
        free.put(ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"]))
    executor = ThreadPoolExecutor(2)

    def one(feed):
        session = free.get()
        try:
            return session.run(None, feed)[0].ravel()[0]
        finally:
            free.put(session)

    return lambda: np.array(list(executor.map(one, feeds)))


def ov_async(core: ov.Core, model, feeds: list) -> Callable[[], np.ndarray]:
    """OpenVINO's way: two streams of one thread, pairs queued asynchronously."""
    compiled = core.compile_model(model, "CPU", {"INFERENCE_NUM_THREADS": 2, "NUM_STREAMS": 2,
                                                 "PERFORMANCE_HINT": "THROUGHPUT"})
    requests = ov.AsyncInferQueue(compiled, 2)
    out = np.zeros(len(feeds))

    def done(request, i):
        out[i] = request.get_output_tensor(0).data.ravel()[0]

    requests.set_callback(done)

    def run():
        for i, feed in enumerate(feeds):
            requests.start_async(feed, i)
        requests.wait_all()
        return out.copy()

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--fp32", default=str(ROOT / "runs" / "v3" / "onnx" / "model.onnx"))
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    feeds = workload()
    core = ov.Core()
    fp32 = Path(args.fp32)
    contenders = {
        "onnxruntime int8 (shipped), pool of 2 one-thread sessions": ort_pool(BUNDLE / "model.int8.onnx", feeds),
        "onnxruntime fp32, pool of 2 one-thread sessions": ort_pool(fp32, feeds),
        "openvino fp32, 2 streams": ov_async(core, core.read_model(fp32), feeds),
        "openvino int8 weights (nncf.compress_weights), 2 streams":
            ov_async(core, nncf.compress_weights(core.read_model(fp32)), feeds),
        "openvino static int8 (nncf.quantize on this workload), 2 streams":
            ov_async(core, nncf.quantize(core.read_model(fp32), nncf.Dataset(feeds),
                                         model_type=nncf.ModelType.TRANSFORMER, subset_size=len(feeds)), feeds),
        "openvino on the shipped int8 onnx, 2 streams": ov_async(core, core.read_model(BUNDLE / "model.int8.onnx"),
                                                                 feeds),
    }
    outputs = {name: fn() for name, fn in contenders.items()}
    reference = outputs["onnxruntime fp32, pool of 2 one-thread sessions"]
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(args.rounds):
        for name, fn in contenders.items():
            t0 = time.perf_counter()
            fn()
            samples[name].append(time.perf_counter() - t0)
    base = samples["onnxruntime int8 (shipped), pool of 2 one-thread sessions"]
    results = {}
    for name, values in samples.items():
        results[name] = {"p50_ms": 1000 * statistics.median(values),
                         "speed_vs_ort_int8": statistics.median(b / v for b, v in zip(base, values, strict=True)),
                         "max_logit_diff_vs_fp32": float(np.abs(outputs[name] - reference).max())}
        print(f"{name:66s} p50 {results[name]['p50_ms']:7.1f} ms  x{results[name]['speed_vs_ort_int8']:.2f}  "
              f"max |d logit| vs fp32 {results[name]['max_logit_diff_vs_fp32']:.3f}", file=sys.stderr)
    report = {"versions": {"openvino": ov.__version__, "onnxruntime": ort.__version__, "nncf": nncf.__version__},
              "workload": "20 (query, chunk) pairs of 30-230 words, one pair per call, 2 cores", "results": results}
    print(json.dumps(report, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
