"""After ``crag train``: is the new grader better than one the user already has (by default the shipped one)?

A grader trained from the base model on a few hundred labels of a new domain can rank that domain worse than
the shipped default, which was trained on more data and fused with the frozen bi-encoder (measured on 120
consumer-health queries: 0.75 against the default's 0.82 AUROC). Training therefore ends by scoring both on
the same validation pairs, so the user sees which to deploy, and what to do instead when it is the old one.
"""

from __future__ import annotations

import logging
import random
from collections import Counter
from pathlib import Path
from typing import Any

from training.data import PairSet
from training.evaluate import evaluate_bundle
from training.splits import group_of

__all__ = ["COMPARE_PAIRS", "compare_on_validation", "whole_queries"]

logger = logging.getLogger(__name__)

#: At most this many validation pairs (whole queries) are scored by both graders, to bound the extra time.
COMPARE_PAIRS = 1000


def compare_on_validation(trained: str | Path, other: str, val: PairSet, *, limit: int = COMPARE_PAIRS,
                          seed: int = 13, started_from: str | None = None) -> dict[str, Any]:
    """AUROC of ``trained`` and ``other`` on the same validation pairs (all of them, or whole queries drawn up
    to ``limit`` pairs), with a warning naming the alternatives when the new grader is not ahead
    (``started_from``: the grader training started from, if any)."""
    pairs = whole_queries(val, limit, seed)
    ours = evaluate_bundle(trained, pairs)["auroc"]
    theirs = evaluate_bundle(other, pairs)["auroc"]
    out = {"model": other, "pairs": len(pairs.pairs), "auroc": theirs, "this_grader_auroc": ours}
    if ours is not None and theirs is not None and ours < theirs:
        out["advice"] = (f"this grader ranks your validation pairs below {other!r} (AUROC {ours:.3f} vs {theirs:.3f}): "
                         f"keep {other!r} and fit its thresholds to your data with `crag calibrate --model {other}` or "
                         f"`crag adapt --model {other}` (100-400 labels), or train on more labelled pairs"
                         + ("" if started_from == other else
                            f" or from {other!r} itself (`crag train --init {other}`: fewer labels go further)"))
        logger.warning("%s", out["advice"])
    return out


def whole_queries(val: PairSet, limit: int, seed: int) -> PairSet:
    """``val`` itself, or queries drawn at random with all their pairs until ``limit`` pairs (at least one query)."""
    if len(val.pairs) <= limit:
        return val
    groups = [group_of(p, "query") for p in val.pairs]
    counts = Counter(groups)
    order = sorted(counts)
    random.Random(seed).shuffle(order)
    keep: set[str] = set()
    size = 0
    for group in order:
        if size + counts[group] > limit and keep:
            continue
        keep.add(group)
        size += counts[group]
    return PairSet([p for p, g in zip(val.pairs, groups, strict=True) if g in keep],
                   path=f"{val.path} ({size} pairs of whole queries)")
