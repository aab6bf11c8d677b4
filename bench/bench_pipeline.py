"""In-process latency of a grader-only corrective query over the demo golden set, step by step.

Loads the default grader and the demo index once, then runs every golden question through
``CorrectiveRAG.run`` ``--repeats`` times (grader-only mode: no LLM). Every run starts cold: the grade
and embedding caches are emptied first, so a question never reuses its own earlier grades (a final
warm pass, caches kept, is reported apart). Reports p50/p95, the time spent in each step of the trace
(retrieve, grade, refine, compose, ...), the pairs the model actually scored per question (cache hits
excluded), and each question's outcome and answer, so that a change to the loop can be checked for the
same results at fewer pairs.

``--compare-strip-vectors`` also builds the demo index without stored sentence vectors and runs both,
interleaved question by question, to show what the index's strip vectors save and that every result stays
the same. ``--compare-cross-encoder`` also runs the same bundle with its cross-encoder run even where its
fusion head gives it no weight (what every fused bundle did before 2026-12-04), interleaved the same way.
``--compare-unbounded`` also runs the same bundle with its head's cross-encoder range dropped, so that the
cosine bounds nothing: every chunk and every strip is read by the cross-encoder (what it did before 2026-12-08).

Run: python bench/bench_pipeline.py [--repeats 5] [--threads N] [--model default|fast]
     [--compare-strip-vectors | --compare-cross-encoder | --compare-unbounded] [--json bench/results_pipeline.json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grader.factory import load_grader  # noqa: E402
from pipeline.cli.ask_commands import DEMO_DIR, DEMO_TENANT, demo_index, read_golden  # noqa: E402
from pipeline.corrective.assembly import PipelineSettings, build_rag  # noqa: E402
from pipeline.retrieval.documents import Principal  # noqa: E402
from pipeline.retrieval.index import LocalHybridIndex  # noqa: E402
from pipeline.retrieval.ingest import ingest  # noqa: E402


def clear_caches(grader) -> None:
    """Empty the grader's pair cache and the embedding cache it shares with the index's embedder."""
    grader.cache.clear()
    if grader.fusion_embedder is not None:
        grader.fusion_embedder.cache.clear()


def run_golden(rags: dict[str, tuple[object, object]], golden: list[dict], principal: Principal,
               repeats: int) -> dict:
    """Every question through every variant (name -> (rag, its grader)), interleaved question by question,
    each run cold."""
    runs = {name: {"latencies": defaultdict(list), "steps": defaultdict(list), "pairs": defaultdict(list),
                   "results": {}} for name in rags}
    for _ in range(repeats):
        for item in golden:
            query = item["query"]
            for name, (rag, grader) in rags.items():
                run = runs[name]
                clear_caches(grader)
                before = grader.pairs_scored
                t0 = time.perf_counter()
                result = rag.run(query, principal)
                run["latencies"][query].append(1000 * (time.perf_counter() - t0))
                run["pairs"][query].append(grader.pairs_scored - before)
                per_action: dict[str, float] = defaultdict(float)
                for step in result.trace:
                    per_action[step.action] += step.ms
                for action, ms in per_action.items():
                    run["steps"][action].append(ms)
                run["results"][query] = {"outcome": result.outcome.value, "answer": result.answer,
                                         "sources": [s["chunk_id"] for s in result.sources]}
    return {name: summarise(run) for name, run in runs.items()}


def summarise(run: dict) -> dict:
    latencies, steps, pairs, results = run["latencies"], run["steps"], run["pairs"], run["results"]
    all_ms = [ms for values in latencies.values() for ms in values]
    first_pairs = [values[0] for values in pairs.values()]
    if any(len(set(values)) > 1 for values in pairs.values()):
        raise SystemExit("a cold run scored a different number of pairs than another run of the same question")
    return {
        "p50_ms": statistics.median(all_ms),
        "p95_ms": float(np.percentile(all_ms, 95)),
        "mean_ms": statistics.fmean(all_ms),
        "per_question_p50_ms": {q: statistics.median(v) for q, v in latencies.items()},
        "step_mean_ms": {a: statistics.fmean(v) * len(v) / len(all_ms) for a, v in sorted(steps.items())},
        "pairs_graded_per_question": {"mean": statistics.fmean(first_pairs), "max": max(first_pairs),
                                   "total": sum(first_pairs)},
        "results_fingerprint": hashlib.sha256(json.dumps(results, sort_keys=True).encode()).hexdigest()[:16],
        "results": results,
    }


def index_without_strip_vectors(tmp: Path) -> Path:
    """The demo corpus indexed the way it was before stored sentence vectors (for --compare-strip-vectors)."""
    root = tmp / "demo-index-no-strips"
    ingest(LocalHybridIndex(root), [DEMO_DIR / "corpus"], tenant=DEMO_TENANT)
    return root


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--model", default="default", help="grader bundle (e.g. fast)")
    parser.add_argument("--compare-strip-vectors", action="store_true",
                        help="also run an index without stored sentence vectors, interleaved")
    parser.add_argument("--compare-cross-encoder", action="store_true",
                        help="also run the bundle with its cross-encoder run even when its fusion gives it no weight")
    parser.add_argument("--compare-unbounded", action="store_true",
                        help="also run the bundle without its cross-encoder range (every pair read), interleaved")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    if args.compare_strip_vectors + args.compare_cross_encoder + args.compare_unbounded > 1:
        parser.error("compare one thing at a time")
    grader = load_grader(args.model, threads=args.threads)
    principal = Principal(tenant=DEMO_TENANT)
    golden = read_golden(DEMO_DIR / "golden.jsonl")
    with tempfile.TemporaryDirectory(prefix="crag-bench-") as tmp:
        rags = {"demo index (strip vectors)": (build_rag(LocalHybridIndex.open_existing(demo_index()),
                                                          PipelineSettings(), primary=grader), grader)}
        other_name = None
        if args.compare_strip_vectors:
            other_name = "demo index without strip vectors"
            rags[other_name] = (build_rag(LocalHybridIndex.open_existing(index_without_strip_vectors(Path(tmp))),
                                          PipelineSettings(), primary=grader), grader)
        if args.compare_cross_encoder:
            other_name = "cross-encoder always run"
            forced = load_grader(args.model, threads=args.threads, cross_encoder=True)
            rags[other_name] = (build_rag(LocalHybridIndex.open_existing(demo_index()), PipelineSettings(),
                                          primary=forced), forced)
        if args.compare_unbounded:
            other_name = "cross-encoder range dropped (every pair read)"
            unbounded = load_grader(args.model, threads=args.threads)
            if unbounded.fusion is None or unbounded.fusion.ce_range is None:
                parser.error(f"{args.model} has no cross-encoder range to drop")
            unbounded.fusion = replace(unbounded.fusion, ce_range=None)
            unbounded.settle_floor = None  # nothing settled on the cosine either: every chunk read
            rags[other_name] = (build_rag(LocalHybridIndex.open_existing(demo_index()), PipelineSettings(),
                                          primary=unbounded), unbounded)
        for rag, _ in rags.values():
            rag.run(golden[0]["query"], principal)  # warm-up: sessions, caches of the tokenizer and SQLite
        variants = run_golden(rags, golden, principal, args.repeats)
        main_rag = next(iter(rags.values()))[0]
        warm_ms = []
        for item in golden:  # asked twice in a row, the second time with the caches of the first
            clear_caches(grader)
            main_rag.run(item["query"], principal)
            t0 = time.perf_counter()
            main_rag.run(item["query"], principal)
            warm_ms.append(1000 * (time.perf_counter() - t0))
    main_name, main_report = next(iter(variants.items()))
    report = {"questions": len(golden), "repeats": args.repeats, "index": main_name,
              "grader": grader.describe() | {"policy": None}, **main_report,
              "warm_p50_ms": statistics.median(warm_ms)}
    if other_name is not None:
        other = variants[other_name]
        report["compared_with"] = {
            "variant": other_name,
            **{k: other[k] for k in ("p50_ms", "p95_ms", "mean_ms", "step_mean_ms", "pairs_graded_per_question",
                                     "results_fingerprint")},
            "p50_ratio_other_over_this": other["p50_ms"] / main_report["p50_ms"],
            "same_results": other["results"] == main_report["results"]}
    print(json.dumps({k: v for k, v in report.items() if k not in ("results", "per_question_p50_ms")}, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
