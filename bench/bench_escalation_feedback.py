"""Does the escalation rate fall when escalated chunks and their LLM verdicts are fed back into training?

On WikiQA (real Bing queries, human labels), grouped by question:
  round 0: fine-tune from the base with a small human-labelled seed set; calibrate and choose thresholds
           for a target auto-decided error on a labelled calibration split; measure the escalation rate
           (share in the band) and error on a held-out test split;
  escalate: run the cascade over an unlabelled pool; uncertain chunks go to the LLM and are logged;
  round 1: retrain on seed + logged LLM verdicts, recalibrate for the same target, measure again.

The LLM is SIMULATED (bench/oracle_llm.py: gold labels, right with --llm-accuracy), served on loopback
through the real LLM grader and cascade. Run:
  python bench/bench_escalation_feedback.py --data ../shared/data/wikiqa --json bench/escalation_feedback.json
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def _take(groups, ids):
    return [p for qid in ids for p in groups[qid]]


def _measure(bundle, calib, test, target_error):
    from grader.factory import load_grader
    from grader.policy import ThresholdPolicy
    from grader.thresholds import choose_thresholds
    from training.metrics import binary_labels

    grader = load_grader(bundle, backend="torch", threads=2)
    cprobs = grader.probabilities(grader.score_pairs([(p.query, p.text) for p in calib]).logits)
    choice = choose_thresholds(cprobs, binary_labels(calib), max_error=target_error)
    tprobs = grader.probabilities(grader.score_pairs([(p.query, p.text) for p in test]).logits)
    y = binary_labels(test)
    policy = ThresholdPolicy(lower=choice.policy.lower, upper=choice.policy.upper)
    band = (tprobs > policy.lower) & (tprobs < policy.upper)
    wrong = ((tprobs >= policy.upper) & (y == 0)) | ((tprobs <= policy.lower) & (y == 1))
    from sklearn.metrics import roc_auc_score

    return policy, {"test_escalation_rate": float(band.mean()),
                    "test_auto_error_rate": float(wrong[~band].mean()) if (~band).any() else 0.0,
                    "test_auroc": float(roc_auc_score(y, tprobs)), "lower": policy.lower, "upper": policy.upper}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "wikiqa"))
    parser.add_argument("--seed-queries", type=int, default=60)
    parser.add_argument("--pool-queries", type=int, default=400)
    parser.add_argument("--calib-queries", type=int, default=120)
    parser.add_argument("--test-queries", type=int, default=300)
    parser.add_argument("--target-error", type=float, default=0.08)
    parser.add_argument("--llm-accuracy", type=float, default=0.9)
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--json")
    args = parser.parse_args()

    from oracle_llm import OracleLLM

    from grader.cascade import CascadeGrader
    from grader.factory import load_grader
    from grader.llm import LLMConfig, LLMGrader
    from training.convert import wikiqa_pairs
    from training.data import PairSet, group_by_query, load_pairs
    from training.finetune import TrainConfig, train_grader

    groups = group_by_query(wikiqa_pairs(Path(args.data) / "WikiQA-train.tsv"))
    ids = sorted(q for q, g in groups.items() if any(p.positive for p in g))
    random.Random(7).shuffle(ids)
    cut = [args.seed_queries, args.pool_queries, args.calib_queries, args.test_queries]
    seed_ids, pool_ids, calib_ids, test_ids = (ids[sum(cut[:i]):sum(cut[:i + 1])] for i in range(4))
    seed, pool, calib, test = (_take(groups, x) for x in (seed_ids, pool_ids, calib_ids, test_ids))
    work = Path(tempfile.mkdtemp(prefix="crag-feedback-"))
    config = TrainConfig(max_length=128, max_steps=args.steps, batch_size=16, progress=False, eval_every=args.steps,
                         target_error=args.target_error)
    train_grader(PairSet(seed), PairSet(calib), work / "round0", config)
    policy0, round0 = _measure(work / "round0", calib, test, args.target_error)
    print("round 0 (seed labels only):", json.dumps(round0), flush=True)

    oracle = OracleLLM({(p.query, p.text): p.positive for p in pool}, args.llm_accuracy)
    llm = LLMGrader(LLMConfig(model="oracle", base_url=oracle.base_url, mode="json_object", chunks_per_call=4))
    log = work / "escalations.jsonl"
    cascade = CascadeGrader(primary=load_grader(work / "round0", backend="torch"), escalate_to=llm, policy=policy0,
                            escalation_log=log)
    for members in group_by_query(pool).values():
        cascade.grade(members[0].query, [p.text for p in members])
    logged = load_pairs(log).pairs if log.is_file() else []
    print(f"escalated and logged {len(logged)} of {len(pool)} pool pairs ({oracle.calls} LLM calls)", flush=True)

    train_grader(PairSet(seed + logged), PairSet(calib), work / "round1", config)
    _, round1 = _measure(work / "round1", calib, test, args.target_error)
    print("round 1 (seed + LLM-labelled escalations):", json.dumps(round1), flush=True)
    oracle.stop()
    result = {"data": "WikiQA train questions, split by question", "llm": f"SIMULATED, accuracy {args.llm_accuracy}",
              "target_auto_error": args.target_error, "seed_pairs": len(seed), "pool_pairs": len(pool),
              "logged_escalations": len(logged), "round0": round0, "round1": round1}
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
