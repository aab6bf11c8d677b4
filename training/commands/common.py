"""Helpers shared by the training commands: reading labelled pairs and the threshold-target options."""

from __future__ import annotations

import argparse
from pathlib import Path

from grader.calibration import CALIBRATION_METHODS
from grader.thresholds import check_targets
from models.deps import require
from training.data import PairSet, load_pairs, parse_columns
from training.labels import parse_label_map

__all__ = ["add_pair_format", "add_target", "group_by_of", "guarantee_delta", "pairs_from_args", "require_eval_extra",
           "targets_of"]


def require_eval_extra(*, plots: bool = False) -> None:
    """Fail before any pair is read or scored when what measuring and calibrating needs (scikit-learn and scipy,
    matplotlib for plots: the ``eval`` extra, no torch) is not installed."""
    for module in ("sklearn.metrics", "scipy.stats", *(("matplotlib",) if plots else ())):
        require(module, "eval")


def add_pair_format(p: argparse.ArgumentParser, *, labels: bool = True) -> None:
    """--columns (a file's own field names) and, for labelled pairs, --label-map (its own labels)."""
    p.add_argument("--columns", help="your file's own field names, e.g. 'query=question,text=passage,label=relevance' "
                                     "(fields: query, text, label, query_id, chunk_id, source, metadata)")
    if labels:
        p.add_argument("--label-map",
                       help="labels to verdicts: graded integers ('3=relevant,2=partial,0-1=irrelevant') or a "
                            "dataset's own names ('Good=relevant,Potential=partial,Bad=irrelevant')")


def pairs_from_args(args: argparse.Namespace, path: str | Path, *, labelled: bool = True) -> PairSet:
    """The pairs at ``path``, read with the command's --columns and --label-map."""
    label_map = parse_label_map(getattr(args, "label_map", None)) if labelled else None
    return load_pairs(path, label_map=label_map, labelled=labelled, columns=parse_columns(args.columns))


def group_by_of(args: argparse.Namespace) -> str | None:
    """The --group-by field, or None for 'none' (every pair one group)."""
    return None if args.group_by.lower() == "none" else args.group_by


def add_target(p: argparse.ArgumentParser, default_delta: float | None = None, default_calibration: str = "auto"
               ) -> None:
    group = p.add_mutually_exclusive_group()
    group.add_argument("--target-error", type=float, default=None,
                       help="max error rate on auto-decided pairs (default 0.05)")
    group.add_argument("--target-escalation", type=float, default=None, help="max share escalated to the LLM")
    p.add_argument("--delta", type=float, default=default_delta,
                   help="with --target-error: hold the error bound with probability >= 1-delta (Learn-then-Test)")
    p.add_argument("--calibration", default=default_calibration, choices=list(CALIBRATION_METHODS))


def targets_of(args: argparse.Namespace) -> tuple[float | None, float | None]:
    """(target error, target escalation) of --target-error / --target-escalation (error 0.05 when neither is
    given), refused by name when out of range, as is --delta."""
    check_targets(max_error=args.target_error, max_escalation=args.target_escalation, delta=args.delta)
    if args.target_escalation is not None:
        return None, args.target_escalation
    return (0.05 if args.target_error is None else args.target_error), None


def guarantee_delta(args: argparse.Namespace, target_escalation: float | None) -> float | None:
    """The Learn-then-Test delta, or None when the user asked for point estimates or an escalation target."""
    return None if args.no_guarantee or target_escalation is not None else args.delta
