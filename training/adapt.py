"""``crag adapt``: fit a fused bundle to a new domain with a few hundred labels: its head, then its thresholds.

A fused bundle scores ``w_ce * cross-encoder logit + w_cos * bi-encoder cosine + b``. How much each part
should count differs by domain (the cross-encoder is strong where it was trained, the bi-encoder's plain
topical signal travels further). ``adapt`` splits the user's labelled pairs by query, chooses the cosine
share that ranks the *fit* half best, and keeps it only when it also ranks the *held-out* half better than
the shipped head; then it recalibrates as `crag calibrate` does (map on the fit half, thresholds tested on the
held-out half, with the guarantee). Since the held-out labels also chose between the two heads, each head's band
is tested at half of ``delta`` (Bonferroni over the two), so the guarantee holds at ``delta`` whichever was kept.
No weights of the networks change, so the int8 parity
of the bundle still holds, and nothing is written when the target cannot be met.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from grader.fusion import FusionHead, observed_ce_range
from grader.thresholds import check_targets
from models.errors import ConfigError
from training.data import PairSet, as_pairs, model_decided
from training.fusion import COSINE_SHARES, head_for_share
from training.metrics import auroc, binary_labels
from training.recalibrate import (
    check_new_bundle_dir,
    cross_encoder_grader,
    query_split,
    recalibrate,
    write_recalibrated,
)

__all__ = ["MIN_GAIN", "adapt_bundle", "choose_head"]

MIN_GAIN = 0.005  # held-out AUROC a new head must gain to replace the shipped one


def choose_head(ce: np.ndarray, cos: np.ndarray, y: np.ndarray, fit: np.ndarray, embedder: str,
                shipped_range: tuple[float, float] | None = None) -> FusionHead:
    """The head whose cosine share ranks the fit pairs best (scales standardised on the fit pairs). Its
    cross-encoder range spans all the given pairs and the shipped head's (``shipped_range``): a few hundred
    labels of one domain must not narrow what the bundle was fitted on."""
    lo, hi = observed_ce_range(ce)
    ce_range = (lo, hi) if shipped_range is None else (min(lo, shipped_range[0]), max(hi, shipped_range[1]))

    def rank(share: float) -> tuple[float, float]:
        head = head_for_share(share, ce[fit], cos[fit], ce_range=ce_range)
        return auroc(y[fit], head.combine(ce[fit], cos[fit])), -abs(share - 0.5)  # ties: the more balanced mix

    return head_for_share(max(COSINE_SHARES, key=rank), ce[fit], cos[fit], embedder=embedder, ce_range=ce_range)


def adapt_bundle(model: str | Path, data: str | Path | PairSet, out: str | Path, *, label_map: Any = None,
                 target_error: float | None = 0.05, target_escalation: float | None = None,
                 delta: float | None = 0.1, calibration: str = "platt", seed: int = 0,
                 min_gain: float = MIN_GAIN, error_estimate: str = "auto") -> dict[str, Any]:
    """Adapt ``model`` (a fused bundle) to the labelled pairs ``data`` (or a file of them); write the new bundle at
    ``out``.
    A new head is adopted when it ranks the held-out queries better by ``min_gain`` AUROC. ``error_estimate``:
    how a band without a guarantee is chosen (:func:`training.recalibrate.recalibrate`)."""
    check_targets(max_error=target_error, max_escalation=target_escalation, delta=delta)
    grader = cross_encoder_grader(model, cross_encoder=True)  # the mix is refitted: its logits are needed
    if grader.fusion is None:
        raise ConfigError(f"{grader.bundle.path} has no fusion head to adapt; use `crag calibrate` for its "
                          "thresholds (or `crag fuse` first)")
    check_new_bundle_dir(grader.bundle.path, out)  # before the slow scoring
    data, _ = model_decided(as_pairs(data, label_map=label_map))  # the pairs that reach the fused score
    y = binary_labels(data.pairs)
    if len(data.pairs) < 40 or y.min() == y.max():
        raise ConfigError(f"adapting needs at least 40 labelled pairs with both relevant and irrelevant ones; got "
                          f"{len(data.pairs)} pairs, {int(y.sum())} relevant")
    scored = grader.score_pairs([(p.query, p.text) for p in data.pairs])
    if scored.fusion_inputs is None:
        raise ConfigError("the grader did not return its fusion inputs")
    ce, cos = scored.fusion_inputs
    fit, test = query_split(data.pairs, seed)
    if len(set(y[fit].tolist())) < 2 or len(set(y[test].tolist())) < 2:
        raise ConfigError("both halves of the data (split by query) need relevant and irrelevant pairs; label more "
                          "queries")
    shipped = grader.fusion
    candidate = choose_head(ce, cos, y, fit, shipped.embedder, shipped.ce_range)
    held_out = {"shipped_head": auroc(y[test], shipped.combine(ce[test], cos[test])),
                "adapted_head": auroc(y[test], candidate.combine(ce[test], cos[test]))}
    adopted = held_out["adapted_head"] >= held_out["shipped_head"] + min_gain
    head = candidate if adopted else shipped
    # the held-out labels chose between two heads and then test the band: each head's band is tested at delta / 2,
    # so that whichever head they chose, the band holds the target with probability >= 1 - delta (Bonferroni)
    per_head = None if delta is None else delta / 2
    try:
        # the bundle's calibration map belongs to the shipped head's scores: a new head needs a map of its own
        recal = recalibrate(grader, data, target_error=target_error, target_escalation=target_escalation,
                            delta=per_head, method=calibration, seed=seed, logits=head.combine(ce, cos),
                            calibration_map="refit" if adopted else "auto", error_estimate=error_estimate)
    except ConfigError as error:
        if per_head is None or target_error is None:
            raise
        raise ConfigError(f"{error} (adapt tests the band at half of --delta, {per_head:g}: the same held-out "
                          "labels chose the head, so each of the two heads gets half of the allowance)") from error
    if per_head is not None and recal.choice.target.get("delta") is not None:
        recal.choice.target.update(delta=delta, delta_per_head=per_head)
    evidence = {"held_out_auroc": {k: round(v, 4) for k, v in held_out.items()}, "head_adopted": adopted,
                "min_gain": min_gain, "fit_pairs": int(fit.size), "held_out_pairs": int(test.size),
                "shipped_head": shipped.to_dict(), "adapted_head": candidate.to_dict()}
    written = write_recalibrated(model, out, recal, data, fusion=head.to_dict(), adaptation=evidence)
    return {"out": str(written), **evidence, "thresholds": recal.choice.to_dict(),
            "held_out_metrics": recal.measured(),
            "warning": recal.note}
