"""Does `crag train` on a few hundred labels of a new domain beat the shipped default there?

Splits a labelled pairs file by query (seeded): ``--train-queries`` queries to train on, ``--test-queries`` others
to test on; runs `crag train` (from the base model, its own validation split, which also reports the default
on that split) and `crag eval` of the new grader and of the default on the test queries. Run:
  python bench/train_vs_default.py --data ../shared/data/covidfaq/pairs.jsonl --work /tmp/tvd \\
      --json bench/results_train_vs_default.json [--init default]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
from pathlib import Path


def crag(*argv: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "pipeline.cli", *argv], capture_output=True, text=True, check=True)
    return json.loads(done.stdout[done.stdout.index("{"):])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--train-queries", type=int, default=120)
    parser.add_argument("--test-queries", type=int, default=80)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--init", help="crag train --init MODEL (start from a grader, e.g. default)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = [json.loads(line) for line in args.data.read_text(encoding="utf-8").splitlines() if line.strip()]
    queries = sorted({r["query_id"] for r in rows})
    random.Random(args.seed).shuffle(queries)
    train_q = set(queries[: args.train_queries])
    test_q = set(queries[args.train_queries : args.train_queries + args.test_queries])
    args.work.mkdir(parents=True, exist_ok=True)
    files = {"train": args.work / "train.jsonl", "test": args.work / "test.jsonl"}
    for name, keep in (("train", train_q), ("test", test_q)):
        files[name].write_text("".join(json.dumps({k: r[k] for k in ("query", "text", "label", "query_id")}) + "\n"
                                       for r in rows if r["query_id"] in keep), encoding="utf-8")
    out = args.work / "trained"
    trained = crag("train", "--data", str(files["train"]), "--out", str(out), "--no-progress",
                   *(["--init", args.init] if args.init else []))
    report = {"data": str(args.data), "seed": args.seed, "init": args.init, "train_queries": len(train_q),
              "test_queries": len(test_q),
              "train": {k: trained[k] for k in ("steps", "seconds", "best_val_auroc", "compared_with")}, "test": {}}
    for model in (str(out), "default"):
        got = crag("eval", "--model", model, "--data", str(files["test"]))
        report["test"]["trained" if model == str(out) else model] = {
            k: got[k] for k in ("n", "auroc", "escalation_rate", "auto_error_rate")}
        print(model, json.dumps(report["test"]), flush=True)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
