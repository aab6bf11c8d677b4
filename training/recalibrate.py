"""Recalibrating a bundle on a user's labelled pairs so that its error target holds on fresh data of that domain.

The pairs are split by query into a fit part and a test part. The calibration map (Platt by default) is
fitted on the fit part; candidate bands are ordered on the fit part and tested in a fixed sequence on the
test part (Learn-then-Test), so the auto-decided error is at most the target with probability >= 1 - delta.
When no band passes, nothing is written and the error says how many labelled pairs would be needed.
``--suggest`` draws the unlabelled pairs to label: a random sample of the user's data, which is what the test of
the thresholds needs.
"""

from __future__ import annotations

import logging
import random
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from grader.calibration import fit_calibrator
from grader.cross_encoder import CrossEncoderGrader
from grader.factory import load_cross_encoder
from grader.shift import make_reference
from grader.thresholds import (
    ThresholdChoice,
    check_targets,
    choose_thresholds,
    fixed_sequence_test,
    label_free_bands,
    labels_needed_all_tested,
    learn_then_test,
    small_sample_note,
)
from models.bundle import read_bundle, write_manifest
from models.errors import ConfigError
from models.registry import resolve_bundle
from training.data import LabelledPair, PairSet, model_decided
from training.metrics import binary_labels, compute_metrics

__all__ = [
    "LLMLabels",
    "Recalibration",
    "calibrate_command",
    "check_new_bundle_dir",
    "cross_encoder_grader",
    "drop_stale_floor",
    "measure_llm_accuracy",
    "query_split",
    "recalibrate",
    "small_sample_note",
    "suggest_pairs",
    "without_recalibration_record",
    "write_recalibrated",
]

logger = logging.getLogger(__name__)
FIT_SHARE = 0.5
MIN_GUARANTEE_QUERIES = 30
# With a guarantee, below this many labels `auto` keeps the bundle's calibration map and tests on every label:
# measured up to 2,000 labels on two domains, keeping was shown more often and escalated no more than refitting on
# half and testing the other half (bench/bench_learning_curve.py --calibration-map keep|refit, README).
KEEP_MAP_BELOW_PAIRS = 2500
# Without one, below this many labels `auto` chooses the band on the errors the fitted map expects.
CALIBRATED_ESTIMATE_BELOW_PAIRS = 600


@dataclass
class Recalibration:
    """A fitted calibration map and guaranteed (or point-estimate) thresholds, not yet written anywhere."""

    calibrator: Any
    choice: ThresholdChoice
    metrics: dict[str, Any]
    reference: dict[str, Any]
    note: str | None

    def measured(self) -> dict[str, Any]:
        """What the commands report of the metrics: error, escalation and AUROC, and which pairs they are on."""
        return {k: self.metrics.get(k) for k in ("n", "auto_error_rate", "escalation_rate", "auroc", "measured_on")}


def cross_encoder_grader(model: str | Path, *, cross_encoder: bool | None = None) -> CrossEncoderGrader:
    """The bundle's grader; recalibration needs a cross-encoder (raw logits to refit). ``cross_encoder=True``
    runs it even when the bundle's fusion head gives it no weight (to refit the mix)."""
    return load_cross_encoder(resolve_bundle(model), backend="auto", cross_encoder=cross_encoder)


