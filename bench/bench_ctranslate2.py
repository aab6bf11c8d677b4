"""CTranslate2 as the grading runtime, against crag's onnxruntime pool and CrossEncoder.predict, interleaved.

Issue 14 asks whether another CPU runtime beats onnxruntime on the same weights. OpenVINO was measured in
bench/bench_openvino.py; this is CTranslate2 (OpenNMT's inference engine: int8 weights, activations quantised
per row, Intel MKL / oneDNN kernels), which reads BERT encoders. Same weights on every side (all-MiniLM-L6-v2,
as bench/bench_grade.py uses them), the same 20-chunk workloads (256 tokens, mixed 40-250), 2 cores in all:

- ``CrossEncoder.predict`` (torch fp32), the baseline of every speed-up;
- crag's int8 ONNX graded one pair per call on a pool of single-thread sessions (``OnnxGrader``);
- CTranslate2 int8, one pair per call on 2 single-thread workers (called from two threads: it releases the GIL);
- CTranslate2 int8, all 20 pairs in one padded batch on 2 threads;
- CTranslate2 fp32, one pair per call on 2 workers.

Accuracy: the mean relative error of CTranslate2's last hidden state against torch fp32's on the mixed workload,
and how much a pair's hidden state moves when it is computed in the padded batch instead of alone.

CTranslate2 is not a dependency of crag. It needs its converter, which reads the model with transformers:
``pip install ctranslate2==4.8.5`` into the dev environment (or a venv that sees it), then
``python bench/bench_ctranslate2.py [--rounds 8] [--json bench/results_ctranslate2.json]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_grade import QUERY, chunk_text, interleaved  # noqa: E402


def run(args: argparse.Namespace) -> dict:
    import ctranslate2
    import torch
    from ctranslate2.converters import TransformersConverter
    from sentence_transformers import CrossEncoder
    from tokenizers import Tokenizer

    from grader.factory import load_grader
    from grader.onnx_backend import OnnxGrader
    from grader.session_pool import SessionPool
    from models.bundle import read_bundle
    from models.registry import resolve_bundle
    from training.base_models import resolve_base
    from training.export import _onnx_export, quantize_weights

    torch.set_num_threads(2)
    base = resolve_base("default-base")
    encoder = load_grader("default", threads=2, cache_pairs=0).encoder
    seq = encoder.max_length
    rng = np.random.default_rng(0)
    workloads = {
        "256 tokens": [chunk_text(encoder, seq, offset=i) for i in range(20)],
        "mixed 40-250 tokens": [chunk_text(encoder, int(n), offset=i)
                                for i, n in enumerate(rng.integers(40, 251, 20))],
    }
    ce = CrossEncoder(str(base), num_labels=1, max_length=seq, device="cpu", local_files_only=True)
    tmp = Path(tempfile.mkdtemp())
    _onnx_export(ce.model, tmp / "m.onnx")
    quantize_weights(tmp / "m.onnx", tmp / "m.int8.onnx")
    pooled = OnnxGrader(read_bundle(resolve_bundle("default")), threads=2, cache_pairs=0)
    pooled.sessions, pooled.fusion = SessionPool(tmp / "m.int8.onnx", 2), None  # the base weights' logit alone
    TransformersConverter(str(base)).convert(str(tmp / "ct2"), quantization="int8", force=True)

    def ct2(compute_type: str, workers: int, threads: int):
        return ctranslate2.Encoder(str(tmp / "ct2"), device="cpu", compute_type=compute_type,
                                   inter_threads=workers, intra_threads=threads)

    ct_int8, ct_int8_batch, ct_fp32 = ct2("int8", 2, 1), ct2("int8", 1, 2), ct2("float32", 2, 1)
    tokenizer = Tokenizer.from_file(str(base / "tokenizer.json"))
    tokenizer.enable_truncation(seq)
    threads = ThreadPoolExecutor(2)

    def encoded(chunks):
        pairs = tokenizer.encode_batch([(QUERY, c) for c in chunks])
        return [p.ids for p in pairs], [p.type_ids for p in pairs]

    def per_pair(model):
        def grade(chunks):
            ids, types = encoded(chunks)
            longest_first = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
            return list(threads.map(lambda i: np.asarray(
                model.forward_batch([ids[i]], token_type_ids=[types[i]]).last_hidden_state), longest_first))
        return grade

    def one_batch(chunks):
        ids, types = encoded(chunks)
        return np.asarray(ct_int8_batch.forward_batch(ids, token_type_ids=types).last_hidden_state)

    contenders = {
        "sentence-transformers CrossEncoder.predict (torch fp32)":
            lambda chunks: ce.predict([(QUERY, c) for c in chunks], batch_size=len(chunks), show_progress_bar=False),
        "crag int8 ONNX, one pair per call, pool of 1-thread sessions": lambda chunks: pooled.grade(QUERY, chunks),
        "CTranslate2 int8, one pair per call, 2 one-thread workers": per_pair(ct_int8),
        "CTranslate2 int8, one padded batch, 2 threads": one_batch,
        "CTranslate2 fp32, one pair per call, 2 one-thread workers": per_pair(ct_fp32),
    }
    timings: dict[str, dict] = {}
    for workload, chunks in workloads.items():
        samples = interleaved(contenders, chunks, args.rounds)
        baseline = samples[next(iter(contenders))]
        crag = samples["crag int8 ONNX, one pair per call, pool of 1-thread sessions"]
        rows = {}
        for name, values in samples.items():
            rows[name] = {"p50_ms": 1000 * statistics.median(values),
                          "speedup_vs_crossencoder": statistics.median(b / v for b, v in zip(baseline, values,
                                                                                             strict=True)),
                          "speed_vs_crag_pool": statistics.median(c / v for c, v in zip(crag, values, strict=True))}
            print(f"{workload:20s} {name:62s} p50 {rows[name]['p50_ms']:7.1f} ms  "
                  f"x{rows[name]['speedup_vs_crossencoder']:.2f} vs CrossEncoder, "
                  f"x{rows[name]['speed_vs_crag_pool']:.2f} vs crag", flush=True)
        timings[workload] = rows
    return {"versions": {"ctranslate2": ctranslate2.__version__, "torch": torch.__version__},
            "rounds": args.rounds, "timings": timings, "accuracy": accuracy(ce, encoded, workloads, ct_int8,
                                                                             ct_int8_batch, ct_fp32)}


def accuracy(ce, encoded, workloads, ct_int8, ct_int8_batch, ct_fp32) -> dict:
    """CTranslate2's hidden states against torch fp32's, and a pair in the padded batch against the pair alone."""
    import torch

    ids, types = encoded(workloads["mixed 40-250 tokens"])
    batch = np.asarray(ct_int8_batch.forward_batch(ids, token_type_ids=types).last_hidden_state)
    errors: dict[str, list[float]] = {"int8": [], "fp32": []}
    batch_moves = []
    for i in range(len(ids)):
        with torch.no_grad():
            reference = ce.model.base_model(input_ids=torch.tensor([ids[i]]),
                                            token_type_ids=torch.tensor([types[i]])).last_hidden_state[0].numpy()
        for name, model in (("int8", ct_int8), ("fp32", ct_fp32)):
            hidden = np.asarray(model.forward_batch([ids[i]], token_type_ids=[types[i]]).last_hidden_state)[0]
            errors[name].append(float(np.abs(hidden - reference).mean() / np.abs(reference).mean()))
            if name == "int8":
                batch_moves.append(float(np.abs(batch[i, :len(ids[i])] - hidden).max()))
    return {"mean_relative_error_vs_torch_fp32": {k: statistics.fmean(v) for k, v in errors.items()},
            "max_hidden_state_move_batch_vs_alone": max(batch_moves)}


def main() -> None:
    warnings.filterwarnings("ignore")
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    result = run(args)
    print(json.dumps(result["accuracy"], indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
