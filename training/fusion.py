"""``crag fuse``: mix a bi-encoder's cosine (the shipped one, or ``--embedder``) into a cross-encoder's score.

The mix is chosen for the worst domain, not the average: for each candidate share of the cosine, every
domain's AUROC gain over the cosine alone (the untrained base model) is measured and the share whose smallest
gain is largest wins (ties: the larger mean gain).
How well that choice carries to an unseen domain is measured by leaving each domain out: choose on the
others, score the one left out. The fused bundle is then calibrated and given thresholds
like any other (:mod:`training.recalibrate`); with a guarantee the mix is chosen on the half of the queries that
fits the calibration map, never on the half that tests the band.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from grader.cross_encoder import CrossEncoderGrader
from grader.embedder import EMBEDDER_DIR, OnnxMiniLMEmbedder
from grader.factory import load_cross_encoder
from grader.fusion import FusionHead, cosines, observed_ce_range
from grader.thresholds import check_targets
from models.bundle import read_bundle, write_manifest
from models.errors import ConfigError, ParityError
from training.data import LabelledPair, PairSet
from training.export import FLIP_SIGNIFICANCE, flip_p_value, parity_report
from training.metrics import auroc
from training.recalibrate import (
    Recalibration,
    check_new_bundle_dir,
    drop_stale_floor,
    query_split,
    without_recalibration_record,
)

__all__ = ["COSINE_SHARES", "FusionChoice", "choose_fusion", "fuse_bundle", "fusion_choosers", "fusion_inputs",
           "head_for_share", "write_fused_bundle"]

logger = logging.getLogger(__name__)

#: Candidate shares of the (standardised) cosine in the fused score; 0 = cross-encoder only, 1 = cosine only.
COSINE_SHARES = tuple(round(x, 2) for x in np.linspace(0.0, 1.0, 21))
MIN_GROUP_PAIRS = 20


@dataclass
class FusionChoice:
    """The chosen head, the per-domain AUROCs behind it and the leave-one-domain-out check."""

    head: FusionHead
    cosine_share: float
    per_group: dict[str, dict[str, float]]
    leave_one_out: dict[str, dict[str, float]]

    def to_dict(self) -> dict[str, Any]:
        return {"cosine_share": self.cosine_share, "head": self.head.to_dict(), "per_group": self.per_group,
                "leave_one_domain_out": self.leave_one_out}


def fusion_inputs(grader: CrossEncoderGrader, pairs: Sequence[LabelledPair],
                  embedder: OnnxMiniLMEmbedder | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(cross-encoder logits, bi-encoder cosines) of labelled pairs, with the shipped int8 bi-encoder."""
    if grader.fusion is not None:
        raise ConfigError(f"bundle {grader.bundle.path} is already fused; fuse the cross-encoder bundle it came from")
    texts = [(p.query, p.text) for p in pairs]
    logits = grader.score_pairs(texts).logits
    embedder = embedder or OnnxMiniLMEmbedder(EMBEDDER_DIR, batch_size=1)  # as the fused grader runs it
    return logits, cosines(embedder, texts, max_windows=grader.max_windows)  # as the fused grader reads them


def head_for_share(share: float, ce_logits: np.ndarray, cosine: np.ndarray, *,
                   embedder: str = "embedder", ce_range: tuple[float, float] | None = None) -> FusionHead:
    """The head giving ``share`` of the standardised score to the cosine (each input standardised on the
    given pairs), as weights on the raw inputs; it keeps the cross-encoder's logits in ``ce_range`` (by default
    the given pairs' range with a margin: :func:`grader.fusion.observed_ce_range`)."""
    mean_ce, sd_ce = float(ce_logits.mean()), float(ce_logits.std()) or 1.0
    mean_cos, sd_cos = float(cosine.mean()), float(cosine.std()) or 1.0
    return FusionHead(weights=((1.0 - share) / sd_ce, share / sd_cos),
                      bias=-((1.0 - share) * mean_ce / sd_ce + share * mean_cos / sd_cos), embedder=embedder,
                      ce_range=ce_range or observed_ce_range(ce_logits))


def _usable_groups(y: np.ndarray, groups: np.ndarray) -> list[str]:
    return [g for g in sorted(set(groups.tolist()))
            if (groups == g).sum() >= MIN_GROUP_PAIRS and 0 < y[groups == g].sum() < (groups == g).sum()]


def _best_share(z_ce: np.ndarray, z_cos: np.ndarray, y: np.ndarray, groups: np.ndarray,
                names: list[str]) -> float:
    """The cosine share whose smallest per-domain AUROC gain over the cosine alone is largest (ties: the larger
    mean gain, then less cosine). Share 1.0 (no cross-encoder) wins when the cross-encoder hurts some domain at
    every share: the promise is never to fall below the base model."""
    masks = {g: groups == g for g in names}
    base = {g: auroc(y[m], z_cos[m]) for g, m in masks.items()}

    def key(share: float) -> tuple[float, float, float]:
        fused = (1.0 - share) * z_ce + share * z_cos
        gains = [auroc(y[m], fused[m]) - base[g] for g, m in masks.items()]
        return min(gains), float(np.mean(gains)), -share

    return max(COSINE_SHARES, key=key)


