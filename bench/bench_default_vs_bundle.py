"""Grading latency of the shipped default bundle against another bundle, interleaved in one run.

Each repeat grades the same request (one query, N chunks of about 256 tokens) with both bundles, in
alternating order, so that the noise of a shared machine hits both alike; reports p50 / p95 per bundle
and the ratio of the p50s. Every grade is computed: no grade cache, and texts unique to each repeat and bundle
(the bundles share their embedder file, so a shared text would reach the second from the vector cache).

Run: python bench/bench_default_vs_bundle.py --other /tmp/old/models/bundles/default [--chunks 20] [--repeats 20]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

QUERY = "what does the grader return for a retrieved passage?"
CHUNK = ("The grader reads the query and the retrieved passage together and returns a calibrated probability "
         "that the passage answers the query, with a verdict and a flag when it is unsure. ") * 6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--other", required=True, help="bundle directory to compare with the default")
    parser.add_argument("--chunks", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    from grader import load_grader

    graders = {"default": load_grader("default", threads=args.threads, cache_pairs=0),
               "other": load_grader(args.other, threads=args.threads, cache_pairs=0)}

    def chunks(tag: str) -> list[str]:
        return [f"{tag}.{i}. {CHUNK}" for i in range(args.chunks)]

    for name, grader in graders.items():
        grader.grade(QUERY, chunks(f"warm-{name}")[:2])
    times: dict[str, list[float]] = {name: [] for name in graders}
    for r in range(args.repeats):
        order = list(graders) if r % 2 == 0 else list(reversed(graders))
        for name in order:
            texts = chunks(f"{name}-{r}")
            t0 = time.perf_counter()
            graders[name].grade(QUERY, texts)
            times[name].append(1000 * (time.perf_counter() - t0))
    out = {name: {"p50_ms": round(statistics.median(v), 1),
                  "p95_ms": round(sorted(v)[max(0, round(0.95 * len(v)) - 1)], 1)} for name, v in times.items()}
    out["ratio_default_over_other_p50"] = round(out["default"]["p50_ms"] / out["other"]["p50_ms"], 3)
    out["setup"] = {"chunks": args.chunks, "repeats": args.repeats, "threads": args.threads, "other": args.other}
    text = json.dumps(out, indent=2)
    if args.json:
        Path(args.json).write_text(text + "\n", encoding="utf-8")
    sys.stdout.write(text + "\n")


if __name__ == "__main__":
    main()
