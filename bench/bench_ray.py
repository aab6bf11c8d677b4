"""`crag grade-file` locally against the same command on Ray (1 and 2 actors) on this machine.

Writes ``--pairs`` unique (query, text) pairs of 12-20 words (unique, so no cache answers anything), then
grades them: locally (one process, the session pool on every core), and as a Ray Data job on a local
runtime with 1 and with 2 actors of one thread. Reports pairs/s, Ray's overhead against the local command
(the share of time that is not grading), the peak memory of the local process and of each Ray grading
actor (sampled with psutil every 0.5 s), and checks that every output equals the local one.

Run: python bench/bench_ray.py [--pairs 100000] [--json bench/results_ray.json]
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
WORDS = ("grader", "query", "passage", "answer", "relevant", "chunk", "model", "threshold", "calibration",
         "index", "retrieval", "question", "document", "tenant", "service", "latency", "corpus", "sentence",
         "token", "window", "score", "verdict", "band", "escalation", "llm", "river", "mountain", "city",
         "history", "engine", "protein", "cell", "market", "price", "weather", "music", "language")


def write_pairs(path: Path, n: int) -> None:
    rng = random.Random(0)
    with path.open("w", encoding="utf-8") as handle:
        for i in range(n):
            query = " ".join(rng.choice(WORDS) for _ in range(6)) + f" {i}?"
            text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(12, 20))) + f" {i}."
            handle.write(json.dumps({"query": query, "text": text}) + "\n")


class PeakMemory:
    """Peak resident memory of a process tree, split into the root and Ray's grading actors."""

    def __init__(self, pid: int) -> None:
        self.root, self.actors, self._stop = 0, {}, threading.Event()
        self._thread = threading.Thread(target=self._watch, args=(pid,), daemon=True)
        self._thread.start()

    def _watch(self, pid: int) -> None:
        while not self._stop.is_set():
            for proc in psutil.process_iter(["pid", "cmdline", "memory_info"]):
                try:
                    cmd = " ".join(proc.info["cmdline"] or [])
                    rss = proc.info["memory_info"].rss
                except (psutil.Error, TypeError):
                    continue
                if proc.info["pid"] == pid:
                    self.root = max(self.root, rss)
                elif "MapWorker" in cmd and "GradingActor" in cmd:
                    self.actors[proc.info["pid"]] = max(self.actors.get(proc.info["pid"], 0), rss)
            time.sleep(0.5)

    def stop(self) -> dict:
        self._stop.set()
        self._thread.join()
        return {"process_mib": round(self.root / 2**20), "per_actor_mib": sorted(round(v / 2**20)
                                                                                 for v in self.actors.values())}


def run(argv: list[str]) -> tuple[dict, dict, float]:
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "pipeline.cli", *argv], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    memory = PeakMemory(proc.pid)
    out, _ = proc.communicate()
    peak = memory.stop()
    if proc.returncode != 0:
        raise SystemExit(f"crag {' '.join(argv)} failed with {proc.returncode}")
    return json.loads(out), peak, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=100_000)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        pairs = Path(tmp) / "pairs.jsonl"
        write_pairs(pairs, args.pairs)
        rows = {}
        _, peak, wall = run(["grade-file", str(pairs), "--out", str(Path(tmp) / "local.jsonl")])
        rows["local (grade-file, 2 one-thread sessions)"] = {"pairs_per_s": round(args.pairs / wall, 1),
                                                            "wall_s": round(wall, 1), "memory": peak}
        print(json.dumps(rows), flush=True)
        local = (Path(tmp) / "local.jsonl").read_bytes()
        for actors in (1, 2):
            out = Path(tmp) / f"ray{actors}.jsonl"
            _, peak, wall = run(["grade-file", str(pairs), "--out", str(out), "--ray", "--ray-actors",
                                 str(actors)])
            rows[f"ray, {actors} actor(s) of 1 thread"] = {
                "pairs_per_s": round(args.pairs / wall, 1), "wall_s": round(wall, 1), "memory": peak,
                "same_output_as_local": out.read_bytes() == local}
            print(json.dumps(rows), flush=True)
    base = rows["local (grade-file, 2 one-thread sessions)"]["wall_s"]
    for row in rows.values():
        row["wall_vs_local"] = round(row["wall_s"] / base, 2)
    report = {"pairs": args.pairs, "words_per_text": "12-20", "cpus": psutil.cpu_count(), "runs": rows}
    print(json.dumps(report, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
