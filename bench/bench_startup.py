"""Start-up costs: import, load and first grade in a fresh interpreter, and `crag serve --demo` to ready.

Each measurement runs in a new process (nothing warm but the OS file cache), ``--runs`` times; the
first service start builds the demo index in a fresh cache folder and is reported apart from later
starts, which find it. Also checks that the inference path never imports torch. ``--baseline DIR`` (another
checkout, e.g. a ``git worktree`` of an earlier commit) times the library in that tree too, the two taking turns
process by process, so that a noisy machine slows both alike.

Run: python bench/bench_startup.py [--runs 5] [--model default|fast] [--baseline DIR] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from output import emit  # noqa: E402
from service_harness import Service  # noqa: E402

PROBE = """
import json, sys, time
t0 = time.perf_counter()
from grader import load_grader
t1 = time.perf_counter()
grader = load_grader(sys.argv[1])
t2 = time.perf_counter()
grader.grade("What is the capital of France?", ["Paris is the capital and largest city of France."])
t3 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "load_s": t2 - t1, "first_grade_s": t3 - t2, "total_s": t3 - t0,
                  "torch_imported": "torch" in sys.modules}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--model", default="default", help="grader bundle (e.g. fast)")
    parser.add_argument("--baseline", type=Path, default=None, help="another checkout to time the library in too")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    trees = {"this tree": ROOT, **({"baseline": args.baseline.resolve()} if args.baseline else {})}
    runs: dict[str, list[dict]] = {name: [] for name in trees}
    for turn in range(args.runs):
        for name, tree in (list(trees.items()) if turn % 2 == 0 else list(reversed(trees.items()))):
            runs[name].append(_probe(tree, args.model))
    library = runs["this tree"]
    if any(run["torch_imported"] for run in library):
        raise SystemExit("the inference path imported torch")
    with tempfile.TemporaryDirectory() as tmp:
        ready = []
        for _ in range(args.runs):
            service = Service(Path(tmp), "--model", args.model)
            ready.append(service.ready_seconds)
            service.stop()
    report = {
        "model": args.model,
        "library_median_s": _medians(library),
        **({"baseline": str(args.baseline), "baseline_library_median_s": _medians(runs["baseline"])}
           if args.baseline else {}),
        "torch_imported": False,
        "service_ready_first_s (builds the demo index)": ready[0],
        "service_ready_later_median_s": statistics.median(ready[1:]) if len(ready) > 1 else None,
    }
    emit(report, args.json)


def _probe(tree: Path, model: str) -> dict:
    """One fresh interpreter's import, load and first grade, with ``tree``'s code."""
    done = subprocess.run([sys.executable, "-c", PROBE, model], cwd=tree, capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONPATH": str(tree)})
    return json.loads(done.stdout)


def _medians(runs: list[dict]) -> dict[str, float]:
    return {key: statistics.median(run[key] for run in runs) for key in ("import_s", "load_s", "first_grade_s",
                                                                          "total_s")}


if __name__ == "__main__":
    main()
