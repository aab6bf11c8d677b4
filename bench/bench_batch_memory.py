"""Peak memory of streaming batch grading (`crag grade-file`) from 10k to 1M pairs.

Each size runs in a fresh process; its resident memory is sampled every 50 ms (psutil) and the peak
is reported with the throughput. Two modes:
- ``model``: the shipped int8 grader end to end (tokenizer, ONNX, calibration, output);
- ``stream``: the same reader, tokenizer, batching, calibration and writer, with the ONNX call replaced
  by a constant-time scorer, so 1M pairs finish in minutes. The model's own memory is fixed once
  loaded, so this isolates what could grow with the file: the streaming path.

Run: python bench/bench_batch_memory.py [--sizes 10000 100000 1000000] [--model-sizes 10000 50000]
     [--json bench/results_batch_memory.json]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]

WORKER = r"""
import sys, json
from pathlib import Path
sys.path.insert(0, {root!r})
import numpy as np
from grader import load_grader
from pipeline.cli.batch_grade import grade_stream

grader = load_grader("default", threads=2)
if {stub!r}:
    grader._logits = lambda batch: np.full(len(batch.index), 0.5)  # constant-time scorer: isolates streaming
with open({out!r}, "w", encoding="utf-8") as handle:
    summary = grade_stream(grader, Path({src!r}), handle, block=256)
print(json.dumps(summary))
"""

_WORD_TEXT = ("the of and to in is was for on that by with as from at which are this be an it his or had not were "
              "their but have normandy france steam engine immune warsaw capital river king century war")
WORDS = tuple(_WORD_TEXT.split())


def write_pairs(path: Path, n: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as handle:
        for i in range(n):
            query = " ".join(rng.choice(WORDS) for _ in range(8)) + "?"
            text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(10, 40)))
            handle.write(json.dumps({"id": i, "query": query, "text": text}) + "\n")


def run(src: Path, stub: bool) -> dict:
    out = src.with_suffix(".out.jsonl")
    code = WORKER.format(root=str(ROOT), stub=stub, out=str(out), src=str(src))
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    peak = 0
    process = psutil.Process(proc.pid)
    samples = []

    def sample() -> None:
        nonlocal peak
        while proc.poll() is None:
            try:
                rss = process.memory_info().rss
            except psutil.Error:
                break
            peak = max(peak, rss)
            samples.append(rss)
            time.sleep(0.05)

    watcher = threading.Thread(target=sample)
    watcher.start()
    stdout, _ = proc.communicate()
    watcher.join()
    summary = json.loads(stdout.strip().splitlines()[-1])
    lines = sum(1 for _ in out.open(encoding="utf-8"))
    out.unlink()
    return {**summary, "output_lines": lines, "peak_rss_mb": round(peak / 2**20, 1),
            "median_rss_mb": round(sorted(samples)[len(samples) // 2] / 2**20, 1) if samples else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--model-sizes", type=int, nargs="+", default=[10_000, 50_000])
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    results = {"stream": [], "model": []}
    with tempfile.TemporaryDirectory() as tmp:
        for mode, sizes in (("stream", args.sizes), ("model", args.model_sizes)):
            for n in sizes:
                src = Path(tmp) / f"pairs_{n}.jsonl"
                if not src.exists():
                    write_pairs(src, n)
                row = {"pairs": n, "input_mb": round(src.stat().st_size / 2**20, 1), **run(src, mode == "stream")}
                results[mode].append(row)
                print(json.dumps({"mode": mode, **row}), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
