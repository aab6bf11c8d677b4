"""Training-side CLI commands, registered through the ``crag.commands`` entry points."""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import sys
from pathlib import Path

from grader.calibration import CALIBRATION_METHODS, fit_calibrator
from grader.cross_encoder import CrossEncoderGrader
from grader.factory import load_grader
from grader.llm_args import add_llm_arguments, llm_from_args
from grader.thresholds import choose_thresholds
from models.bundle import read_bundle, write_manifest
from models.errors import ConfigError
from models.registry import resolve_bundle
from training.data import PairSet, load_pairs, write_pairs
from training.labels import parse_label_map
from training.metrics import binary_labels, compute_metrics

__all__ = [
    "register_calibrate",
    "register_convert",
    "register_eval",
    "register_export",
    "register_export_embedder",
    "register_label",
    "register_mine",
    "register_recipe",
    "register_train",
]


def _print(data: object) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def _add_target(p: argparse.ArgumentParser) -> None:
    group = p.add_mutually_exclusive_group()
    group.add_argument("--target-error", type=float, default=None,
                       help="max error rate on auto-decided pairs (default 0.05)")
    group.add_argument("--target-escalation", type=float, default=None, help="max share escalated to the LLM")
    p.add_argument("--delta", type=float, default=None,
                   help="with --target-error: hold the error bound with probability >= 1-delta (Clopper-Pearson)")
    p.add_argument("--calibration", default="auto", choices=list(CALIBRATION_METHODS))


def _targets(args: argparse.Namespace) -> tuple[float | None, float | None]:
    if args.target_escalation is not None:
        return None, args.target_escalation
    return (0.05 if args.target_error is None else args.target_error), None


def _train(args: argparse.Namespace) -> int:
    from training.finetune import TrainConfig, train_grader
    from training.splits import group_split

    label_map = parse_label_map(args.label_map)
    data = load_pairs(args.data, label_map=label_map)
    if args.val:
        train, val = data, load_pairs(args.val, label_map=label_map)
    else:
        tr, va = group_split(data.pairs, test_size=args.val_share, by=args.group_by, seed=args.seed)
        train, val = PairSet(tr, path=data.path), PairSet(va, path=f"{data.path} (held out by {args.group_by})")
    target_error, target_escalation = _targets(args)
    config = TrainConfig(
        base=args.base, max_length=args.max_length, epochs=args.epochs, batch_size=args.batch_size,
        learning_rate=args.lr, seed=args.seed, patience=args.patience, eval_every=args.eval_every,
        max_steps=args.max_steps, threads=args.threads, device=args.device, calibration=args.calibration,
        target_error=target_error, target_escalation=target_escalation, delta=args.delta,
        partial_target=args.partial_target, progress=not args.no_progress, name=Path(args.out).name,
    )
    result = train_grader(train, val, args.out, config)
    _print({"out": str(result.out), "steps": result.steps, "seconds": round(result.seconds, 1),
            "best_val_auroc": result.best_val_auroc, "thresholds": result.thresholds,
            "validation": {k: result.metrics[k] for k in ("auroc", "accuracy", "escalation_rate",
                                                          "auto_error_rate", "ece")},
            "next": f"crag export --model {result.out} --out {result.out}-onnx --int8"})
    return 0


def register_train(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="fine-tune a cross-encoder grader on labelled pairs")
    p.add_argument("--data", required=True, help="labelled pairs (.jsonl, .csv, .tsv)")
    p.add_argument("--val", help="validation pairs; default: a split of --data grouped by --group-by")
    p.add_argument("--label-map", help="graded labels, e.g. '3=relevant,2=partial,0-1=irrelevant'")
    p.add_argument("--base", default="default-base", help="local base model dir (default: all-MiniLM-L6-v2)")
    p.add_argument("--out", required=True, help="output directory (a torch bundle)")
    p.add_argument("--group-by", default="query", choices=["query", "source"])
    p.add_argument("--val-share", type=float, default=0.15)
    p.add_argument("--epochs", type=float, default=1.0)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--max-length", type=int, default=256)
    p.add_argument("--lr", type=float, default=4e-5)
    p.add_argument("--seed", type=int, default=13)
    p.add_argument("--patience", type=int, default=2)
    p.add_argument("--eval-every", type=int, default=0, help="validation every N steps (default: each epoch)")
    p.add_argument("--max-steps", type=int, default=0)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--device", default="cpu")
    p.add_argument("--partial-target", type=float, default=0.75)
    p.add_argument("--no-progress", action="store_true")
    _add_target(p)
    p.set_defaults(handler=_train)


def _export(args: argparse.Namespace) -> int:
    from training.export import export_bundle

    out = export_bundle(args.model, args.out, int8=args.int8 or args.int8_only, keep_fp32=not args.int8_only,
                        probe=args.probe, max_flip_share=args.max_flip)
    bundle = read_bundle(out)
    _print({"out": str(out), "files": sorted(bundle.manifest.files), "parity": bundle.manifest.parity})
    return 0


