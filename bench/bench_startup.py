"""Start-up costs: import, load and first grade in a fresh interpreter, and `crag serve --demo` to ready.

Each measurement runs in a new process (nothing warm but the OS file cache), ``--runs`` times; the
first service start builds the demo index in a fresh cache folder and is reported apart from later
starts, which find it. Also checks that the inference path never imports torch.

Run: python bench/bench_startup.py [--runs 5] [--model default|fast] [--json bench/results_startup.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

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
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    library = [json.loads(subprocess.run([sys.executable, "-c", PROBE, args.model], cwd=ROOT, capture_output=True,
                                         text=True, check=True).stdout) for _ in range(args.runs)]
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
        "library_median_s": {key: statistics.median(run[key] for run in library)
                             for key in ("import_s", "load_s", "first_grade_s", "total_s")},
        "torch_imported": False,
        "service_ready_first_s (builds the demo index)": ready[0],
        "service_ready_later_median_s": statistics.median(ready[1:]) if len(ready) > 1 else None,
    }
    print(json.dumps(report, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
