"""Training-side tools: data loading, splits, hard negatives, fine-tuning, calibration, evaluation, export."""

from training.data import LabelledPair, PairSet, load_pairs, write_pairs
from training.labels import parse_label, parse_label_map

__all__ = ["LabelledPair", "PairSet", "load_pairs", "parse_label", "parse_label_map", "write_pairs"]
