"""When `crag calibrate` refuses a guarantee and says "about N labelled pairs would be needed", does N do it?

For each labelled file: up to ``--max-pairs`` pairs (whole queries) are scored once with the shipped grader.
For each label budget and each of ``--splits`` random samples of whole queries, calibrate (the library call
behind `crag calibrate`, default options, a guarantee) is asked for the target; when it refuses with an
estimate, a fresh sample of about N labels is drawn from the same file and calibrated again, as a user who
followed the advice would (with `--calibration-map keep` when the message says so), and once more with N / 2
labels to see whether the estimate overshoots. Reported per budget: the estimates' median and range and the
share of follow-ups that succeeded.

Run: python bench/bench_labels_needed.py --data ../shared/data/covidfaq/pairs.jsonl [--splits 30]
         [--json bench/results_labels_needed.json]
"""

from __future__ import annotations

import json
import random
import re
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_clustered_guarantee import _whole_queries  # noqa: E402
from domain_runs import main_over_domains  # noqa: E402

ESTIMATE = re.compile(r"about (\d+) labelled pairs")


def _sample(by_query: dict, queries: list, seed: int, budget: int) -> list:
    """The pairs of whole queries, in a shuffled order, until about ``budget``."""
    order = list(queries)
    random.Random(seed).shuffle(order)
    return [p for qid in _whole_queries(by_query, order, budget) for p in by_query[qid]]


def run_domain(grader, path: Path, *, budgets: list[int], splits: int, target: float, delta: float,
               max_pairs: int, seed: int) -> dict:
    from grader.shift import not_monitored
    from models.errors import ConfigError
    from training.data import PairSet, load_pairs
    from training.recalibrate import recalibrate

    by_query = defaultdict(list)
    for p in load_pairs(path).pairs:
        by_query[p.query_id].append(p)
    queries = sorted(by_query)
    random.Random(seed).shuffle(queries)
    pool = _sample(by_query, queries, seed, max_pairs)
    kept = sorted({p.query_id for p in pool})
    with not_monitored():
        logits = grader.score_pairs([(p.query, p.text) for p in pool]).logits
    position = {id(p): i for i, p in enumerate(pool)}

    def calibrate(sample: list, s: int, keep: bool) -> tuple[bool, int | None, bool]:
        """(succeeded, the estimate of a refusal, whether the refusal says to keep the map)"""
        try:
            recalibrate(grader, PairSet(sample), target_error=target, delta=delta, seed=s,
                        logits=logits[[position[id(p)] for p in sample]], calibration_map="keep" if keep else "auto")
            return True, None, False
        except ConfigError as exc:
            found = ESTIMATE.search(str(exc))
            return False, int(found.group(1)) if found else None, "--calibration-map keep" in str(exc)

    rows = []
    for budget in budgets:
        shown, estimates, followed, halved, beyond = 0, [], [], [], 0
        for s in range(splits):
            ok, need, keep = calibrate(_sample(by_query, kept, 1000 * budget + s, budget), s, False)
            shown += ok
            if need is None:
                continue
            estimates.append(need)
            if need > 0.9 * len(pool):
                beyond += 1
                continue
            followed.append(calibrate(_sample(by_query, kept, 7 + 1000 * budget + s, need), s, keep)[0])
            halved.append(calibrate(_sample(by_query, kept, 9 + 1000 * budget + s, need // 2), s, keep)[0])
        row = {"labels": budget, "splits": splits, "shown_share": shown / splits, "refusals_with_estimate":
               len(estimates), "estimate_median": float(np.median(estimates)) if estimates else None,
               "estimate_range": [min(estimates), max(estimates)] if estimates else None,
               "estimates_beyond_the_file": beyond, "followed": len(followed),
               "followed_succeeded": round(float(np.mean(followed)), 3) if followed else None,
               "half_of_estimate_succeeded": round(float(np.mean(halved)), 3) if halved else None}
        print(json.dumps({"data": str(path), **row}), flush=True)
        rows.append(row)
    return {"data": str(path), "pairs": len(pool), "queries": len(kept), "rows": rows}


def main() -> None:
    main_over_domains(__doc__, run_domain, budgets=[200, 400], splits=30, max_pairs=2000)


if __name__ == "__main__":
    main()
