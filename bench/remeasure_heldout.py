"""Measure a bundle on the recipe's held-out test queries, per domain, the way `crag recipe` does, and (with
``--card``) render its model card from those reports.

For a bundle changed after the recipe ran (recalibrated with `crag calibrate`, re-fused): the recipe's own
figures then describe the bundle it wrote, not this one. Run:
  python bench/remeasure_heldout.py --model /tmp/default-recal --work runs/v3 --card \
      --json bench/results_default_v3_heldout_recal.json
The held-out file is ``<work>/heldout.jsonl`` (written by the recipe; never used for training, fusion or
calibration); ``web_novel`` (NovelEval, too small for a test split) is measured on its fusion pairs, as the
README's table says.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="bundle name or directory")
    parser.add_argument("--work", type=Path, default=Path("runs/v3"), help="the recipe's work directory")
    parser.add_argument("--card", action="store_true", help="render MODEL_CARD.md of --model from the reports")
    parser.add_argument("--json", type=Path, help="write the per-domain reports here")
    args = parser.parse_args()

    from training.baseline import biencoder_auroc
    from training.evaluate import evaluate_bundle
    from training.model_card import write_model_card
    from training.recipe import domain_sets

    sets = {f"test:{d}": pairs for d, pairs in domain_sets(args.work / "heldout.jsonl").items()}
    novel = domain_sets(args.work / "fuse.jsonl").get("web_novel")
    if novel is not None:
        sets["fusion data:web_novel"] = novel
    reports = {}
    for name, pairs in sets.items():
        report = evaluate_bundle(args.model, pairs)
        report["biencoder_auroc"] = biencoder_auroc(pairs.pairs)
        for heavy in ("reliability", "tradeoff", "model"):
            report.pop(heavy, None)
        reports[name] = report
        print(f"{name:32s} AUROC {report['auroc']:.3f} (bi-encoder {report['biencoder_auroc']:.3f})  auto error "
              f"{report['auto_error_rate']:.1%}  escalated {report['escalation_rate']:.0%}", flush=True)
    if args.json:
        args.json.write_text(json.dumps({"model": str(args.model), "work": str(args.work), "reports": reports},
                                        indent=2) + "\n", encoding="utf-8")
    if args.card:
        write_model_card(args.model, {k: v for k, v in reports.items() if k.startswith("test:")})


if __name__ == "__main__":
    main()
