"""``crag eval`` and ``crag calibrate``: measuring a bundle and refitting its calibration and thresholds."""

from __future__ import annotations

import argparse
from pathlib import Path

from grader.cross_encoder import CrossEncoderGrader
from grader.factory import load_cross_encoder
from grader.llm_args import add_llm_arguments, llm_from_args
from models.cli_args import int_at_least
from models.errors import ConfigError
from models.output import check_output_path, print_json, print_table
from models.registry import MODEL_OPTION_HELP, resolve_bundle
from training.commands.common import (
    add_pair_format,
    add_target,
    guarantee_delta,
    pairs_from_args,
    require_eval_extra,
    targets_of,
)
from training.data import PairSet, groups_of, load_pairs, write_pairs

__all__ = ["register_answerability", "register_calibrate", "register_eval", "register_reference"]


#: what `crag eval --group-by` prints for each group (the --json report holds every metric)
GROUP_KEYS = ("n", "positives", "auroc", "escalation_rate", "auto_error_rate", "mean_p_relevant", "mean_p_irrelevant")


def _eval(args: argparse.Namespace) -> int:
    from training.evaluate import evaluate_grader, write_plots, write_report

    require_eval_extra(plots=bool(args.plots))
    if args.json:  # before the scoring, which may take minutes
        check_output_path(args.json, args.data, option="--json")
    if args.plots:
        check_output_path(f"{args.plots}_reliability.png", args.data, option="--plots")
    data = pairs_from_args(args, args.data)
    grader = load_cross_encoder(args.model, backend=args.backend, threads=args.threads)
    if args.cascade:
        if args.group_by:
            raise ConfigError("--group-by is for the plain report; run `crag eval --cascade` on each group's file")
        return _eval_cascade(args, grader, data)
    report = evaluate_grader(grader, data, batch_size=args.batch_size, group_by=args.group_by)
    report["data"] = data.summary()
    if args.json:
        write_report(report, args.json)
    if args.plots:
        report["plots"] = [str(p) for p in write_plots(report, args.plots)]
    keys = ("n", "auroc", "auroc_strict", "accuracy", "macro_f1", "escalation_rate", "auto_error_rate",
            "mean_p_relevant", "mean_p_irrelevant", "ece", "brier", "latency_ms_per_batch", "plots")
    summary = {k: report.get(k) for k in keys}
    shift = report["shift"]
    summary["data_shift"] = shift["message"] or ("none detected" if shift["shifted"] is False else None)
    if "per_group" in report:
        summary["per_group"] = {name: {k: part[k] for k in GROUP_KEYS} for name, part in report["per_group"].items()}
    print_json(summary)
    return 0


def _numbers(text: str, option: str) -> list[float]:
    """A comma-separated list of numbers, or a ConfigError naming the option and the item that is not one."""
    try:
        return [float(v) for v in text.split(",")]
    except ValueError:
        raise ConfigError(f"{option} takes numbers separated by commas, such as 0,0.1,0.2; got {text!r}") from None


def _eval_cascade(args: argparse.Namespace, grader: CrossEncoderGrader, data: PairSet) -> int:
    from training.cascade_eval import evaluate_cascade
    from training.evaluate import write_report

    levels = _numbers(args.levels, "--levels")
    simulated = _numbers(args.simulate_accuracy, "--simulate-accuracy") if args.simulate_accuracy else []
    pairs = data.pairs[: args.limit] if args.limit else data.pairs
    report = evaluate_cascade(grader, pairs, llm=llm_from_args(args), levels=levels, simulated_accuracy=simulated)
    report["data"] = data.summary()
    if args.json:
        write_report(report, args.json)
    _print_cascade(report)
    return 0