def choose_fusion(ce_logits: np.ndarray, cosine: np.ndarray, y: np.ndarray, groups: Sequence[str]) -> FusionChoice:
    """The share of the cosine that helps the worst domain most, with the per-domain evidence."""
    g = np.asarray(groups)
    names = _usable_groups(y, g)
    if not names:
        raise ConfigError(f"the fusion is chosen on groups (domains) with {MIN_GROUP_PAIRS}+ pairs of both classes; "
                          f"none of {sorted(set(g.tolist()))[:10]} has that many (more labelled pairs, or a coarser "
                          "--group-by, or --group-by none)")
    z_ce = (ce_logits - ce_logits.mean()) / (float(ce_logits.std()) or 1.0)
    z_cos = (cosine - cosine.mean()) / (float(cosine.std()) or 1.0)
    share = _best_share(z_ce, z_cos, y, g, names)
    head = head_for_share(share, ce_logits, cosine)
    fused = head.combine(ce_logits, cosine)
    per_group = {name: {"pairs": int((g == name).sum()),
                        "auroc_cross_encoder": auroc(y[g == name], ce_logits[g == name]),
                        "auroc_biencoder": auroc(y[g == name], cosine[g == name]),
                        "auroc_fused": auroc(y[g == name], fused[g == name])} for name in names}
    left_out = {}
    for name in names:
        others = [n for n in names if n != name]
        if len(others) < 2:
            continue
        keep = g != name
        held_share = _best_share(z_ce[keep], z_cos[keep], y[keep], g[keep], others)
        held = (1.0 - held_share) * z_ce + held_share * z_cos
        left_out[name] = {"cosine_share": held_share,
                          "auroc_fused": auroc(y[g == name], held[g == name]),
                          "auroc_biencoder": per_group[name]["auroc_biencoder"]}
    return FusionChoice(head=head, cosine_share=share, per_group=per_group, leave_one_out=left_out)


