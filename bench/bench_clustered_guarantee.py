"""Does `crag calibrate`'s guarantee hold when the labelled pairs come several per query?

The guarantee (auto-decided error <= target with probability >= 1 - delta) rests on a binomial test that
counts every labelled pair as an independent draw. Users label the retrieved chunks of their queries, so
pairs come in clusters, and a query the model misreads brings several errors at once. For each labelled file:
every pair of up to ``--max-pairs`` (whole queries) is scored once with the shipped grader; then, for each
label budget and each of ``--splits`` random samples of whole queries, the bundle's calibration map is kept
and the label-free candidate bands are tested on the sampled labels in a fixed sequence, exactly as
`crag calibrate` does below 2,500 labels, counting pairs as independent (before 2026-12-05) and counting
effective pairs by query (`grader.clustered`, now) with three upper confidence levels of the clustered
variance (0.97 ships). Each chosen band's error is then measured on every pair
scored (the best estimate here of its true error on that data); a violation is a band above the target.
The guarantee allows violations in at most delta of the samples.

Run: python bench/bench_clustered_guarantee.py --data ../shared/data/stackfaq/pairs.jsonl \
         ../shared/data/covidfaq/pairs.jsonl [--splits 100] [--json bench/results_clustered_guarantee.json]
"""

from __future__ import annotations

import json
import random
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_learning_curve import _apply, _sample_queries  # noqa: E402
from domain_runs import main_over_domains  # noqa: E402

# (name, cluster the pairs by query?, upper confidence of the clustered variance; None: as shipped,
# grader.clustered.VARIANCE_CONFIDENCE)
VARIANTS = (("pairs independent", False, None), ("pairs by query, variance bound 0.9", True, 0.9),
            ("pairs by query (shipped, 0.97)", True, None), ("pairs by query, variance bound 0.99", True, 0.99))


def _whole_queries(by_query: dict, order: list, budget: int) -> list:
    """Whole queries, in ``order``, until about ``budget`` pairs (as a list, in that order)."""
    chosen = _sample_queries(by_query, order, budget)
    return [q for q in order if q in chosen]


def run_domain(grader, path: Path, *, budgets: list[int], splits: int, target: float, delta: float,
               max_pairs: int, seed: int) -> dict:
    from grader import clustered
    from grader.shift import not_monitored
    from grader.thresholds import fixed_sequence_test, label_free_bands
    from training.data import load_pairs, model_decided
    from training.metrics import binary_labels
    from training.recalibrate import MIN_GUARANTEE_QUERIES

    data, _ = model_decided(load_pairs(path))  # the pairs calibrate tests: rule-decided ones are left out
    by_query = defaultdict(list)
    for i, p in enumerate(data.pairs):
        by_query[p.query_id].append(i)
    queries = sorted(by_query)
    random.Random(seed).shuffle(queries)
    kept = _whole_queries(by_query, queries, max_pairs)
    index = np.array([i for q in kept for i in by_query[q]])
    pairs = [data.pairs[i] for i in index]
    qids = np.array([p.query_id for p in pairs])
    start = time.perf_counter()
    with not_monitored():
        logits = grader.score_pairs([(p.query, p.text) for p in pairs]).logits
    scoring_s = time.perf_counter() - start
    probs, y = grader.calibrator.predict(logits), binary_labels(pairs)
    positions = defaultdict(list)
    for i, q in enumerate(qids):
        positions[q].append(i)
    shipped = clustered.VARIANCE_CONFIDENCE
    rows = []
    for budget in budgets:
        tally = {name: {"feasible": 0, "violations": 0, "errors": [], "escalations": [], "deff": []}
                 for name, _, _ in VARIANTS}
        for s in range(splits):
            order = list(kept)
            random.Random(1000 * budget + s).shuffle(order)
            sampled = _whole_queries(positions, order, budget)
            if len(sampled) < MIN_GUARANTEE_QUERIES:
                continue  # calibrate refuses a guarantee on so few queries
            sample = np.array([i for q in sampled for i in positions[q]])
            bands = label_free_bands(probs[sample], grader.policy.decision)
            for name, by_query, level in VARIANTS:
                clustered.VARIANCE_CONFIDENCE = shipped if level is None else level
                try:
                    choice = fixed_sequence_test(bands, probs[sample], y[sample], target, delta,
                                                 clusters=qids[sample] if by_query else None)
                finally:
                    clustered.VARIANCE_CONFIDENCE = shipped
                if choice is None:
                    continue
                error, escalation = _apply(choice.policy, probs, y)
                t = tally[name]
                t["feasible"] += 1
                t["violations"] += error > target
                t["errors"].append(error)
                t["escalations"].append(escalation)
                t["deff"].append(choice.design_effect or 1.0)
        row = {"labels": budget, "splits": splits}
        for name, t in tally.items():
            row[name] = {"shown_share": round(t["feasible"] / splits, 3),
                         "violation_rate": round(t["violations"] / splits, 3),
                         "true_error_mean": round(float(np.mean(t["errors"])), 4) if t["errors"] else None,
                         "escalation_mean": round(float(np.mean(t["escalations"])), 3) if t["escalations"] else None,
                         "design_effect_median": round(float(np.median(t["deff"])), 2) if t["deff"] else None}
        print(json.dumps({"data": str(path), **row}), flush=True)
        rows.append(row)
    return {"data": str(path), "pairs": len(pairs), "queries": len(kept),
            "pairs_per_query": round(len(pairs) / len(kept), 1), "scoring_s": round(scoring_s, 1), "rows": rows}


def main() -> None:
    main_over_domains(__doc__, run_domain, budgets=[600, 1000, 2000], splits=100, max_pairs=8000)


if __name__ == "__main__":
    main()
