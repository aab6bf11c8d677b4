"""The command line shared by benches that run one experiment per labelled file (domain) with the default grader."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path


def main_over_domains(doc: str, run_domain: Callable[..., dict], *, budgets: list[int], splits: int,
                      max_pairs: int) -> None:
    """Parse --data/--model/--budgets/--splits/--target-error/--delta/--max-pairs/--seed/--json, run
    ``run_domain(grader, path, budgets=, splits=, target=, delta=, max_pairs=, seed=)`` for every file, print
    the report and write it to --json."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--data", nargs="+", required=True, help="labelled pair files, one domain each")
    parser.add_argument("--model", default="default")
    parser.add_argument("--budgets", type=int, nargs="+", default=budgets, help="labels per sample")
    parser.add_argument("--splits", type=int, default=splits)
    parser.add_argument("--target-error", type=float, default=0.05)
    parser.add_argument("--delta", type=float, default=0.1)
    parser.add_argument("--max-pairs", type=int, default=max_pairs, help="pairs scored per domain (whole queries)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    from grader import load_grader

    grader = load_grader(args.model)
    report = {"model": args.model, "target_error": args.target_error, "delta": args.delta,
              "domains": [run_domain(grader, Path(p), budgets=args.budgets, splits=args.splits,
                                     target=args.target_error, delta=args.delta, max_pairs=args.max_pairs,
                                     seed=args.seed) for p in args.data]}
    print(json.dumps(report, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
