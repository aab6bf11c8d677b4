"""Turns (query, chunks) into Grades: backends, calibration, the threshold policy and the factory."""

from grader.calibration import fit_calibrator
from grader.factory import load_grader
from grader.policy import ThresholdPolicy, decide
from grader.protocol import Grader

__all__ = ["Grader", "ThresholdPolicy", "decide", "fit_calibrator", "load_grader"]