def query_split(pairs: Sequence[LabelledPair], seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the fit and test parts, whole queries on one side only."""
    queries = sorted({p.query_id for p in pairs})
    random.Random(seed).shuffle(queries)
    fit_queries = set(queries[: max(1, round(len(queries) * FIT_SHARE))])
    fit = np.array([i for i, p in enumerate(pairs) if p.query_id in fit_queries], dtype=np.int64)
    test = np.array([i for i, p in enumerate(pairs) if p.query_id not in fit_queries], dtype=np.int64)
    return fit, test


@dataclass(frozen=True)
class LLMLabels:
    """Pairs labelled by an LLM (the cascade's escalation log, or `crag label`) and how often that LLM agrees
    with people on this data. They help fit the calibration map, weighted by ``weight``; they never take part
    in testing the thresholds, so the guarantee rests on human labels only."""

    data: PairSet
    accuracy: float
    measured_on: int | None = None  # pairs labelled by both, None when the accuracy was given

    def __post_init__(self) -> None:
        if not 0.0 <= self.accuracy <= 1.0:
            raise ConfigError(f"the LLM's accuracy must be in [0, 1], got {self.accuracy}")

    @property
    def weight(self) -> float:
        """Weight of one LLM label against one human label: (2 * accuracy - 1)^2, the share of a label's
        information that survives a symmetric error rate of 1 - accuracy (0 for a coin flip, 1 when perfect)."""
        return max(0.0, 2.0 * self.accuracy - 1.0) ** 2

    def to_dict(self) -> dict[str, Any]:
        return {"pairs": len(self.data.pairs), "accuracy": round(self.accuracy, 4), "measured_on": self.measured_on,
                "weight": round(self.weight, 4)}


MIN_AGREEMENT_PAIRS = 30


def measure_llm_accuracy(human: PairSet, llm: PairSet) -> tuple[float, int]:
    """(share of agreeing binary verdicts, pairs compared) over the pairs both label; a clear error when fewer
    than MIN_AGREEMENT_PAIRS overlap, naming the two ways to fix it."""
    human_y = dict(zip(((p.query, p.text) for p in human.pairs), binary_labels(human.pairs).tolist(), strict=True))
    both = [(human_y[(p.query, p.text)], int(y)) for p, y in zip(llm.pairs, binary_labels(llm.pairs), strict=True)
            if (p.query, p.text) in human_y]
    if len(both) < MIN_AGREEMENT_PAIRS:
        raise ConfigError(f"only {len(both)} of the LLM-labelled pairs are also in --data, so the LLM's accuracy "
                          f"cannot be measured (need {MIN_AGREEMENT_PAIRS}); label that many of them by hand and add "
                          "them to --data, or pass --llm-accuracy (for example from `crag eval --cascade`)")
    return sum(a == b for a, b in both) / len(both), len(both)


def _with_llm_labels(grader: CrossEncoderGrader, fit_pairs: Sequence[LabelledPair], fit_logits: np.ndarray,
                     excluded_queries: set[str], human: Sequence[LabelledPair],
                     llm: LLMLabels | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Logits, labels and weights for fitting the map: the human fit pairs (weight 1) plus the LLM pairs not
    already labelled by a person and not of a held-out test query (weight ``llm.weight``; only those are scored)."""
    y = binary_labels(fit_pairs)
    if llm is None or llm.weight == 0.0:
        return fit_logits, y, np.ones(len(fit_pairs)), 0
    seen = {(p.query, p.text) for p in human}
    extra = [p for p in llm.data.pairs if (p.query, p.text) not in seen and p.query_id not in excluded_queries]
    if not extra:
        return fit_logits, y, np.ones(len(fit_pairs)), 0
    extra_logits = grader.score_pairs([(p.query, p.text) for p in extra]).logits
    return (np.concatenate([fit_logits, extra_logits]), np.concatenate([y, binary_labels(extra)]),
            np.concatenate([np.ones(len(fit_pairs)), np.full(len(extra), llm.weight)]), len(extra))


def _infeasible(target_error: float, delta: float, n_pairs: int, need: int | None,
                groups: np.ndarray | None = None, test_pairs: int | None = None,
                kept_map: bool = False, keep_beyond_auto: bool = False) -> ConfigError:
    """The error for a target no band can be shown to hold, saying whether more labels would help.

    ``need`` is estimated on all pairs together: when it is not more than the pairs given, it does not explain
    the failure, and the message says what does (a group, or the test half not confirming the estimate)."""
    if need is None:
        how = ("the model's error on this data stays above the target at every escalation level, so more labels "
               "will not help; raise --target-error or use --target-escalation")
    elif need > n_pairs:
        how = (f"about {need} labelled pairs of this data would be needed (you gave {n_pairs}; estimated from these "
               "labels: a rough guide, not a promise)")
        if kept_map and keep_beyond_auto and need >= KEEP_MAP_BELOW_PAIRS:
            how += (f", tested with the bundle's map kept (`--calibration-map keep`: from {KEEP_MAP_BELOW_PAIRS} "
                    "labels calibrate otherwise fits a new map on half of them and tests only the other half)")
    elif groups is not None and len(set(groups.tolist())) > 1:
        sizes = ", ".join(f"{name} {int((groups == name).sum())}" for name in sorted(set(groups.tolist())))
        how = (f"the target must be shown in each of the {len(set(groups.tolist()))} groups (--group-by), and in at "
               f"least one of them the band decides too few pairs, or too many wrongly, to show it (pairs per "
               f"group: {sizes}); label more pairs of the weakest groups, or calibrate each group on its own")
    elif kept_map:
        how = (f"about {need} labelled pairs would do by the estimate, but testing the band on all {n_pairs} "
               "(the bundle's map kept) did not show it at this confidence; label more pairs, of more queries")
    else:
        half = f" ({test_pairs} pairs; the map was fitted on the rest)" if test_pairs else ""
        how = (f"on all pairs together about {need} labelled pairs would do, but the held-out half{half} did not "
               "confirm it; label more pairs, of more queries")
        if test_pairs:
            how += (", or try testing the band on all the labels with the bundle's own calibration map "
                    "(`crag calibrate --calibration-map keep`)")
    return ConfigError(f"cannot hold auto-decided error <= {target_error:.1%} with probability "
                       f">= {1 - delta:.0%} on these {n_pairs} pairs: {how}. Nothing was written.")


def recalibrate(grader: CrossEncoderGrader, data: PairSet, *, target_error: float | None = 0.05,
                target_escalation: float | None = None, delta: float | None = 0.1, method: str = "platt",
                groups: Sequence[str] | None = None, seed: int = 0,
                logits: np.ndarray | None = None, llm_labels: LLMLabels | None = None,
                calibration_map: str = "auto", error_estimate: str = "auto") -> Recalibration:
    """Fit calibration and thresholds on ``data``; raise ConfigError (writing nothing) when infeasible.

    ``logits`` are the grader's raw scores of ``data`` when the caller already has them. ``llm_labels`` add
    LLM-labelled pairs to the fit of the calibration map only (weighted by the LLM's measured accuracy).

    ``calibration_map``: "refit" fits a new map on half of the labels and tests thresholds on the other half;
    "keep" keeps the bundle's map and tests label-free candidate bands on *all* labels (twice the test data,
    which is what a guarantee from a few hundred labels needs); "auto" keeps it below KEEP_MAP_BELOW_PAIRS labels
    (a rule on the count only, so the guarantee stays valid) unless LLM labels are given to fit a map.

    ``error_estimate`` (no guarantee only): "counted" chooses the band on the labelled errors, "calibrated" on
    the errors the fitted map's probabilities expect (far less optimistic on a few hundred labels); "auto"
    takes "calibrated" below CALIBRATED_ESTIMATE_BELOW_PAIRS labels."""
    check_targets(max_error=target_error, max_escalation=target_escalation, delta=delta)
    if calibration_map not in ("auto", "refit", "keep"):
        raise ConfigError(f"calibration_map must be auto, refit or keep, got {calibration_map!r}")
    if error_estimate not in ("auto", "counted", "calibrated"):
        raise ConfigError(f"error_estimate must be auto, counted or calibrated, got {error_estimate!r}")
    data, kept = model_decided(data)  # echoes etc. are decided by rule in service: they must not move the band
    logits = None if logits is None else np.asarray(logits)[kept]
    groups = None if groups is None else [g for g, k in zip(groups, kept, strict=True) if k]
    pairs = data.pairs
    y = binary_labels(pairs)
    if len(pairs) < 20 or y.min() == y.max():
        ruled = f" (and {int((~kept).sum())} decided by rule: query echoes, no words)" if (~kept).any() else ""
        raise ConfigError(f"calibration needs at least 20 labelled pairs with both relevant and irrelevant ones; "
                          f"got {len(pairs)} pairs the model decides{ruled}, {int(y.sum())} relevant")
    if logits is None:
        logits = grader.score_pairs([(p.query, p.text) for p in pairs]).logits
    g = np.asarray(groups) if groups is not None else None
    n_queries = len({p.query_id for p in pairs})
    if delta is not None and target_error is not None and n_queries < MIN_GUARANTEE_QUERIES:
        raise ConfigError(f"the labelled pairs come from only {n_queries} different queries; a guarantee needs pairs "
                          f"of at least {MIN_GUARANTEE_QUERIES} (pairs of one query are alike and new queries differ, "
                          "so a few queries are not evidence about the next ones): label pairs of more queries "
                          "(`crag calibrate --suggest` spreads them), or pass --no-guarantee. Nothing was written.")
    keep_map = calibration_map == "keep" or (calibration_map == "auto" and len(pairs) < KEEP_MAP_BELOW_PAIRS
                                             and llm_labels is None)
    if delta is not None and target_error is not None and keep_map:
        calibrator = grader.calibrator
        probs = calibrator.predict(logits)
        queries = [p.query_id for p in pairs]
        found = fixed_sequence_test(label_free_bands(probs, grader.policy.decision), probs, y, target_error, delta,
                                    groups=g, clusters=queries)
        if found is None:
            need = labels_needed_all_tested(probs, y, target_error, delta, grader.policy.decision, clusters=queries)
            raise _infeasible(target_error, delta, len(pairs), need, g, kept_map=True,
                              keep_beyond_auto=calibration_map == "auto")
        choice, used = found, 0
        auto_test = round((1.0 - choice.escalation_rate) * len(pairs))
        metrics = {**compute_metrics(pairs, probs, choice.policy), "calibration_map": "kept (all labels tested)",
                   "measured_on": f"all {len(pairs)} labelled pairs, on which the band was tested (the bundle's "
                                  "map kept)"}
    elif delta is not None and target_error is not None:
        fit, test = query_split(pairs, seed)
        if len(set(y[fit].tolist())) < 2 or test.size == 0:
            raise ConfigError("the fit half of the calibration data needs relevant and irrelevant pairs; label more "
                              "pairs or more queries")
        test_queries = {pairs[i].query_id for i in test}
        fx, fy, fw, used = _with_llm_labels(grader, [pairs[i] for i in fit], logits[fit], test_queries, pairs,
                                            llm_labels)
        calibrator = fit_calibrator(method, fx, fy, fw)
        probs = calibrator.predict(logits)
        choice = learn_then_test(probs[fit], y[fit], probs[test], y[test], target_error, delta,
                                 groups=None if g is None else g[test], clusters=[pairs[i].query_id for i in test],
                                 fit_clusters=[pairs[i].query_id for i in fit])
        if not choice.feasible:
            raise _infeasible(target_error, delta, len(pairs), choice.labels_needed, g,
                              test_pairs=None if llm_labels is not None or groups is not None else int(test.size))
        auto_test = round((1.0 - choice.escalation_rate) * test.size)
        evaluated = [pairs[i] for i in test]
        metrics = {**compute_metrics(evaluated, probs[test], choice.policy),
                   "measured_on": f"the held-out half ({test.size} pairs), on which the band was tested; the map "
                                  f"was fitted on the other {fit.size}"}
    else:
        fx, fy, fw, used = _with_llm_labels(grader, pairs, logits, set(), pairs, llm_labels)
        calibrator = fit_calibrator(method, fx, fy, fw)
        probs = calibrator.predict(logits)
        estimated = error_estimate == "calibrated" or (error_estimate == "auto"
                                                       and len(pairs) < CALIBRATED_ESTIMATE_BELOW_PAIRS)
        choice = choose_thresholds(probs, y, max_error=target_error, max_escalation=target_escalation, groups=g,
                                   error_estimate="calibrated" if estimated else "counted")
        auto_test = round((1.0 - choice.escalation_rate) * len(pairs))
        how = ("the band chosen on the errors the map's probabilities expect, " if estimated else
               "the band chosen on the errors counted there, ")
        metrics = {**compute_metrics(pairs, probs, choice.policy),
                   "measured_on": f"the same {len(pairs)} pairs the map and thresholds were fitted on ({how}no "
                                  "guarantee: an optimistic estimate)"}
    note = small_sample_note(auto_test, target_error, delta) if target_error is not None else None
    if note:
        logger.warning("%s", note)
    reference = make_reference(logits, [len(p.text) for p in pairs], [p.query_id for p in pairs], groups=g)
    if llm_labels is not None:
        metrics = {**metrics, "llm_labels": {**llm_labels.to_dict(), "used_in_fit": used}}
    metrics = {**metrics, "rule_decided_left_out": int((~kept).sum())}
    return Recalibration(calibrator=calibrator, choice=choice, metrics=metrics, reference=reference, note=note)


def check_new_bundle_dir(source: str | Path, out: str | Path) -> Path:
    """``out`` must be a new directory, not the source bundle: nothing stored is ever overwritten."""
    out = Path(out)
    if out.resolve() == Path(source).resolve():
        raise ConfigError("--out must differ from --model: calibrate writes a new bundle and keeps the original")
    if out.exists():
        raise ConfigError(f"--out {out} exists; choose a new directory so nothing stored is overwritten")
    return out


def calibrate_command(settings: dict[str, Any]) -> str:
    """The `crag calibrate` command line that ``settings`` (as recorded by :func:`write_recalibrated`) describe."""
    parts = ["crag calibrate", f"--model {settings['model']}", f"--data {settings['data']}"]
    for key, flag in (("columns", "--columns"), ("label_map", "--label-map"), ("group_by", "--group-by"),
                      ("target_error", "--target-error"), ("target_escalation", "--target-escalation"),
                      ("delta", "--delta"), ("calibration", "--calibration"), ("calibration_map", "--calibration-map"),
                      ("error_estimate", "--error-estimate"),
                      ("llm_labels", "--llm-labels"), ("llm_accuracy", "--llm-accuracy")):
        if settings.get(key) is not None:
            value = settings[key]
            parts.append(f"{flag} '{value}'" if key in ("columns", "label_map") else f"{flag} {value}")
    if settings.get("delta") is None and settings.get("target_escalation") is None:
        parts.append("--no-guarantee")
    if settings.get("seed"):
        parts.append(f"--seed {settings['seed']}")
    return " ".join([*parts, "--out <new bundle>"])


RECALIBRATION_RECORD = ("recalibrated_on", "recalibrated_with")


def without_recalibration_record(training: dict[str, Any]) -> dict[str, Any]:
    """A manifest's ``training`` section without what an earlier `crag calibrate` recorded: a new calibration
    (another calibrate, or a fusion, which calibrates from scratch) replaces it."""
    return {k: v for k, v in training.items() if k not in RECALIBRATION_RECORD}


def drop_stale_floor(manifest: dict[str, Any], out: str | Path) -> None:
    """Remove the manifest's answerability floor, a probability of the old calibration that means nothing under
    a new one (logged, with the command that fits it again)."""
    if manifest.get("answerability"):
        logger.warning("the source bundle's answerability floor (P %.3f) was fitted on its old calibration and is "
                       "not carried over; fit it again with `crag answerability --model %s --data <questions with "
                       "and without answers> --out <new bundle>`", manifest["answerability"].get("floor"), out)
    manifest["answerability"] = {}


def write_recalibrated(source_model: str | Path, out: str | Path, result: Recalibration, data: PairSet, *,
                       fusion: dict[str, Any] | None = None, adaptation: dict[str, Any] | None = None,
                       settings: dict[str, Any] | None = None) -> Path:
    """A new verified bundle: the source's files with the new calibration, thresholds and reference (and, from
    `crag adapt`, a refitted fusion head with the evidence for it). ``settings`` (the command's options) are
    recorded so the model card can say how to reproduce the recalibration."""

    def change(manifest: dict[str, Any]) -> None:
        manifest["calibration"] = result.calibrator.to_dict()
        manifest["thresholds"] = {**result.choice.to_dict(), "small_sample_note": result.note}
        manifest["metrics"] = {**manifest["metrics"], "recalibration": result.metrics}
        recorded = {"recalibrated_on": data.summary()}
        if settings is not None:
            recorded["recalibrated_with"] = settings
        manifest["training"] = {**without_recalibration_record(manifest["training"]), **recorded}
        manifest["reference"] = result.reference
        if fusion is not None:
            manifest["fusion"] = fusion
        if adaptation is not None:
            manifest["metrics"]["adaptation"] = adaptation
        drop_stale_floor(manifest, out)

    return write_derived_bundle(source_model, out, change)


def write_derived_bundle(source_model: str | Path, out: str | Path, change: Callable[[dict[str, Any]], None], *,
                         model_card: bool = True) -> Path:
    """A new verified bundle at ``out``: the source's files, its manifest edited by ``change`` (staged, then
    renamed into place; the source is never changed). ``model_card`` regenerates MODEL_CARD.md."""
    from training.model_card import write_model_card

    source = read_bundle(resolve_bundle(source_model))
    out = check_new_bundle_dir(source.path, out)
    staging = out.with_name(out.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(source.path, staging)
    manifest = source.manifest.model_dump(exclude={"files"})
    change(manifest)
    write_manifest(staging, manifest, sorted(source.manifest.files))
    if model_card:
        write_model_card(staging, {})
    staging.replace(out)
    return out


def suggest_pairs(pairs: Sequence[LabelledPair], n: int, seed: int = 0) -> list[LabelledPair]:
    """``n`` pairs to label, drawn uniformly at random (``seed``) from those the model decides.

    The labels test the thresholds (Learn-then-Test counts errors among the auto-decided labelled pairs), so
    they must be a sample of the data the grader will see, not its hardest part: pairs picked near the
    current thresholds made every band look worse than it is, and their escalation said nothing about the
    data's (measured: `python bench/bench_learning_curve.py --sampling near-thresholds suggest`, README).
    Pairs that ``grade`` decides by rule are never suggested: no label of theirs reaches the calibration."""
    if n < 1:
        raise ConfigError(f"--suggest needs a positive number of pairs, got {n}")
    decided = model_decided(PairSet(list(pairs)))[0].pairs
    chosen = sorted(random.Random(seed).sample(range(len(decided)), min(n, len(decided))))
    return [decided[i] for i in chosen]
