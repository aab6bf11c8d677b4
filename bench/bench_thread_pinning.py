"""Would pinning each of the session pool's worker threads to its own core make grading faster?

crag's pool runs single-thread onnxruntime sessions on plain threads that the OS may move between cores. Here the
same pool (the default's cross-encoder as crag loads it, two sessions) is driven by two executors that take turns:
plain threads, and threads each pinned to one core (``os.sched_setaffinity`` on the calling thread, Linux). Token
ids are random (speed does not depend on their values): 20 calls of 256 tokens and 20 of 40-250 tokens, one call
per pair as crag grades. Interleaved rounds, order alternating; reported: the medians and plain / pinned.

Run: python bench/bench_thread_pinning.py [--rounds 15] [--json bench/results_thread_pinning.json]
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.output import emit  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    from grader.session_pool import SessionPool

    cores = sorted(os.sched_getaffinity(0))[:2]
    pool = SessionPool(ROOT / "models" / "bundles" / "default" / "model.int8.onnx", len(cores))
    rng = np.random.default_rng(0)

    def feeds(n: int) -> dict[str, np.ndarray]:
        ids = rng.integers(1000, 20000, size=(1, n)).astype(np.int64)
        ids[0, 0], ids[0, -1] = 101, 102
        every = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
        return {k: v for k, v in every.items() if k in pool.input_names}

    workloads = {"256 tokens": [feeds(256) for _ in range(20)],
                 "mixed 40-250 tokens": [feeds(int(n)) for n in rng.integers(40, 250, size=20)]}
    turn = itertools.count()
    executors = {"plain threads": ThreadPoolExecutor(len(cores)),
                 "pinned threads": ThreadPoolExecutor(len(cores), initializer=lambda: os.sched_setaffinity(
                     0, {cores[next(turn) % len(cores)]}))}

    def timed(executor: ThreadPoolExecutor, work: list[dict[str, np.ndarray]]) -> float:
        start = time.perf_counter()
        list(executor.map(pool.run, work))
        return time.perf_counter() - start

    for executor in executors.values():  # warm both
        for work in workloads.values():
            timed(executor, work)
    times: dict[str, dict[str, list[float]]] = {w: {e: [] for e in executors} for w in workloads}
    for r in range(args.rounds):
        order = list(executors) if r % 2 else list(reversed(executors))
        for name in order:
            for workload, work in workloads.items():
                times[workload][name].append(timed(executors[name], work))
    medians = {w: {e: statistics.median(t) for e, t in by.items()} for w, by in times.items()}
    results = {"rounds": args.rounds, "cores": cores, "workloads": {
        w: {**{e: round(m * 1000, 1) for e, m in by.items()},
            "plain / pinned": round(by["plain threads"] / by["pinned threads"], 3)} for w, by in medians.items()}}
    emit(results, args.json)


if __name__ == "__main__":
    main()
