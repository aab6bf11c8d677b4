"""Helpers shared by the training commands: JSON output and the threshold-target options."""

from __future__ import annotations

import argparse

from grader.calibration import CALIBRATION_METHODS

__all__ = ["add_label_map", "add_target", "guarantee_delta", "targets_of"]


def add_label_map(p: argparse.ArgumentParser) -> None:
    """--label-map: graded integers or a dataset's own label names to verdicts."""
    p.add_argument("--label-map", help="labels to verdicts: graded integers ('3=relevant,2=partial,0-1=irrelevant') "
                                       "or a dataset's own names ('Good=relevant,Potential=partial,Bad=irrelevant')")


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
    if args.target_escalation is not None:
        return None, args.target_escalation
    return (0.05 if args.target_error is None else args.target_error), None



def guarantee_delta(args: argparse.Namespace, target_escalation: float | None) -> float | None:
    """The Learn-then-Test delta, or None when the user asked for point estimates or an escalation target."""
    return None if args.no_guarantee or target_escalation is not None else args.delta
