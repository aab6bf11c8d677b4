"""What leaving onnxruntime's SkipLayerNormalization fusion off does to grades: the shipped bundles scored on the
recipe's held-out pairs with the fusion on and off (everything else as ``CRAG_ONNX_REWRITES=auto`` loads it), per
domain: AUROC both ways, mean and largest change of probability, verdicts changed.

The two ways compute the same function and round differently (see grader/load_rewrites.py). The held-out file is
the recipe's (``crag recipe`` writes it; ``training.recipe.prepare_default_data`` and ``fusion_splits`` rebuild it
from ../shared/data in seconds, without training).

Run: python bench/bench_skip_layer_norm.py [--bundle default fast] [--heldout runs/v3/heldout.jsonl]
     [--json bench/results_skip_layer_norm.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def scores(bundle: str, fused: bool, sets: dict) -> dict[str, tuple[np.ndarray, list]]:
    """Probabilities and verdicts per domain, from a fresh load (its own embedding cache) with the fusion as asked."""
    from bench.bench_load_rewrites import load
    from grader import load_rewrites
    from grader.embedder import _caches

    _caches.clear()  # vectors computed the other way must not be reused
    grader = load(bundle, dataclasses.replace(load_rewrites.rewrites_in_use(), unfused_skip_layer_norm=not fused))
    out = {}
    for domain, pairs in sets.items():
        probabilities = np.asarray(grader.probabilities(
            grader.score_pairs([(p.query, p.text) for p in pairs.pairs]).logits), dtype=float)
        out[domain] = (probabilities, [grader.policy.verdict(float(x)) for x in probabilities])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", nargs="+", default=["default", "fast"])
    parser.add_argument("--heldout", type=Path, default=Path("runs/v3/heldout.jsonl"))
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    from sklearn.metrics import roc_auc_score

    from training.metrics import binary_labels
    from training.recipe import domain_sets

    sets = domain_sets(args.heldout)
    results: dict[str, dict] = {}
    for bundle in args.bundle:
        on, off = scores(bundle, True, sets), scores(bundle, False, sets)
        for domain, pairs in sets.items():
            labels = binary_labels(pairs.pairs)
            change = np.abs(on[domain][0] - off[domain][0])
            row = {"pairs": len(labels), "auroc_fused": roc_auc_score(labels, on[domain][0]),
                   "auroc_unfused": roc_auc_score(labels, off[domain][0]),
                   "mean_probability_change": float(change.mean()), "max_probability_change": float(change.max()),
                   "verdicts_changed": sum(a != b for a, b in zip(on[domain][1], off[domain][1], strict=True))}
            results[f"{bundle}:{domain}"] = row
            sys.stdout.write(f"{bundle}:{domain} {json.dumps(row)}\n")
    if args.json:
        args.json.write_text(json.dumps({"heldout": str(args.heldout), "results": results}, indent=2) + "\n",
                             encoding="utf-8")


if __name__ == "__main__":
    main()
