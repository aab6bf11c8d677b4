"""Is the auto-decided error bound (Learn-then-Test, 1 - delta) kept on held-out real data?

Scores a labelled set once with a bundle, then many times splits it by query into a calibration half
and a held-out half, chooses thresholds on the calibration half for max auto-decided error alpha with
confidence 1 - delta, and measures the error and escalation on the held-out half. Reports how often the
held-out error exceeded alpha (should be at most about delta), next to the point-estimate choice.

Run: python bench/bench_guarantee.py --model default --data runs/default/wikiqa_test.jsonl --alpha 0.03
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="default")
    parser.add_argument("--data", required=True)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--delta", type=float, default=0.1)
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--json")
    args = parser.parse_args()

    from grader.factory import load_grader
    from grader.thresholds import choose_thresholds
    from training.data import load_pairs
    from training.metrics import binary_labels

    pairs = load_pairs(args.data).pairs
    grader = load_grader(args.model)
    probs = grader.probabilities(grader.score_pairs([(p.query, p.text) for p in pairs]).logits)
    y = binary_labels(pairs)
    queries = np.array([p.query_id for p in pairs])
    unique = np.unique(queries)
    rng = np.random.default_rng(0)
    rows = {"guarded": [], "point_estimate": []}
    for _ in range(args.trials):
        calib_q = set(rng.choice(unique, size=len(unique) // 2, replace=False).tolist())
        calib = np.array([q in calib_q for q in queries])
        for name, delta in (("guarded", args.delta), ("point_estimate", None)):
            choice = choose_thresholds(probs[calib], y[calib], max_error=args.alpha, delta=delta)
            p, t = probs[~calib], y[~calib]
            accept, reject = p >= choice.policy.upper, p <= choice.policy.lower
            auto = accept | reject
            wrong = (accept & (t == 0)) | (reject & (t == 1))
            rows[name].append((float(wrong[auto].mean()) if auto.any() else 0.0, float(1 - auto.mean())))
    result = {"model": args.model, "data": args.data, "pairs": len(pairs), "alpha": args.alpha, "delta": args.delta,
              "trials": args.trials}
    for name, values in rows.items():
        err = np.array([e for e, _ in values])
        esc = np.array([s for _, s in values])
        result[name] = {"violation_rate": float((err > args.alpha).mean()), "mean_heldout_error": float(err.mean()),
                        "mean_escalation": float(esc.mean())}
        print(f"{name:15s} held-out error > alpha in {result[name]['violation_rate']:.1%} of trials; "
              f"mean error {err.mean():.4f}, mean escalation {esc.mean():.1%}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
