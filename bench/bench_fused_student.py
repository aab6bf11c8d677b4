"""Can one cross-encoder pass carry the fused default's cosine? (the speed half of issues 10 and 14)

The shipped default runs two 6-layer models per chunk: its cross-encoder and the frozen bi-encoder whose
cosine it mixes in, which made grading about twice as slow as the previous default. This experiment
distils the fused default into a single cross-encoder: it starts from the default's own cross-encoder
checkpoint and learns targets that mix the default's calibrated (fused) probability with the label
(``--distill-weight`` of the teacher), on the recipe's training mix, choosing the checkpoint by the mean
per-domain validation AUROC. The student is exported to int8 and compared with the fused default and the
untrained bi-encoder on the recipe's held-out queries, including the consumer-health domain that neither
was trained on; a student without the bi-encoder grades at the cross-encoder's speed.

Run: python bench/bench_fused_student.py --work runs/v3 [--steps 1200] [--json bench/results_fused_student.json]
(`crag recipe --data ../shared/data --work runs/v3` writes the splits and runs/v3/trained.)
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path

from training.data import load_pairs
from training.evaluate import evaluate_bundle
from training.export import export_bundle
from training.finetune import TrainConfig, train_grader
from training.recipe import domain_sets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("runs/v3"))
    parser.add_argument("--teacher", default="default")
    parser.add_argument("--steps", type=int, default=1200, help="steps of 16 pairs (the schedule decays over them)")
    parser.add_argument("--minutes", type=float, default=60, help="time budget, a safety stop")
    parser.add_argument("--distill-weight", type=float, default=0.8)
    parser.add_argument("--learning-rate", type=float, default=2e-5)
    parser.add_argument("--json", type=Path, default=Path("bench/results_fused_student.json"))
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    work = args.work
    trained, exported = work / "trained-fused-student", work / "onnx-fused-student"
    start = time.perf_counter()
    config = TrainConfig(init=str(work / "trained"), teacher=args.teacher, teacher_score="fused",
                         distill_weight=args.distill_weight, learning_rate=args.learning_rate, layer_decay=0.8,
                         max_minutes=args.minutes, max_steps=args.steps, eval_every=250, patience=3,
                         select_by="domain_mean", threshold_groups="domain", name="fused-student",
                         progress=False, max_length=256, batch_size=16)
    result = train_grader(load_pairs(work / "train.jsonl"), load_pairs(work / "val.jsonl"), trained, config)
    export_bundle(trained, exported, int8=True, keep_fp32=True, probe=work / "val.jsonl", max_flip_share=1.0)
    reference = json.loads((work / "reports.json").read_text(encoding="utf-8"))
    domains = {}
    for domain, pairs in domain_sets(work / "heldout.jsonl").items():
        report = evaluate_bundle(exported, pairs)
        shipped = reference.get(f"test:{domain}", {})
        domains[domain] = {"pairs": len(pairs.pairs), "auroc_student": report["auroc"],
                           "auroc_fused_default": shipped.get("auroc"),
                           "auroc_biencoder": shipped.get("biencoder_auroc"),
                           "escalation_student": report["escalation_rate"],
                           "auto_error_student": report["auto_error_rate"]}
    out = {
        "what": __doc__.splitlines()[0],
        "command": f"python bench/bench_fused_student.py --work {work} --steps {args.steps} --minutes {args.minutes} "
                   f"--distill-weight {args.distill_weight} --learning-rate {args.learning_rate}",
        "training": {"steps": result.steps, "seconds": round(result.seconds), "best_val_auroc": result.best_val_auroc,
                     "history": json.loads((trained / "training_history.json").read_text(encoding="utf-8"))
                     if (trained / "training_history.json").is_file() else None},
        "heldout": domains,
        "wall_seconds": round(time.perf_counter() - start),
    }
    args.json.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(domains, indent=2))


if __name__ == "__main__":
    main()
