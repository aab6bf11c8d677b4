"""Would int8 attention pay? The default's cross-encoder as crag loads it (``CRAG_ONNX_REWRITES=auto``, unpadded
variant) against the same model with its attention products (Q x K and probabilities x V, fp32 in every crag
export) quantised dynamically to int8 as well, one pair per call on a one-thread session, interleaved.

Reports the time per pair for ~256-token and mixed (40-250 token) pairs, the ratio (above 1: int8 attention is
faster), and how far the logits move: on those pairs, and on the recipe's held-out pairs (first ``--per-domain``
of each domain) with each domain's AUROC both ways. Needs the dev extra (onnx, onnxruntime's quantiser, sklearn).

Run: python bench/bench_int8_attention.py [--rounds 5] [--per-domain 150] [--heldout runs/v3/heldout.jsonl]
     [--json bench/results_int8_attention.json]
"""

from __future__ import annotations

import argparse
import logging
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_load_rewrites import QUERY, texts  # noqa: E402
from bench.output import emit  # noqa: E402


def variants(model: Path, work: Path) -> dict[str, bytes]:
    """The model as crag loads it, and that model with every remaining fp32 MatMul made dynamic int8."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from grader.load_rewrites import rewrites_in_use, unpadded_model

    as_loaded = unpadded_model(model, rewrites_in_use())
    if as_loaded is None:
        raise SystemExit(f"{model} has no attention mask to skip; this bench compares unpadded variants")
    (work / "as_loaded.onnx").write_bytes(as_loaded)
    logging.disable(logging.WARNING)  # the quantiser's advice to pre-process
    quantize_dynamic(work / "as_loaded.onnx", work / "int8_attention.onnx", op_types_to_quantize=["MatMul"],
                     weight_type=QuantType.QInt8, extra_options={"MatMulConstBOnly": False})
    logging.disable(logging.NOTSET)
    return {"as loaded": as_loaded, "int8 attention": (work / "int8_attention.onnx").read_bytes()}


def session(model: bytes):
    import onnxruntime as ort

    from grader.load_rewrites import rewrites_in_use

    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.log_severity_level = 3
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"],
                                disabled_optimizers=rewrites_in_use().disabled_optimizers())


def feeds_of(encoder, pairs: list[tuple[str, str]]) -> list[dict[str, np.ndarray]]:
    """One unpadded call per pair (the first window, as crag's first pass reads it)."""
    return [{"input_ids": b.input_ids, "attention_mask": b.attention_mask, "token_type_ids": b.token_type_ids}
            for b in encoder.encode(pairs, batch_size=1, bucket=False)]


def timed(sessions: dict, feeds: list[dict], rounds: int) -> dict[str, object]:
    """Per-pair times of each session, interleaved call by call, and the largest logit difference."""
    times: dict[str, list[float]] = {name: [] for name in sessions}
    diff = 0.0
    for _ in range(rounds):
        for feed in feeds:
            logits = {}
            for name, s in sessions.items():
                t0 = time.perf_counter()
                logits[name] = float(s.run(None, feed)[0].ravel()[0])
                times[name].append(time.perf_counter() - t0)
            diff = max(diff, abs(logits["as loaded"] - logits["int8 attention"]))
    p50 = {name: statistics.median(t) * 1e3 for name, t in times.items()}
    return {"tokens_mean": float(np.mean([f["input_ids"].shape[1] for f in feeds])),
            "p50_ms_per_pair": p50, "speedup": p50["as loaded"] / p50["int8 attention"], "max_logit_diff": diff}


def heldout(sessions: dict, encoder, path: Path, per_domain: int) -> dict[str, dict[str, float]]:
    from sklearn.metrics import roc_auc_score

    from training.metrics import binary_labels
    from training.recipe import domain_sets

    out = {}
    for domain, pairs in domain_sets(path).items():
        chosen = pairs.pairs[:per_domain]
        feeds = feeds_of(encoder, [(p.query, p.text) for p in chosen])
        logits = {name: np.array([float(s.run(None, f)[0].ravel()[0]) for f in feeds]) for name, s in sessions.items()}
        labels = binary_labels(chosen)
        change = np.abs(logits["as loaded"] - logits["int8 attention"])
        out[domain] = {"pairs": len(chosen), "mean_logit_diff": float(change.mean()),
                       "max_logit_diff": float(change.max()),
                       **{f"auroc {name}": float(roc_auc_score(labels, x)) for name, x in logits.items()}}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", default="default")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--pairs", type=int, default=10, help="pairs per workload")
    parser.add_argument("--per-domain", type=int, default=150)
    parser.add_argument("--heldout", type=Path, default=Path("runs/v3/heldout.jsonl"))
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    from grader.encoding import PairEncoder
    from models.bundle import read_bundle
    from models.registry import resolve_bundle

    bundle = read_bundle(resolve_bundle(args.bundle))
    encoder = PairEncoder(bundle.file("tokenizer.json"), bundle.manifest.max_length)
    with tempfile.TemporaryDirectory() as work:
        sessions = {name: session(model) for name, model in variants(bundle.model_file("int8")[1], Path(work)).items()}
    rng = random.Random(0)
    workloads = {name: feeds_of(encoder, [(QUERY, t) for t in texts(name, args.pairs, mixed, rng)])
                 for name, mixed in (("256 tokens", False), ("mixed 40-250 tokens", True))}
    results: dict[str, object] = {
        "bundle": args.bundle, "threads": 1,
        "workloads": {name: timed(sessions, feeds, args.rounds) for name, feeds in workloads.items()}}
    if args.heldout.is_file():
        results["heldout"] = heldout(sessions, encoder, args.heldout, args.per_domain)
    emit(results, args.json)


if __name__ == "__main__":
    main()
