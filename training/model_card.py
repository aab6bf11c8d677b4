"""The model card of a bundle: data, licences, metrics and intended use, written next to the manifest."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from models.bundle import read_bundle

__all__ = ["write_model_card"]

METRIC_KEYS = ("n", "auroc", "auroc_strict", "accuracy", "macro_f1", "escalation_rate", "auto_error_rate",
               "ece", "brier")


def _fmt(value: Any) -> str:
    if value is None:
        return "n/a"
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def _metrics_table(reports: dict[str, dict[str, Any]]) -> list[str]:
    lines = ["| data set | " + " | ".join(METRIC_KEYS) + " |", "|---" * (len(METRIC_KEYS) + 1) + "|"]
    for name, report in reports.items():
        lines.append(f"| {name} | " + " | ".join(_fmt(report.get(k)) for k in METRIC_KEYS) + " |")
    return lines


def _baseline_lines(root: Path) -> list[str]:
    """The untrained all-MiniLM-L6-v2 cosine baseline on the same held-out sets, when measured."""
    path = root.parent.parent.parent / "bench" / "results_cosine_baseline.json"
    if not path.is_file():
        return [""]
    data = json.loads(path.read_text(encoding="utf-8"))
    rows = ", ".join(f"{name} AUROC {value:.4f}" for name, value in data["auroc"].items())
    return ["", f"Untrained all-MiniLM-L6-v2 cosine baseline on the same sets (bench/cosine_baseline.py): {rows}.", ""]


def write_model_card(bundle_dir: str | Path, reports: dict[str, dict[str, Any]]) -> Path:
    """Write MODEL_CARD.md into the bundle directory (it is not part of the hashed files)."""
    bundle = read_bundle(bundle_dir)
    m = bundle.manifest
    training = m.training
    t = m.thresholds
    validation = m.metrics.get("validation", {})
    lines = [
        f"# Model card: crag-grader `{m.name}`",
        "",
        "A cross-encoder relevance grader for Corrective RAG: it reads (query, chunk) and returns a calibrated",
        "P(chunk is relevant), auto-accepting above `upper`, auto-rejecting below `lower` and flagging the band",
        "between for an LLM grader.",
        "",
        "## Model",
        f"- Base: all-MiniLM-L6-v2 (`{m.base_model}`, 6 layers, 384 hidden, Apache-2.0), fine-tuned as a binary",
        f"  cross-encoder ({training.get('head', 'binary')}), max_length {m.max_length}.",
        f"- Files: {', '.join(sorted(m.model_files.values()))} (dynamic int8, onnxruntime); tokenizer.json.",
        f"- Calibration: {m.calibration.get('method')} fitted on the validation split.",
        f"- Thresholds: lower {t.get('lower', 0):.4f}, upper {t.get('upper', 0):.4f},"
        f" chosen for target {t.get('target')};"
        f" on validation they escalate {t.get('escalation_rate', 0):.1%} with auto-decided error"
        f" {t.get('auto_error_rate', 0):.2%}.",
        f"- Training: {training.get('steps')} steps in {training.get('seconds')} s on this project's 2-core CPU,"
        f" seed {training.get('config', {}).get('seed')};"
        f" best validation AUROC {_fmt(training.get('best_val_auroc'))}.",
        "",
        "## Data and licences",
        "- SQuAD 2.0 dev set (Rajpurkar, Jia & Liang 2018), CC BY-SA 4.0: answerable question + own paragraph as",
        "  relevant; adversarial unanswerable question + the same paragraph as a hard negative (in the training",
        "  split trained towards partial_target, as an on-topic passage that does not answer; irrelevant in",
        "  validation and test); BM25-mined paragraphs of the same split as negatives (margin 0.9). Split by",
        "  article: 10 articles train, 2 validation, 4 held out.",
        "- WikiQA (Yang, Yih & Meek 2015), Microsoft Research Data License: train questions (positives + 3 sampled",
        "  negatives each) for training, the filtered dev set for validation, test held out. WikiQA text is not",
        "  shipped; the weights are trained on it for research use, so check that licence before commercial use.",
        f"- Training pairs: {training.get('train_data', {}).get('pairs')}, validation pairs:"
        f" {training.get('val_data', {}).get('pairs')}.",
        "",
        "## Metrics (measured by `crag recipe`, held-out data)",
        *_metrics_table({"validation (thresholds chosen here)": validation, **reports}),
        "",
        *_baseline_lines(bundle.path),
        "## Intended use and limits",
        "- Grading retrieved English chunks (sentences to ~250 tokens) for question-like queries in a CRAG",
        "  pipeline; longer chunks are read in overlapping windows of max_length (at most 4 by default, the best",
        "  window counts; `Grade.windows`), and text past the last window is flagged `truncated`.",
        "- The thresholds come from Wikipedia QA data. For another domain, recalibrate on 100-200 labelled",
        "  pairs with `crag calibrate`, or fine-tune with `crag train`.",
        "- It judges whether a passage answers the question, not whether the passage is true.",
        "",
        "Reproduce: `crag recipe --data ../shared/data --work runs/default --out models/bundles/default`.",
        "",
    ]
    path = bundle.path / "MODEL_CARD.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path
