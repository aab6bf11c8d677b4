"""``crag reference``: a bundle's shift reference remade from the pairs it was calibrated on.

The reference (grader/shift.py) is what the live shift alarm compares against. Bundles written before
references carried design effects treat live chunks as independent, which on real retrieval streams
(chunks of a query together, queries unlike each other) raises false alarms. This writes a new bundle
with the same weights, calibration and thresholds and a reference made from ``data`` with its queries;
labels are not needed. The source bundle is never changed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from grader.shift import make_reference
from models.registry import resolve_bundle
from training.data import PairSet, as_pairs, groups_of, model_decided
from training.model_card import rewrite_reference_section
from training.recalibrate import check_new_bundle_dir, cross_encoder_grader, write_derived_bundle

__all__ = ["refresh_reference"]


def refresh_reference(model: str | Path, data: str | Path | PairSet, out: str | Path, group_by: str | None = None
                      ) -> dict[str, Any]:
    """Write ``out``: ``model`` with a reference made from the pairs of ``data`` (and one per group of
    ``group_by``, a metadata field such as ``domain``); returns what changed."""
    check_new_bundle_dir(resolve_bundle(model), out)  # before scoring: fail fast, overwrite nothing
    pairs = model_decided(as_pairs(data, labelled=False))[0].pairs  # the live window never sees rule-decided ones
    grader = cross_encoder_grader(model)
    logits = grader.score_pairs([(p.query, p.text) for p in pairs]).logits
    reference = make_reference(logits, [len(p.text) for p in pairs], [p.query_id for p in pairs],
                               groups=groups_of(pairs, group_by))
    previous: dict[str, Any] = {}

    def change(manifest: dict[str, Any]) -> None:
        previous.update(manifest.get("reference") or {})
        manifest["reference"] = reference

    # a card rendered here would lose the held-out tables that only `crag recipe` measures: the copied card is
    # kept and only its "Shift reference" section is rendered again, for the new reference
    target = write_derived_bundle(model, out, change, model_card=False)
    rewrite_reference_section(target)
    return {"out": str(target), "pairs": reference["n"], "design_effect": reference["design_effect"],
            "groups": {name: sub["n"] for name, sub in reference.get("groups", {}).items()},
            "previous_design_effect": previous.get("design_effect"), "previous_n": previous.get("n")}
