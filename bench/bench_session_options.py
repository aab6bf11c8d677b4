"""onnxruntime session options that could cut the cross-encoder's time per pair without touching the model.

The default's cross-encoder is loaded as crag loads it (the unpadded variant with its rewrites, one thread) four
times, differing in one option each: as crag has it; ``session.set_denormal_as_zero`` (flush denormal floats to
zero, which x86 computes with slow microcode when they occur, e.g. in a softmax's tiny exponentials); memory
pattern planning off (``enable_mem_pattern``: planned per input shape, and every pair has its own length); the
CPU memory arena off (``enable_cpu_mem_arena``). Real held-out pairs, one pair per call: texts of at least 200
words cut at 256 tokens, and every 97th pair as it comes (mixed lengths). Interleaved rounds, order alternating;
the speed-up is the median of crag's round time over the option's, and every option's logits are compared with
crag's own.

Run: python bench/bench_session_options.py [--work runs/v3] [--rounds 8] [--json bench/results_session_options.json]
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.output import emit, work_parser  # noqa: E402

OPTIONS = ("as crag loads it", "denormals as zero", "memory pattern off", "memory arena off")


def _session(model: bytes, option: str, disabled: list[str]) -> Any:
    import onnxruntime as ort

    o = ort.SessionOptions()
    o.intra_op_num_threads = o.inter_op_num_threads = 1
    o.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    o.log_severity_level = 3
    if option == "denormals as zero":
        o.add_session_config_entry("session.set_denormal_as_zero", "1")
    elif option == "memory pattern off":
        o.enable_mem_pattern = False
    elif option == "memory arena off":
        o.enable_cpu_mem_arena = False
    return ort.InferenceSession(model, o, providers=["CPUExecutionProvider"], disabled_optimizers=disabled)


def _feeds(rows: list[dict[str, Any]], tokenizer: Any, max_tokens: int = 256) -> list[dict[str, np.ndarray]]:
    feeds = []
    for row in rows:
        enc = tokenizer.encode(row["query"], row["text"])
        ids, types = enc.ids[:max_tokens], enc.type_ids[:max_tokens]
        feeds.append({"input_ids": np.array([ids], np.int64), "attention_mask": np.ones((1, len(ids)), np.int64),
                      "token_type_ids": np.array([types], np.int64)})
    return feeds


def main() -> None:
    parser = work_parser(__doc__)
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args()
    from tokenizers import Tokenizer

    from grader.load_rewrites import rewrites_in_use, unpadded_model
    from models.registry import resolve_bundle

    bundle = resolve_bundle("default")
    tokenizer = Tokenizer.from_file(str(bundle / "tokenizer.json"))
    rows = [json.loads(line) for line in (args.work / "heldout.jsonl").read_text(encoding="utf-8").splitlines()]
    workloads = {"256 tokens": _feeds([r for r in rows if len(r["text"].split()) >= 200][:20], tokenizer),
                 "mixed": _feeds(rows[::97][:20], tokenizer)}
    model = unpadded_model(bundle / "model.int8.onnx")
    if model is None:
        raise SystemExit("this bundle has no attention mask to skip; nothing to compare")
    disabled = rewrites_in_use().disabled_optimizers()
    sessions = {name: _session(model, name, disabled) for name in OPTIONS}
    results: dict[str, Any] = {"command": "python bench/bench_session_options.py", "rounds": args.rounds}
    for workload, feeds in workloads.items():
        reference = [sessions[OPTIONS[0]].run(None, f)[0] for f in feeds]
        times: dict[str, list[float]] = {name: [] for name in OPTIONS}
        largest = {name: max(float(np.abs(s.run(None, f)[0] - r).max()) for f, r in zip(feeds, reference, strict=True))
                   for name, s in sessions.items()}
        for round_ in range(args.rounds):
            for name in OPTIONS if round_ % 2 == 0 else OPTIONS[::-1]:
                started = time.perf_counter()
                for feed in feeds:
                    sessions[name].run(None, feed)
                times[name].append(time.perf_counter() - started)
        base = statistics.median(times[OPTIONS[0]])
        results[workload] = {name: {"p50_ms_per_20_pairs": round(statistics.median(t) * 1000, 1),
                                    "speed_up": round(base / statistics.median(t), 3),
                                    "largest_logit_difference": largest[name]} for name, t in times.items()}
    emit(results, args.json)


if __name__ == "__main__":
    main()
