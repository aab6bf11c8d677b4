"""``crag eval``: metrics of a grader bundle on labelled pairs, a JSON report and readable plots."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from grader.cross_encoder import CrossEncoderGrader
from grader.factory import load_cross_encoder
from grader.shift import compare_to_reference
from grader.thresholds import tradeoff_curve
from models.deps import require
from models.errors import ConfigError
from training.data import PairSet, groups_of
from training.metrics import binary_labels, compute_metrics, reliability_bins

__all__ = ["evaluate_bundle", "evaluate_grader", "write_plots", "write_report"]

EVAL_BLOCK = 512  # pairs scored between two progress updates


def evaluate_grader(grader: CrossEncoderGrader, data: PairSet, *, batch_size: int | None = None,
                    group_by: str | None = None) -> dict[str, Any]:
    """Score every pair and compute the report (curves included for plotting).

    ``batch_size`` defaults to the grader's own, so the figures match what the grader does in service. Pairs
    that ``grade`` decides by rule (query echoes, wordless chunks) get what it gives them, probability 0, and
    are counted in ``rule_decided``; the model scores the rest. ``group_by`` (a metadata field such as
    ``domain``) adds ``per_group``: the same metrics for each group's pairs.
    """
    if not isinstance(data, PairSet):
        raise ConfigError(f"data must be a PairSet (training.data.load_pairs(path)), got {type(data).__name__}")
    if not data.pairs:
        raise ConfigError("nothing to evaluate: the data has no labelled pairs")
    groups = groups_of(data.pairs, group_by)  # a misspelt field fails before the scoring
    batch_size = batch_size or grader.batch_size
    all_pairs = [(p.query, p.text) for p in data.pairs]
    block = max(batch_size, EVAL_BLOCK // batch_size * batch_size)  # whole batches, so timings are unchanged
    graded = grader.scores_as_graded(all_pairs, batch_size=batch_size, block=block)
    probs, ruled, logits = graded.probabilities, graded.ruled, graded.scored.logits
    pairs = [pair for pair, r in zip(all_pairs, ruled, strict=True) if not r]
    report = compute_metrics(data.pairs, probs, grader.policy, graded.scored.batch_seconds, graded.withheld)
    y = binary_labels(data.pairs)
    report["rule_decided"] = int(ruled.sum())
    report["withheld_swapped_opposites"] = int(graded.withheld.sum())
    report["truncated_share"] = float(graded.truncated.sum() / len(all_pairs))
    reference = grader.bundle.manifest.reference
    lengths = [len(text) for _, text in pairs]
    report["shift"] = (compare_to_reference(reference, logits, lengths).to_dict() if reference and pairs
                       else {"shifted": None, "message": "the bundle has no shift reference" if not reference
                             else "every pair was decided by rule"})
    report["batch_size"] = batch_size
    report["model"] = grader.describe()
    if groups is not None:
        report["per_group"] = {}
        for name in sorted(set(groups)):
            rows = [i for i, g in enumerate(groups) if g == name]
            part = compute_metrics([data.pairs[i] for i in rows], probs[rows], grader.policy,
                                   withheld=graded.withheld[rows])
            part.pop("thresholds")
            report["per_group"][name or "(none)"] = part
    report["reliability"] = reliability_bins(probs, y)
    report["tradeoff"] = tradeoff_curve(probs, y) if y.min() != y.max() else []
    return report


def evaluate_bundle(model: str | Path, data: PairSet, *, backend: str = "auto", **options: Any) -> dict[str, Any]:
    """Load a bundle (name or path) and evaluate it."""
    return evaluate_grader(load_cross_encoder(model, backend=backend, **options), data)


def write_plots(report: dict[str, Any], prefix: str | Path) -> list[Path]:
    """Reliability diagram and auto-decided error against escalation rate, as PNG files."""
    matplotlib = require("matplotlib", "eval")
    matplotlib.use("Agg")
    plt = require("matplotlib.pyplot", "eval")
    prefix = Path(prefix)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    written = []
    fig, ax = plt.subplots(figsize=(5, 5))
    bins = report["reliability"]
    ax.plot([0, 1], [0, 1], "--", color="grey", label="perfect calibration")
    ax.plot([b["mean_probability"] for b in bins], [b["positive_rate"] for b in bins], "o-",
            label=f"grader (ECE {report['ece']:.3f})")
    ax.set(xlabel="predicted P(relevant)", ylabel="observed share relevant", title="Reliability diagram",
           xlim=(0, 1), ylim=(0, 1))
    ax.legend(loc="upper left")
    path = prefix.with_name(prefix.name + "_reliability.png")
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    written.append(path)
    if report["tradeoff"]:
        fig, ax = plt.subplots(figsize=(6, 4))
        curve = report["tradeoff"]
        ax.plot([100 * c["escalation_rate"] for c in curve], [100 * c["auto_error_rate"] for c in curve], "o-")
        ax.axvline(100 * report["escalation_rate"], color="red", ls=":", label="bundle thresholds")
        ax.set(xlabel="escalated to LLM (%)", ylabel="error on auto-decided pairs (%)",
               title="Auto-decided error vs escalation rate")
        ax.legend()
        path = prefix.with_name(prefix.name + "_tradeoff.png")
        fig.savefig(path, dpi=110, bbox_inches="tight")
        plt.close(fig)
        written.append(path)
    return written


def write_report(report: dict[str, Any], path: str | Path) -> Path:
    """Write the JSON report (numpy values converted)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2, default=_jsonable) + "\n", encoding="utf-8")
    return path


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