def _print_cascade(report: dict) -> None:
    """One table per LLM (the real one and each simulation): accuracy and cost against escalation rate."""
    blocks = []
    if report["real_llm"]:
        blocks.append((f"cascade with {report['real_llm']['model']} ({report['real_llm']['mode']})",
                       report["real_llm"]["rows"]))
    blocks += [(f"{name}: {block['note']}", block["rows"]) for name, block in report["simulated"].items()]
    scope = (f"{report['n']} pairs, {report['queries']} queries, the small model "
             f"{report['model_ms_per_query']:.1f} ms per query")
    for title, rows in blocks:
        columns = list(rows[0])
        print_table(f"{title}\n{scope}", [c.replace("_", " ") for c in columns],
                    [[_cell(row[c]) for c in columns] for row in rows])


def _cell(value: object) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def register_eval(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("eval", help="evaluate a grader on labelled pairs")
    p.add_argument("--model", default="default", help=MODEL_OPTION_HELP)
    p.add_argument("--data", required=True)
    add_pair_format(p)
    p.add_argument("--json", help="write the full report here")
    p.add_argument("--group-by", help="also report each group of pairs apart, by this metadata field (e.g. domain)")
    p.add_argument("--plots", help="path prefix for PNG plots (reliability, error vs escalation)")
    p.add_argument("--backend", default="auto", choices=["onnx", "torch", "auto"])
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--batch-size", type=int_at_least(1), default=None, help="default: the grader's own (int8: 1)")
    p.add_argument("--cascade", action="store_true",
                   help="report the cascade against escalation rate (real LLM via --llm-*, plus simulated LLMs)")
    p.add_argument("--levels", default="0,0.05,0.1,0.2,0.3,0.5", help="escalation rates for --cascade")
    p.add_argument("--simulate-accuracy", default="0.8,0.9,0.95",
                   help="accuracies of simulated LLMs for --cascade ('' for none)")
    p.add_argument("--limit", type=int_at_least(0, "0: all of them"), default=0,
                   help="use only the first N pairs (bounds real LLM calls)")
    add_llm_arguments(p)
    p.set_defaults(handler=_eval)


def _calibrate(args: argparse.Namespace) -> int:
    from training.recalibrate import (
        check_new_bundle_dir,
        cross_encoder_grader,
        recalibrate,
        suggest_pairs,
        write_recalibrated,
    )

    if args.suggest:
        check_output_path(args.out, args.data)
        pool = pairs_from_args(args, args.data, labelled=False)
        chosen = suggest_pairs(pool.pairs, args.suggest, seed=args.seed)
        out = Path(args.out)
        write_pairs(chosen, out)
        print_json({"out": str(out), "suggested": len(chosen), "queries": len({p.query_id for p in chosen}),
                    "drawn": f"at random from the {len(pool.pairs)} pairs of --data (rule-decided ones left out)",
                    "seed": args.seed,
                    "next": f"label them, then: crag calibrate --model {args.model} --data <labelled file> "
                            "--out <new bundle>"})
        return 0
    require_eval_extra()
    check_new_bundle_dir(resolve_bundle(args.model), args.out)  # before the slow scoring, not after
    data = pairs_from_args(args, args.data)
    target_error, target_escalation = targets_of(args)
    delta = guarantee_delta(args, target_escalation)
    groups = groups_of(data.pairs, args.group_by)
    llm_labels = None
    if args.llm_labels:
        from training.recalibrate import LLMLabels, measure_llm_accuracy

        llm_data = load_pairs(args.llm_labels)
        if args.llm_accuracy is not None:
            llm_labels = LLMLabels(llm_data, args.llm_accuracy)
        else:
            accuracy, compared = measure_llm_accuracy(data, llm_data)
            llm_labels = LLMLabels(llm_data, accuracy, compared)
    elif args.llm_accuracy is not None:
        raise ConfigError("--llm-accuracy needs --llm-labels (the LLM-labelled pairs it describes)")
    error_estimate = _error_estimate(args, delta)
    result = recalibrate(cross_encoder_grader(args.model), data, target_error=target_error,
                         target_escalation=target_escalation, delta=delta, method=args.calibration,
                         groups=groups, seed=args.seed, llm_labels=llm_labels, calibration_map=args.calibration_map,
                         error_estimate=error_estimate)
    settings = {"model": str(args.model), "data": str(args.data), "columns": args.columns, "label_map": args.label_map,
                "group_by": args.group_by, "target_error": target_error, "target_escalation": target_escalation,
                "delta": delta, "calibration": args.calibration, "calibration_map": args.calibration_map,
                "error_estimate": None if args.error_estimate == "auto" else args.error_estimate,
                "llm_labels": args.llm_labels, "llm_accuracy": args.llm_accuracy, "seed": args.seed}
    out = write_recalibrated(args.model, args.out, result, data, settings=settings)
    print_json({"out": str(out), "calibration": result.calibrator.method, "thresholds": result.choice.to_dict(),
                "held_out_metrics": result.measured(),
                "llm_labels": result.metrics.get("llm_labels"), "warning": result.note})
    return 0


def register_calibrate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("calibrate", help="refit calibration and thresholds of a bundle on your labelled pairs")
    _bundle_from_labels(p, "bundle name or directory", "labelled pairs of your domain (with --suggest: unlabelled)",
                        "new bundle directory (with --suggest: the JSONL of pairs to label)")
    p.add_argument("--calibration-map", choices=["auto", "refit", "keep"], default="auto",
                   help="keep the bundle's map and test thresholds on every label, or refit it on half of them "
                        "(auto: keep below 2,500 labels)")
    p.add_argument("--llm-labels", metavar="JSONL",
                   help="LLM-labelled pairs (the cascade's escalation log, or `crag label` output): they help fit "
                        "the calibration map, weighted by the LLM's accuracy; thresholds are tested on human labels")
    p.add_argument("--llm-accuracy", type=float, default=None,
                   help="the LLM's accuracy on this data (default: measured on pairs in both --data and --llm-labels)")
    p.add_argument("--suggest", type=int, default=0, metavar="N",
                   help="instead of calibrating, write N unlabelled pairs to label: a random sample (seeded by --seed) "
                        "of the pairs the model decides, which is what the test of the thresholds needs")
    p.add_argument("--group-by", default=None,
                   help="a metadata field (or 'source'): the error target must hold in every group")
    p.set_defaults(handler=_calibrate)


def _reference(args: argparse.Namespace) -> int:
    from training.shift_reference import refresh_reference

    print_json(refresh_reference(args.model, pairs_from_args(args, args.data, labelled=False), args.out,
                                 group_by=args.group_by))
    return 0


def register_reference(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("reference", help="remake a bundle's shift reference (with design effects) from the pairs "
                                         "it was calibrated on")
    p.add_argument("--model", default="default", help="bundle name or directory")
    p.add_argument("--data", required=True, help="the pairs the bundle was calibrated on (JSONL; labels not needed)")
    add_pair_format(p, labels=False)
    p.add_argument("--out", required=True, help="new bundle directory (the source is never changed)")
    p.add_argument("--group-by", help="a metadata field (e.g. domain): each group also gets a reference, and data "
                                      "like any one group is not a shift")
    p.set_defaults(handler=_reference)


def _answerability(args: argparse.Namespace) -> int:
    from training.answerability import answerability_report, best_per_query, fit_answer_floor, write_answerability
    from training.recalibrate import check_new_bundle_dir, cross_encoder_grader

    require_eval_extra()
    check_new_bundle_dir(resolve_bundle(args.model), args.out)  # before the slow scoring, not after
    data = pairs_from_args(args, args.data)
    test = pairs_from_args(args, args.test) if args.test else None
    grader = cross_encoder_grader(args.model)
    entry = fit_answer_floor(best_per_query(grader, data.pairs, args.group_by), min_answer_rate=args.min_answer_rate,
                             min_per_class=args.min_per_class)
    if test is not None:
        entry["test"] = {"data": test.summary(),
                         "groups": answerability_report(best_per_query(grader, test.pairs, args.group_by),
                                                        entry["floor"])}
    settings = {"model": str(args.model), "data": str(args.data), "test": args.test, "columns": args.columns,
                "label_map": args.label_map, "group_by": args.group_by, "min_answer_rate": args.min_answer_rate,
                "min_per_class": args.min_per_class}
    out = write_answerability(args.model, args.out, entry, data, settings)
    print_json({"out": str(out), "floor": entry["floor"], "binding_group": entry["binding_group"],
                "fit": entry["fit"], "test": entry.get("test", {}).get("groups")})
    return 0


def register_answerability(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("answerability", help="fit the best-chunk probability below which a grader-only answer "
                                             "abstains, on questions with and without an answer in their chunks")
    _labelled_bundle_io(p, "bundle name or directory", "labelled pairs grouped by question; a question none of "
                        "whose chunks is relevant or partial counts as unanswerable",
                        "new bundle directory (the source is never changed)")
    p.add_argument("--test", help="labelled pairs of other questions to report the floor on (not used to fit it)")
    p.add_argument("--group-by", default=None, help="a metadata field (or 'source'): the answer rate must hold in "
                                                    "every group")
    p.add_argument("--min-answer-rate", type=float, default=0.75,
                   help="share of answerable questions that must still be answered (in every group); the floor is "
                        "the highest that keeps it, abstaining on as many unanswerable questions as it allows")
    p.add_argument("--min-per-class", type=int_at_least(1), default=10,
                   help="answerable questions a group needs to bind the floor (unanswerable ones: to report on it)")
    p.set_defaults(handler=_answerability)


def _labelled_bundle_io(p: argparse.ArgumentParser, model_help: str, data_help: str, out_help: str) -> None:
    """--model, --data, --columns, --label-map and --out of the commands that write a new bundle from labelled
    pairs."""
    p.add_argument("--model", default="default", help=model_help)
    p.add_argument("--data", required=True, help=data_help)
    add_pair_format(p)
    p.add_argument("--out", required=True, help=out_help)


def _bundle_from_labels(p: argparse.ArgumentParser, model_help: str, data_help: str, out_help: str) -> None:
    """Options shared by the commands that refit a bundle's calibration and thresholds on labelled pairs."""
    _labelled_bundle_io(p, model_help, data_help, out_help)
    p.add_argument("--no-guarantee", action="store_true",
                   help="choose thresholds on the point estimate (no finite-sample guarantee; not recommended)")
    p.add_argument("--seed", type=int, default=0, help="seed of the fit/test split by query")
    p.add_argument("--error-estimate", choices=["auto", "counted", "calibrated"], default="auto",
                   help="with --no-guarantee: choose the band on the labelled errors counted, or on the errors the "
                        "fitted map's probabilities expect (less optimistic on few labels; auto: calibrated below "
                        "600 labels)")
    add_target(p, default_delta=0.1, default_calibration="platt")


def _error_estimate(args: argparse.Namespace, delta: float | None) -> str:
    """--error-estimate, refused where a guarantee tests the band on labelled errors anyway."""
    if args.error_estimate != "auto" and delta is not None:
        raise ConfigError(f"--error-estimate {args.error_estimate} chooses a band without a guarantee; pass it with "
                          "--no-guarantee (with a guarantee the band is tested on labelled errors)")
    return str(args.error_estimate)


def _adapt(args: argparse.Namespace) -> int:
    from training.adapt import adapt_bundle

    require_eval_extra()
    target_error, target_escalation = targets_of(args)
    delta = guarantee_delta(args, target_escalation)
    print_json(adapt_bundle(args.model, pairs_from_args(args, args.data), args.out,
                            target_error=target_error, target_escalation=target_escalation, delta=delta,
                            calibration=args.calibration, seed=args.seed,
                            error_estimate=_error_estimate(args, delta)))
    return 0


def register_adapt(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("adapt", help="fit a fused bundle's head and thresholds to your labelled pairs (no training)")
    _bundle_from_labels(p, "fused bundle name or directory", "100-400 labelled pairs of your domain",
                        "new bundle directory")
    p.set_defaults(handler=_adapt)