def write_fused_bundle(source: CrossEncoderGrader, out: str | Path, choice: FusionChoice, recal: Recalibration,
                       data: PairSet, *, probe: Sequence[LabelledPair] = (), int8_only: bool = False,
                       max_flip: float = 0.02, embedder_dir: str | Path = EMBEDDER_DIR
                       ) -> tuple[Path, dict[str, Any] | None]:
    """A new verified bundle: the source's files, the bi-encoder (``embedder_dir``: the shipped one unless another
    export is named) under ``embedder/``, the fusion head and the
    calibration and thresholds fitted on the fused logits (``recal``).

    With both fp32 and int8 models, the fused verdicts of the two are compared on ``probe``; ``int8_only``
    ships only the int8 model and then requires that no more than ``max_flip`` of the verdicts flip (a
    binomial test). Returns the new bundle's path and that parity report (None when not measured)."""
    from training.model_card import write_model_card

    src = read_bundle(source.bundle.path)
    out = check_new_bundle_dir(src.path, out)
    staging = out.with_name(out.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(src.path, staging)
    shutil.copytree(embedder_dir, staged_embedder := staging / choice.head.embedder)
    files = sorted(src.manifest.files) + sorted(
        f"{choice.head.embedder}/{p.name}" for p in staged_embedder.iterdir() if p.is_file())
    manifest = src.manifest.model_dump(exclude={"files"})
    manifest["fusion"] = choice.head.to_dict()
    manifest["calibration"] = recal.calibrator.to_dict()
    manifest["thresholds"] = {**recal.choice.to_dict(), "small_sample_note": recal.note}
    manifest["metrics"] = {**manifest["metrics"], "fusion": choice.to_dict(), "recalibration": recal.metrics}
    manifest["training"] = {**without_recalibration_record(manifest["training"]), "fused_on": data.summary()}
    manifest["reference"] = recal.reference
    drop_stale_floor(manifest, out)
    write_manifest(staging, manifest, files)
    variants = src.manifest.model_files
    report = None
    if "fp32" in variants and "int8" in variants and probe:
        report = parity_report(load_cross_encoder(staging, variant="fp32"), load_cross_encoder(staging, variant="int8"),
                               PairSet(list(probe)))
        manifest["parity"] = {**manifest["parity"], "fused_int8": report}
        if int8_only:
            report["flip_p_value"] = flip_p_value(report, max_flip)
            if report["flip_p_value"] < FLIP_SIGNIFICANCE:
                shutil.rmtree(staging, ignore_errors=True)
                raise ParityError(f"the fused int8 model flips {report['verdict_flip_share']:.1%} of the fused fp32 "
                                  f"verdicts on {report['probe_pairs']} pairs, significantly more than allowed "
                                  f"({max_flip:.1%}, --max-flip; p={report['flip_p_value']:.3f}); "
                                  "fuse without --int8-only. Nothing was written.")
            (staging / variants["fp32"]).unlink()
            files.remove(variants["fp32"])
            manifest["model_files"] = {k: v for k, v in variants.items() if k != "fp32"}
        write_manifest(staging, manifest, files)
    elif int8_only:
        shutil.rmtree(staging, ignore_errors=True)
        raise ConfigError(f"--int8-only needs a bundle with both fp32 and int8 models (export with --int8); "
                          f"{src.path} has {sorted(variants)}")
    write_model_card(staging, {})
    staging.replace(out)
    return out, report


def fusion_choosers(pairs: Sequence[LabelledPair], target_error: float | None, delta: float | None,
                    seed: int) -> np.ndarray:
    """Indices of the pairs that choose the mix: all of them, or with a guarantee only the fit half of the split
    by query that `recalibrate` makes with the same seed, so that the half that tests the band chose nothing."""
    if delta is None or target_error is None:
        return np.arange(len(pairs))
    return query_split(pairs, seed)[0]


def fuse_bundle(model: str | Path, data: str | Path | PairSet, out: str | Path, *, label_map: Any = None,
                group_by: str | None = "domain", target_error: float | None = 0.05,
                target_escalation: float | None = None,
                delta: float | None = None, calibration: str = "platt", int8_only: bool = False,
                max_flip: float = 0.02, probe_pairs: int = 1000, seed: int = 0,
                embedder: str | Path | None = None) -> dict[str, Any]:
    """``crag fuse``: choose the fusion on ``data`` (labelled pairs or a file of them), calibrate the fused score,
    write the new bundle. ``embedder``: an exported embedder folder (`crag export-embedder`) whose cosine is fused
    and shipped in the bundle, instead of the shipped embedder (models/embedders/minilm-l6)."""
    from training.data import as_pairs, groups_of, model_decided
    from training.metrics import binary_labels
    from training.recalibrate import cross_encoder_grader, recalibrate

    check_targets(max_error=target_error, max_escalation=target_escalation, delta=delta)
    source = cross_encoder_grader(model)
    check_new_bundle_dir(source.bundle.path, out)  # before the slow scoring, not after
    data, _ = model_decided(as_pairs(data, label_map=label_map))  # pairs that reach the fused score
    groups = groups_of(data.pairs, group_by)
    embedder_dir = Path(embedder) if embedder is not None else EMBEDDER_DIR
    # as the fused grader runs it (one text per call); a folder that is not an export fails here, before scoring
    ce_logits, cosine = fusion_inputs(source, data.pairs, OnnxMiniLMEmbedder(embedder_dir, batch_size=1))
    chooser = fusion_choosers(data.pairs, target_error, delta, seed)
    named = groups or ["all"] * len(data.pairs)
    choice = choose_fusion(ce_logits[chooser], cosine[chooser], binary_labels(data.pairs)[chooser],
                           [named[i] for i in chooser])
    # the cross-encoder's range over all the pairs, so that none of those calibrating the band is clipped
    choice = replace(choice, head=replace(choice.head, ce_range=observed_ce_range(ce_logits)))
    # the fused score is new: the source's map (of its cross-encoder's logits) must never be kept for it
    recal = recalibrate(source, data, target_error=target_error, target_escalation=target_escalation, delta=delta,
                        method=calibration, groups=groups, seed=seed, logits=choice.head.combine(ce_logits, cosine),
                        calibration_map="refit")
    probe = data.pairs[:: max(1, len(data.pairs) // max(1, probe_pairs))]
    written, parity = write_fused_bundle(source, out, choice, recal, data, probe=probe, int8_only=int8_only,
                                         max_flip=max_flip, embedder_dir=embedder_dir)
    notes = [recal.note] if recal.note else []
    if len(choice.per_group) == 1:
        notes.append("the mix was chosen on one domain, the one it will grade: nothing checks how it carries to "
                     "others (pairs of several domains with --group-by give a mix that holds in the worst of "
                     "them); evaluate it on held-out pairs with `crag eval`")
    if not choice.head.uses_cross_encoder:
        notes.append("mixing in the cross-encoder did not lift the worst domain over the cosine alone, so the fused "
                     "bundle gives it no weight and grades by the calibrated cosine; it never runs the cross-encoder "
                     "(`crag adapt` still reads it, to refit the mix on your labels)")
    return {"out": str(written), "cosine_share": choice.cosine_share,
            "chosen_on": f"{len(chooser)} of the {len(data.pairs)} pairs" + (
                " (the fit half of the queries: the other half tests the band)" if len(chooser) < len(data.pairs)
                else ""),
            "per_domain": choice.per_group,
            "leave_one_domain_out": choice.leave_one_out, "thresholds": recal.choice.to_dict(),
            "parity": parity, "warning": "; ".join(notes) or None}
