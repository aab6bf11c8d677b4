"""``crag eval`` and ``crag calibrate``: measuring a bundle and refitting its calibration and thresholds."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from grader.calibration import fit_calibrator
from grader.cross_encoder import CrossEncoderGrader
from grader.factory import load_grader
from grader.llm_args import add_llm_arguments, llm_from_args
from grader.thresholds import choose_thresholds
from models.bundle import read_bundle, write_manifest
from models.errors import ConfigError
from models.registry import resolve_bundle
from training.commands.common import add_target, print_json, targets_of
from training.data import PairSet, load_pairs
from training.labels import parse_label_map
from training.metrics import binary_labels, compute_metrics

__all__ = ['register_calibrate', 'register_eval']


def _eval(args: argparse.Namespace) -> int:
    from training.evaluate import evaluate_grader, write_plots, write_report

    data = load_pairs(args.data, label_map=parse_label_map(args.label_map))
    grader = load_grader(args.model, backend=args.backend, threads=args.threads)
    if not isinstance(grader, CrossEncoderGrader):
        raise ConfigError(f"crag eval needs a cross-encoder bundle, got {type(grader).__name__}")
    if args.cascade:
        return _eval_cascade(args, grader, data)
    report = evaluate_grader(grader, data, batch_size=args.batch_size)
    report["data"] = data.summary()
    if args.json:
        write_report(report, args.json)
    if args.plots:
        report["plots"] = [str(p) for p in write_plots(report, args.plots)]
    keys = ("n", "auroc", "auroc_strict", "accuracy", "macro_f1", "escalation_rate", "auto_error_rate",
            "ece", "brier", "latency_ms_per_batch", "plots")
    print_json({k: report.get(k) for k in keys})
    return 0


def _eval_cascade(args: argparse.Namespace, grader: CrossEncoderGrader, data: PairSet) -> int:
    from training.cascade_eval import evaluate_cascade
    from training.evaluate import write_report

    levels = [float(v) for v in args.levels.split(",")]
    simulated = [float(v) for v in args.simulate_accuracy.split(",")] if args.simulate_accuracy else []
    pairs = data.pairs[: args.limit] if args.limit else data.pairs
    report = evaluate_cascade(grader, pairs, llm=llm_from_args(args), levels=levels, simulated_accuracy=simulated)
    report["data"] = data.summary()
    if args.json:
        write_report(report, args.json)
    print_json(report)
    return 0


def register_eval(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("eval", help="evaluate a grader on labelled pairs")
    p.add_argument("--model", default="default")
    p.add_argument("--data", required=True)
    p.add_argument("--label-map")
    p.add_argument("--json", help="write the full report here")
    p.add_argument("--plots", help="path prefix for PNG plots (reliability, error vs escalation)")
    p.add_argument("--backend", default="auto", choices=["onnx", "torch", "auto"])
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--batch-size", type=int, default=None, help="default: the grader's own (int8: 1)")
    p.add_argument("--cascade", action="store_true",
                   help="report the cascade against escalation rate (real LLM via --llm-*, plus simulated LLMs)")
    p.add_argument("--levels", default="0,0.05,0.1,0.2,0.3,0.5", help="escalation rates for --cascade")
    p.add_argument("--simulate-accuracy", default="0.8,0.9,0.95",
                   help="accuracies of simulated LLMs for --cascade ('' for none)")
    p.add_argument("--limit", type=int, default=0, help="use only the first N pairs (bounds real LLM calls)")
    add_llm_arguments(p)
    p.set_defaults(handler=_eval)


def _calibrate(args: argparse.Namespace) -> int:
    source = read_bundle(resolve_bundle(args.model))
    out = Path(args.out)
    if out.resolve() == source.path.resolve():
        raise ConfigError("--out must differ from --model: calibrate writes a new bundle and keeps the original")
    data = load_pairs(args.data, label_map=parse_label_map(args.label_map))
    grader = load_grader(source.path, backend="auto")
    if not isinstance(grader, CrossEncoderGrader):
        raise ConfigError("crag calibrate needs a cross-encoder bundle")
    logits = grader.score_pairs([(p.query, p.text) for p in data.pairs]).logits
    y = binary_labels(data.pairs)
    calibrator = fit_calibrator(args.calibration, logits, y)
    probs = calibrator.predict(logits)
    target_error, target_escalation = targets_of(args)
    choice = choose_thresholds(probs, y, max_error=target_error, max_escalation=target_escalation,
                               delta=args.delta)
    metrics = compute_metrics(data.pairs, probs, choice.policy)
    if out.exists():
        raise ConfigError(f"--out {out} exists; choose a new directory so nothing stored is overwritten")
    shutil.copytree(source.path, out)
    manifest = source.manifest.model_dump(exclude={"files"})
    manifest["calibration"] = calibrator.to_dict()
    manifest["thresholds"] = choice.to_dict()
    manifest["metrics"] = {**manifest["metrics"], "recalibration": metrics}
    manifest["training"] = {**manifest["training"], "recalibrated_on": data.summary()}
    write_manifest(out, manifest, sorted(source.manifest.files))
    print_json({"out": str(out), "calibration": calibrator.method, "thresholds": choice.to_dict()})
    return 0


def register_calibrate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("calibrate", help="refit calibration and thresholds of a bundle on your labelled pairs")
    p.add_argument("--model", default="default")
    p.add_argument("--data", required=True)
    p.add_argument("--label-map")
    p.add_argument("--out", required=True, help="new bundle directory (the source bundle is not changed)")
    add_target(p)
    p.set_defaults(handler=_calibrate)