def register_export(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="export a trained grader to an ONNX bundle (parity-gated)")
    p.add_argument("--model", required=True, help="torch bundle written by crag train")
    p.add_argument("--out", required=True)
    p.add_argument("--int8", action="store_true", help="also write a dynamic int8 model")
    p.add_argument("--int8-only", action="store_true", help="ship only the int8 model")
    p.add_argument("--probe", help="pairs for the parity gate (default: the probe saved at training)")
    p.add_argument("--max-flip", type=float, default=0.02, help="max share of int8 verdict flips")
    p.set_defaults(handler=_export)


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
    _print({k: report.get(k) for k in keys})
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
    _print(report)
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
    target_error, target_escalation = _targets(args)
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
    _print({"out": str(out), "calibration": calibrator.method, "thresholds": choice.to_dict()})
    return 0


def register_calibrate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("calibrate", help="refit calibration and thresholds of a bundle on your labelled pairs")
    p.add_argument("--model", default="default")
    p.add_argument("--data", required=True)
    p.add_argument("--label-map")
    p.add_argument("--out", required=True, help="new bundle directory (the source bundle is not changed)")
    _add_target(p)
    p.set_defaults(handler=_calibrate)


def _convert(args: argparse.Namespace) -> int:
    from training.convert import squad_pairs, wikiqa_pairs

    pairs = squad_pairs(args.input, seed=args.seed) if args.format == "squad" else wikiqa_pairs(args.input)
    count = write_pairs(pairs, args.out)
    _print({"out": args.out, "pairs": count, "summary": PairSet(pairs).summary()})
    return 0


def register_convert(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("convert", help="convert SQuAD v2 JSON or WikiQA TSV to labelled pairs")
    p.add_argument("format", choices=["squad", "wikiqa"])
    p.add_argument("input")
    p.add_argument("--out", required=True)
    p.add_argument("--seed", type=int, default=13)
    p.set_defaults(handler=_convert)


def _mine(args: argparse.Namespace) -> int:
    from training.base_models import resolve_base
    from training.negatives import mine_hard_negatives

    data = load_pairs(args.data, label_map=parse_label_map(args.label_map))
    corpus = None
    if args.corpus:
        corpus = [c.strip() for c in Path(args.corpus).read_text(encoding="utf-8").splitlines() if c.strip()]
    model_dir = str(resolve_base(args.base)) if args.method == "biencoder" else None
    mined = mine_hard_negatives(data.pairs, corpus=corpus, per_query=args.per_query, margin=args.margin,
                                method=args.method, model_dir=model_dir)
    count = write_pairs([*data.pairs, *mined], args.out)
    _print({"out": args.out, "pairs": count, "mined": len(mined)})
    return 0


def register_mine(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("mine", help="add mined hard negatives for queries that only have positives")
    p.add_argument("--data", required=True)
    p.add_argument("--label-map")
    p.add_argument("--corpus", help="text file, one passage per line (default: the texts in --data)")
    p.add_argument("--out", required=True)
    p.add_argument("--per-query", type=int, default=2)
    p.add_argument("--margin", type=float, default=0.9)
    p.add_argument("--method", default="bm25", choices=["bm25", "biencoder"])
    p.add_argument("--base", default="default-base", help="bi-encoder for --method biencoder")
    p.set_defaults(handler=_mine)


def _label(args: argparse.Namespace) -> int:
    from training.labelling import label_with_llm

    llm = llm_from_args(args)
    if llm is None:
        raise ConfigError("crag label needs an LLM: pass --llm-model (and --llm-base-url for a local server)")
    data = load_pairs(args.data, labelled=False)
    result = label_with_llm(llm, data.pairs, progress=not args.no_progress)
    count = write_pairs(result.labelled, args.out)
    _print({"out": args.out, "labelled": count, "failed": len(result.failed),
            "failures": [{"query": p.query, "text": p.text[:80], "reason": why} for p, why in result.failed[:20]],
            "seconds": round(result.seconds, 1), "llm_calls": llm.stats.calls, "cost_usd": llm.stats.cost_usd})
    return 0 if count else 2


def register_label(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("label", help="label unlabelled (query, text) pairs with an LLM, recording its reasons")
    p.add_argument("--data", required=True, help="pairs with query and text (a label column is ignored)")
    p.add_argument("--out", required=True)
    p.add_argument("--no-progress", action="store_true")
    add_llm_arguments(p, required=True)
    p.set_defaults(handler=_label)


def _recipe(args: argparse.Namespace) -> int:
    from training.recipe import RecipeConfig, run_default_recipe

    config = dataclasses.replace(RecipeConfig(), seed=args.seed)
    reports = run_default_recipe(args.data, args.work, args.out, config, progress=not args.no_progress)
    _print({name: {k: r.get(k) for k in ("n", "auroc", "accuracy", "escalation_rate", "auto_error_rate")}
            for name, r in reports.items()})
    return 0


def register_recipe(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("recipe", help="rebuild the shipped default grader from shared/data")
    p.add_argument("--data", default="../shared/data")
    p.add_argument("--work", default="runs/default")
    p.add_argument("--out", default="models/bundles/default")
    p.add_argument("--seed", type=int, default=13)
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(handler=_recipe)


def _export_embedder(args: argparse.Namespace) -> int:
    from training.export_embedder import export_embedder

    manifest = export_embedder(args.out, max_length=args.max_length)
    _print({"out": args.out, "parity": manifest["parity"], "files": manifest["files"]})
    return 0


def register_export_embedder(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export-embedder", help="export all-MiniLM-L6-v2 to the int8 ONNX embedder used for retrieval")
    p.add_argument("--out", required=True, help="e.g. models/embedders/minilm-l6")
    p.add_argument("--max-length", type=int, default=256)
    p.set_defaults(handler=_export_embedder)
