"""In-process latency of a grader-only corrective query over the demo golden set, step by step.

Loads the default grader and the demo index once, then runs every golden question through
``CorrectiveRAG.run`` ``--repeats`` times (grader-only mode: no LLM). Every run starts cold: the grade
and embedding caches are emptied first, so a question never reuses its own earlier grades (a final
warm pass, caches kept, is reported apart). Reports p50/p95, the time spent in each step of the trace
(retrieve, grade, refine, compose, ...), the pairs the model actually scored per question (cache hits
excluded), and each question's outcome and answer, so that a change to the loop can be checked for the
same results at fewer pairs.

Run: python bench/bench_pipeline.py [--repeats 5] [--threads N] [--model default|fast]
     [--json bench/results_pipeline.json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grader.factory import load_grader  # noqa: E402
from pipeline.cli.ask_commands import DEMO_DIR, DEMO_TENANT, demo_index, read_golden  # noqa: E402
from pipeline.corrective.assembly import PipelineSettings, build_rag  # noqa: E402
from pipeline.retrieval.documents import Principal  # noqa: E402
from pipeline.retrieval.index import LocalHybridIndex  # noqa: E402


def clear_caches(grader) -> None:
    """Empty the grader's pair cache and the embedding cache it shares with the index's embedder."""
    grader.cache.clear()
    if grader.fusion_embedder is not None:
        grader.fusion_embedder.cache.clear()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--model", default="default", help="grader bundle (e.g. fast)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    grader = load_grader(args.model, threads=args.threads)
    rag = build_rag(LocalHybridIndex.open_existing(demo_index()), PipelineSettings(), primary=grader)
    principal = Principal(tenant=DEMO_TENANT)
    golden = read_golden(DEMO_DIR / "golden.jsonl")
    rag.run(golden[0]["query"], principal)  # warm-up: sessions, caches of the tokenizer and SQLite
    latencies: dict[str, list[float]] = defaultdict(list)
    steps: dict[str, list[float]] = defaultdict(list)
    pairs: dict[str, list[int]] = defaultdict(list)
    results: dict[str, dict] = {}
    for _ in range(args.repeats):
        for item in golden:
            query = item["query"]
            clear_caches(grader)
            before = grader.pairs_scored
            t0 = time.perf_counter()
            result = rag.run(query, principal)
            latencies[query].append(1000 * (time.perf_counter() - t0))
            pairs[query].append(grader.pairs_scored - before)
            per_action: dict[str, float] = defaultdict(float)
            for step in result.trace:
                per_action[step.action] += step.ms
            for action, ms in per_action.items():
                steps[action].append(ms)
            results[query] = {"outcome": result.outcome.value, "answer": result.answer,
                              "sources": [s["chunk_id"] for s in result.sources]}
    warm_ms = []
    for item in golden:  # asked twice in a row, the second time with the caches of the first
        clear_caches(grader)
        rag.run(item["query"], principal)
        t0 = time.perf_counter()
        rag.run(item["query"], principal)
        warm_ms.append(1000 * (time.perf_counter() - t0))
    all_ms = [ms for values in latencies.values() for ms in values]
    first_pairs = [values[0] for values in pairs.values()]
    if any(len(set(values)) > 1 for values in pairs.values()):
        raise SystemExit("a cold run scored a different number of pairs than another run of the same question")
    fingerprint = hashlib.sha256(json.dumps(results, sort_keys=True).encode()).hexdigest()[:16]
    report = {
        "questions": len(golden),
        "repeats": args.repeats,
        "grader": grader.describe() | {"policy": None},
        "p50_ms": statistics.median(all_ms),
        "p95_ms": float(np.percentile(all_ms, 95)),
        "mean_ms": statistics.fmean(all_ms),
        "per_question_p50_ms": {q: statistics.median(v) for q, v in latencies.items()},
        "step_mean_ms": {a: statistics.fmean(v) * len(v) / len(all_ms) for a, v in sorted(steps.items())},
        "pairs_graded_per_question": {"mean": statistics.fmean(first_pairs), "max": max(first_pairs),
                                   "total": sum(first_pairs)},
        "warm_p50_ms": statistics.median(warm_ms),
        "results_fingerprint": fingerprint,
        "results": results,
    }
    print(json.dumps({k: v for k, v in report.items() if k not in ("results", "per_question_p50_ms")}, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
