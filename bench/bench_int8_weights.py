"""Unsigned weights as exported against the signed rewrite made at load time (grader/int8_weights.py), per bundle.

Loads each bundle twice in one process, once with ``CRAG_INT8_WEIGHTS=as-stored`` and once with ``signed``, and
(1) grades the same pairs with both and reports the largest difference of probability (the rewrite is exact, so
it should be 0), (2) times whole grades of N chunks of about 256 tokens and of mixed length (40-250 tokens),
the two loads alternating, every grade computed (no grade cache, texts unique to each repeat and load), and
reports p50 / p95 and the ratio of the p50s. The CPU's int8 flags are recorded: the signed path is exact and
fast on AVX512-VNNI; without it onnxruntime's signed products saturate, and ``auto`` keeps the weights as stored.

Run: python bench/bench_int8_weights.py [--bundle default fast] [--chunks 20] [--repeats 20]
     [--json bench/results_int8_weights.json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_quantization import cpu_flags  # noqa: E402

QUERY = "what does the grader return for a retrieved passage?"
PASSAGE = ("The grader reads the query and the retrieved passage together and returns a calibrated probability "
           "that the passage answers the query, with a verdict and a flag when it is unsure")


def texts(tag: str, count: int, mixed: bool, rng: random.Random) -> list[str]:
    """``count`` chunks of ~256 tokens, or of 40-250 tokens when ``mixed``, each unique to ``tag``."""
    words, out = PASSAGE.split(), []
    for i in range(count):
        size = rng.randint(30, 190) if mixed else 200
        out.append(f"{tag}.{i}. " + " ".join(words[j % len(words)] for j in range(size)))
    return out


def load(bundle: str, choice: str, threads: int):  # -> a grader
    from grader import load_grader

    os.environ["CRAG_INT8_WEIGHTS"] = choice  # read when the bundle's sessions are made
    return load_grader(bundle, threads=threads, cache_pairs=0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", nargs="+", default=["default", "fast"])
    parser.add_argument("--chunks", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    results: dict[str, object] = {"cpu_int8_flags": cpu_flags(), "setup": vars(args) | {"json": str(args.json)}}
    for bundle in args.bundle:
        graders = {choice: load(bundle, choice, args.threads) for choice in ("as-stored", "signed")}
        same = texts(f"same-{bundle}", args.chunks, True, random.Random(0))
        probabilities = {c: [g.probability for g in grader.grade(QUERY, same)] for c, grader in graders.items()}
        entry: dict[str, object] = {"max_probability_difference": max(
            abs(a - b) for a, b in zip(probabilities["as-stored"], probabilities["signed"], strict=True))}
        for kind in ("256_tokens", "mixed"):
            rng = random.Random(1)
            times: dict[str, list[float]] = {c: [] for c in graders}
            for r in range(args.repeats):
                for choice in (list(graders) if r % 2 == 0 else list(reversed(graders))):
                    batch = texts(f"{bundle}-{kind}-{choice}-{r}", args.chunks, kind == "mixed", rng)
                    start = time.perf_counter()
                    graders[choice].grade(QUERY, batch)
                    times[choice].append(1000 * (time.perf_counter() - start))
            summary = {c: {"p50_ms": round(statistics.median(v), 1),
                           "p95_ms": round(sorted(v)[max(0, round(0.95 * len(v)) - 1)], 1)} for c, v in times.items()}
            summary["speed-up_p50"] = round(summary["as-stored"]["p50_ms"] / summary["signed"]["p50_ms"], 2)
            entry[kind] = summary
        results[bundle] = entry
    text = json.dumps(results, indent=2)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")
    sys.stdout.write(text + "\n")


if __name__ == "__main__":
    main()
