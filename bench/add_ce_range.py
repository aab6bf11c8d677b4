"""Give a fused bundle made before 2026-12-08 the cross-encoder range that `crag fuse` now records.

`crag fuse` keeps the fusion data's range of cross-encoder logits, widened by a tenth of its span at each end,
in the head (``ce_range``, :mod:`grader.fusion`); with it the cosine alone tells which pairs cannot reach a
probability, and refinement skips their cross-encoder reads. This script scores the fusion data the bundle was
fused on with the bundle itself, exactly as `crag fuse` would (the pairs that reach the model, duplicates
dropped), writes the range into the manifest (new digest) and the model card's fusion line, and checks that no
pair of that data changes its score.

Run: python bench/add_ce_range.py --model models/bundles/default --data runs/v3/fuse.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grader.factory import load_grader  # noqa: E402
from grader.fusion import FusionHead, observed_ce_range  # noqa: E402
from models.bundle import read_bundle, write_manifest  # noqa: E402
from training.data import as_pairs, model_decided  # noqa: E402
from training.model_card import ce_range_sentence  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="a fused bundle folder, rewritten in place")
    parser.add_argument("--data", required=True, help="the labelled pairs it was fused on")
    args = parser.parse_args()
    bundle = read_bundle(args.model)
    if not bundle.manifest.fusion:
        sys.exit(f"{args.model} is not a fused bundle")
    head = FusionHead.from_dict(bundle.manifest.fusion)
    if head.ce_range is not None:
        sys.exit(f"{args.model} already has ce_range {list(head.ce_range)}")
    data, _ = model_decided(as_pairs(args.data))
    grader = load_grader(args.model, cross_encoder=True)
    scored = grader.score_pairs([(p.query, p.text) for p in data.pairs])
    if scored.fusion_inputs is None:
        sys.exit("the grader returned no fusion inputs")
    ce, cos = scored.fusion_inputs
    bounded = replace(head, ce_range=observed_ce_range(ce))
    changed = int(np.sum(bounded.combine(ce, cos) != head.combine(ce, cos)))
    if changed:
        sys.exit(f"{changed} pairs of the fusion data would change their score; not written")
    manifest = bundle.manifest.model_dump()
    manifest["fusion"] = bounded.to_dict()
    files = list(manifest.pop("files"))
    write_manifest(bundle.path, manifest, files)
    card = bundle.path / "MODEL_CARD.md"
    if card.is_file():
        lines = card.read_text(encoding="utf-8").splitlines()
        at = next((i for i, line in enumerate(lines) if line.startswith("score = ")), None)
        if at is not None and "is kept in [" not in lines[at]:
            lines[at] += ce_range_sentence(bounded)
            card.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(json.dumps({"model": str(bundle.path), "pairs": len(data.pairs), "ce_min": float(ce.min()),
                      "ce_max": float(ce.max()), "ce_range": list(bounded.ce_range or ()),
                      "scores_changed": changed}, indent=2))


if __name__ == "__main__":
    main()
