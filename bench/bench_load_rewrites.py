"""The load-time rewrites of grader/load_rewrites.py, measured per bundle, added one at a time: as exported; NaN
guards dropped; int8 weights signed (on an AVX512-VNNI CPU); the attention mask skipped for unpadded calls; and
onnxruntime's SkipLayerNormalization fusion left off (the last load is what ``auto`` does).

Loads each bundle five ways in one process and (1) grades the same pairs with each and reports the largest
difference of probability from the as-exported load (the rewrites are exact, so it should be 0 until the fusion
is left off, which rounds differently), (2) times whole
grades (cross-encoder and cosine) of N chunks of about 256 tokens and of mixed length (40-250 tokens), the loads
taking turns, every grade computed (no grade cache, texts unique to each repeat, load and bundle), and reports
p50 / p95 and each p50's speed-up over the as-exported load. The CPU's int8 flags are recorded: signed weights are
exact and fast on AVX512-VNNI; without it onnxruntime's signed products saturate, and ``auto`` keeps them unsigned.

Run: python bench/bench_load_rewrites.py [--bundle default fast] [--chunks 20] [--repeats 20]
     [--json bench/results_load_rewrites.json]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_quantization import cpu_flags  # noqa: E402
from bench.output import emit  # noqa: E402

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


def ladder() -> dict[str, object]:
    """Each load's rewrites, adding one at a time (the last is ``auto`` on this CPU)."""
    from grader.load_rewrites import Rewrites, cpu_runs_signed_exactly

    signed = cpu_runs_signed_exactly()  # without AVX512-VNNI signed products saturate: auto leaves weights as they are
    return {"as exported": Rewrites(False, False, False, False),
            "NaN guards dropped": Rewrites(True, False, False, False),
            "+ int8 weights signed": Rewrites(True, signed, False, False),
            "+ attention mask skipped for unpadded calls": Rewrites(True, signed, True, False),
            "+ SkipLayerNormalization fusion off (auto)": Rewrites(True, signed, True, True)}


def load(bundle: str, rewrites, threads: int | None = None):  # -> a grader
    """The bundle loaded with ``rewrites`` in place of ``CRAG_ONNX_REWRITES`` (each session pool reads the setting
    once, when it is made, and makes every variant it loads later the same way)."""
    from grader import load_grader, session_pool

    saved = session_pool.rewrites_in_use
    session_pool.rewrites_in_use = lambda: rewrites
    try:
        return load_grader(bundle, threads=threads, cache_pairs=0)
    finally:
        session_pool.rewrites_in_use = saved


def fresh_grades(grader, chunks: list[str]):
    """Grades computed now: the embedding cache (one per model file, shared by every load of it) emptied first."""
    if grader.fusion_embedder is not None:
        grader.fusion_embedder.cache.clear()
    return grader.grade(QUERY, chunks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", nargs="+", default=["default", "fast"])
    parser.add_argument("--chunks", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    results: dict[str, object] = {"cpu_int8_flags": cpu_flags(), "setup": vars(args) | {"json": str(args.json)}}
    loads = ladder()
    hows = tuple(loads)
    for bundle in args.bundle:
        graders = {how: load(bundle, rewrites, args.threads) for how, rewrites in loads.items()}
        same = texts(f"same-{bundle}", args.chunks, True, random.Random(0))
        probabilities = {how: [g.probability for g in fresh_grades(grader, same)] for how, grader in graders.items()}
        entry: dict[str, object] = {f"max_probability_difference, {how}": max(
            abs(a - b) for a, b in zip(probabilities[hows[0]], probabilities[how], strict=True)) for how in hows[1:]}
        for kind in ("256_tokens", "mixed"):
            rng = random.Random(1)
            times: dict[str, list[float]] = {how: [] for how in graders}
            for r in range(args.repeats):
                for how in hows[r % len(hows):] + hows[:r % len(hows)]:  # each load first in turn
                    batch = texts(f"{bundle}-{kind}-{how}-{r}", args.chunks, kind == "mixed", rng)
                    start = time.perf_counter()
                    graders[how].grade(QUERY, batch)
                    times[how].append(1000 * (time.perf_counter() - start))
            base = statistics.median(times[hows[0]])
            entry[kind] = {how: {"p50_ms": round(statistics.median(v), 1),
                                 "p95_ms": round(sorted(v)[max(0, round(0.95 * len(v)) - 1)], 1),
                                 "speed-up_p50": round(base / statistics.median(v), 2)} for how, v in times.items()}
        results[bundle] = entry
    emit(results, args.json)


if __name__ == "__main__":
    main()
