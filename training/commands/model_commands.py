"""``crag train``, ``crag export``, ``crag recipe`` and ``crag export-embedder``: making and shipping models."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from models.bundle import read_bundle
from models.output import print_json
from models.registry import resolve_bundle
from training.commands.common import (
    add_pair_format,
    add_target,
    group_by_of,
    guarantee_delta,
    pairs_from_args,
    targets_of,
)
from training.data import PairSet

BASE_LR = 4e-5  # from the untrained base model
INIT_LR = 2e-5  # further training of a grader (bench/bench_train_from_default.py)

__all__ = ["register_export", "register_export_embedder", "register_fuse", "register_recipe", "register_train",
           "register_train_embedder"]


def _train(args: argparse.Namespace) -> int:
    from training.finetune import TrainConfig, train_grader
    from training.splits import group_split

    for model in (args.init, None if args.compare_with == "none" else args.compare_with):
        if model:
            resolve_bundle(model)  # a misspelt name fails now, not after loading data or training
    data = pairs_from_args(args, args.data)
    if args.val:
        train, val = data, pairs_from_args(args, args.val)
    else:
        tr, va = group_split(data.pairs, test_size=args.val_share, by=args.group_by, seed=args.seed)
        train, val = PairSet(tr, path=data.path), PairSet(va, path=f"{data.path} (held out by {args.group_by})")
    target_error, target_escalation = targets_of(args)
    config = TrainConfig(
        base=args.base, init=args.init, max_length=args.max_length, epochs=args.epochs, batch_size=args.batch_size,
        learning_rate=(INIT_LR if args.init else BASE_LR) if args.lr is None else args.lr, seed=args.seed,
        max_minutes=args.max_minutes,
        patience=args.patience, eval_every=args.eval_every, freeze_layers=args.freeze_layers,
        max_steps=args.max_steps, threads=args.threads, device=args.device, calibration=args.calibration,
        target_error=target_error, target_escalation=target_escalation, delta=args.delta,
        partial_target=args.partial_target, progress=not args.no_progress, name=Path(args.out).name,
    )
    result = train_grader(train, val, args.out, config)
    report = {"out": str(result.out), "steps": result.steps, "seconds": round(result.seconds, 1),
              "best_val_auroc": result.best_val_auroc, "thresholds": result.thresholds,
              "validation": {k: result.metrics[k] for k in ("auroc", "accuracy", "escalation_rate",
                                                            "auto_error_rate", "ece", "measured_on")
                             if k in result.metrics}}
    if args.compare_with != "none":
        from training.comparison import compare_on_validation

        report["compared_with"] = compare_on_validation(result.out, args.compare_with, val, seed=args.seed,
                                                         started_from=args.init)
    # a grader trained on from the default does not survive int8 (23% of probe verdicts flipped, README): fp32
    int8 = "" if args.init else " --int8"
    print_json({**report, "next": f"crag export --model {result.out} --out {result.out}-onnx{int8}"})
    return 0


def register_train(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="fine-tune a cross-encoder grader on labelled pairs")
    p.add_argument("--data", required=True, help="labelled pairs (.jsonl, .csv, .tsv)")
    p.add_argument("--val", help="validation pairs; default: a split of --data grouped by --group-by")
    add_pair_format(p)
    p.add_argument("--base", default="default-base", help="local base model dir (default: all-MiniLM-L6-v2)")
    p.add_argument("--init", metavar="MODEL",
                   help="start from a trained grader instead of the untrained --base: 'default', an exported "
                        "bundle's folder, or the folder of `crag train` (its cross-encoder; a fused cosine is "
                        "left out)")
    p.add_argument("--out", required=True, help="output directory (a torch bundle)")
    p.add_argument("--group-by", default="query", choices=["query", "source"])
    p.add_argument("--val-share", type=float, default=0.15)
    p.add_argument("--epochs", type=float, default=3.0,
                   help="passes over the training pairs; validation picks the best step and stops early")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--max-length", type=int, default=256)
    p.add_argument("--lr", type=float, default=None,
                   help=f"learning rate (default: {BASE_LR:g} from the base model, {INIT_LR:g} with --init)")
    p.add_argument("--seed", type=int, default=13)
    p.add_argument("--patience", type=int, default=3, help="validations without a better AUROC before stopping")
    p.add_argument("--eval-every", type=int, default=0,
                   help="validation every N steps (default: about four times an epoch, at least 10 steps apart)")
    p.add_argument("--max-steps", type=int, default=0)
    p.add_argument("--max-minutes", type=float, default=0.0,
                   help="stop training after this many minutes (the best checkpoint so far is kept)")
    p.add_argument("--freeze-layers", type=int, default=0, metavar="N",
                   help="leave the embeddings and the first N encoder layers untrained: training is cheaper (3 of "
                        "6 frozen: 1.3x faster on 2 CPU cores, same AUROC on a new domain) and they keep what the "
                        "base model knows")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--device", default="cpu")
    p.add_argument("--partial-target", type=float, default=0.75)
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--compare-with", default="default", metavar="MODEL",
                   help="after training, score this bundle and the new grader on the same validation pairs (at "
                        "most 1,000, whole queries) and say which ranks them better; 'none' skips it")
    add_target(p)
    p.set_defaults(handler=_train)


def _export(args: argparse.Namespace) -> int:
    from training.export import export_bundle

    out = export_bundle(args.model, args.out, int8=args.int8 or args.int8_only, keep_fp32=not args.int8_only,
                        probe=args.probe, max_flip_share=args.max_flip)
    bundle = read_bundle(out)
    print_json({"out": str(out), "files": sorted(bundle.manifest.files), "parity": bundle.manifest.parity})
    return 0


def register_export(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="export a trained grader to an ONNX bundle (parity-gated)")
    p.add_argument("--model", required=True, help="torch bundle written by crag train")
    p.add_argument("--out", required=True)
    p.add_argument("--int8", action="store_true", help="also write a dynamic int8 model")
    p.add_argument("--int8-only", action="store_true", help="ship only the int8 model")
    p.add_argument("--probe", help="pairs for the parity gate (default: the probe saved at training)")
    p.add_argument("--max-flip", type=float, default=0.02,
                   help="share of int8 verdict flips the gate allows (it fails when the probe shows significantly "
                        "more: a binomial test at 5%%)")
    p.set_defaults(handler=_export)


def _recipe(args: argparse.Namespace) -> int:
    from training.recipe import RecipeConfig, run_default_recipe

    config = dataclasses.replace(RecipeConfig(), seed=args.seed, layers=args.layers, teacher=args.teacher,
                                 distill_weight=args.distill_weight, name=args.name,
                                 cosine_offset=args.cosine_offset, device=args.device,
                                 tune_embedder=not args.frozen_embedder,
                                 max_minutes=RecipeConfig.max_minutes if args.max_minutes is None else args.max_minutes)
    reports = run_default_recipe(args.data, args.work, args.out, config, progress=not args.no_progress)
    print_json({name: {k: r.get(k) for k in ("n", "auroc", "accuracy", "escalation_rate", "auto_error_rate")}
            for name, r in reports.items()})
    return 0


def register_recipe(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("recipe", help="rebuild the shipped default grader from shared/data")
    p.add_argument("--data", default="../shared/data")
    p.add_argument("--work", default="runs/default")
    p.add_argument("--out", default="runs/default/bundle",
                   help="a new directory for the bundle (checked first: the recipe writes it after training); "
                        "copy it over models/bundles/NAME to ship it")
    p.add_argument("--seed", type=int, default=13)
    p.add_argument("--layers", type=int, default=0,
                   help="train a student with the base model's first N layers (0: the full model)")
    p.add_argument("--teacher", help="a grader bundle the student also learns from (e.g. runs/default/onnx)")
    p.add_argument("--distill-weight", type=float, default=0.5, help="share of the teacher in each target")
    p.add_argument("--cosine-offset", action="store_true",
                   help="train the cross-encoder on top of the cosine of the bi-encoder the recipe fuses (learns "
                        "what it misses; that embedder is made first)")
    p.add_argument("--frozen-embedder", action="store_true",
                   help="fuse the untrained all-MiniLM-L6-v2's cosine instead of fine-tuning the bi-encoder on the "
                        "training split first (about 14 minutes on 2 CPU cores)")
    p.add_argument("--name", default="default", help="the bundle's name")
    p.add_argument("--max-minutes", type=float, default=None,
                   help="training time budget in minutes (default: the recipe's own, RecipeConfig.max_minutes; "
                        "0: no bound)")
    p.add_argument("--device", default="cpu",
                   help="where training runs: cpu, or cuda on a machine with an NVIDIA GPU and a CUDA build of torch "
                        "(the recipe's training then takes about a minute; data, export and fusion stay on the CPU)")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(handler=_recipe)


def _export_embedder(args: argparse.Namespace) -> int:
    from training.export_embedder import export_embedder

    manifest = export_embedder(args.out, max_length=args.max_length, source=args.source, name=args.name)
    print_json({"out": args.out, "name": manifest["name"], "parity": manifest["parity"], "files": manifest["files"]})
    return 0


def _train_embedder(args: argparse.Namespace) -> int:
    from training.embedder_finetune import EmbedderTrainConfig, finetune_embedder

    config = EmbedderTrainConfig(base=args.base, per_group=args.per_group,
                                 group_by=group_by_of(args),
                                 epochs=args.epochs, batch_size=args.batch_size, learning_rate=args.lr,
                                 max_length=args.max_length, alpha=args.alpha, max_minutes=args.max_minutes,
                                 seed=args.seed, threads=args.threads, device=args.device,
                                 negatives=args.negatives, per_positive=args.per_positive,
                                 teacher=args.teacher, distill_weight=args.distill_weight, guide=args.guide)
    report = finetune_embedder(pairs_from_args(args, args.data).pairs, args.out, config)
    print_json({"out": args.out, "triplets": report["triplets"], "training": report["training"],
                "next": f"crag export-embedder --source {args.out} --out {args.out}-onnx, then "
                        f"crag fuse --model <cross-encoder bundle> --data <labelled pairs> --embedder {args.out}-onnx "
                        "--out <new bundle>"})
    return 0


def register_train_embedder(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train-embedder", help="fine-tune the bi-encoder whose cosine a fused grader reads "
                                              "(contrastive, on queries with a relevant and an irrelevant text)")
    p.add_argument("--data", required=True, help="labelled pairs; each query needs a relevant and an irrelevant text")
    add_pair_format(p)
    p.add_argument("--out", required=True, help="a new folder for the model (save_pretrained format)")
    p.add_argument("--base", default="default-base", help="local base model dir (default: all-MiniLM-L6-v2)")
    p.add_argument("--group-by", default="domain",
                   help="metadata field (or 'source') whose groups are capped at --per-group; 'none': one group")
    p.add_argument("--per-group", type=int, default=2500, help="triplets per group, at most")
    p.add_argument("--epochs", type=float, default=1.0)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=2e-5)
    p.add_argument("--max-length", type=int, default=128, help="tokens read per text in training")
    p.add_argument("--negatives", type=int, default=1,
                   help="mined irrelevant texts per query in a batch, at most (the other texts of the batch count too)")
    p.add_argument("--per-positive", action="store_true",
                   help="a triplet for every relevant text of a query (default: one per query)")
    p.add_argument("--teacher", default=None,
                   help="local folder of a larger sentence-transformers bi-encoder whose in-batch scores the model "
                        "also learns (distillation; e.g. all-mpnet-base-v2)")
    p.add_argument("--distill-weight", type=float, default=0.5,
                   help="with --teacher: the distillation's share of the loss (the contrastive loss has the rest)")
    p.add_argument("--guide", action="store_true",
                   help="with --teacher: drop from a query's negatives the texts the teacher scores above its "
                        "relevant text (likely unlabelled answers)")
    p.add_argument("--alpha", type=float, default=1.0,
                   help="WiSE-FT weight of the fine-tuned model against the untrained one (1: fine-tuned alone)")
    p.add_argument("--max-minutes", type=float, default=0.0, help="stop after this many minutes (0: no bound)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--device", default="cpu")
    p.set_defaults(handler=_train_embedder)


def register_export_embedder(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export-embedder", help="export all-MiniLM-L6-v2 (or a fine-tuned copy: --source) to an "
                                               "int8 ONNX embedder for retrieval and fusion")
    p.add_argument("--out", required=True, help="e.g. models/embedders/minilm-l6")
    p.add_argument("--max-length", type=int, default=256)
    p.add_argument("--source", help="a local model folder of the same kind (e.g. all-MiniLM-L6-v2 fine-tuned on "
                                    "your pairs, saved with save_pretrained) instead of the shipped one")
    p.add_argument("--name", help="the embedder's name in its manifest (default: the source folder's name); an index "
                                  "records it and refuses an embedder of another name")
    p.set_defaults(handler=_export_embedder)



def _fuse(args: argparse.Namespace) -> int:
    from training.fusion import fuse_bundle

    target_error, target_escalation = targets_of(args)
    delta = guarantee_delta(args, target_escalation)
    print_json(fuse_bundle(args.model, pairs_from_args(args, args.data), args.out,
                           group_by=group_by_of(args),
                           target_error=target_error, target_escalation=target_escalation,
                           delta=delta, calibration=args.calibration, int8_only=args.int8_only,
                           max_flip=args.max_flip, probe_pairs=args.probe_pairs, seed=args.seed,
                           embedder=args.embedder))
    return 0


def register_fuse(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("fuse",
                       help="mix the bi-encoder's cosine into a cross-encoder bundle, chosen for the worst "
                            "domain of your labelled pairs, then calibrate the fused score")
    p.add_argument("--model", required=True, help="cross-encoder ONNX bundle (crag export)")
    p.add_argument("--data", required=True,
                   help="labelled pairs, best of several domains (--group-by); not the training pairs")
    add_pair_format(p)
    p.add_argument("--group-by", default="domain", help="metadata field (or 'source') naming each pair's domain; "
                                                        "'none' for data of one domain")
    p.add_argument("--out", required=True, help="new bundle directory")
    p.add_argument("--int8-only", action="store_true", help="ship only the int8 model (parity-gated)")
    p.add_argument("--max-flip", type=float, default=0.02,
                   help="share of fused int8 verdict flips the gate allows (it fails when the probe shows "
                        "significantly more: a binomial test at 5%%)")
    p.add_argument("--probe-pairs", type=int, default=1000, help="about how many pairs the parity check reads")
    p.add_argument("--embedder", help="an exported embedder folder (`crag export-embedder --source ...`) to fuse "
                                      "and ship instead of the shipped one (models/embedders/minilm-l6, which "
                                      "indexes embed with: a grader fusing another cannot reuse their vectors)")
    p.add_argument("--no-guarantee", action="store_true", help="point-estimate thresholds (not recommended)")
    p.add_argument("--seed", type=int, default=0, help="seed of the calibration fit/test split by query")
    add_target(p, default_delta=None, default_calibration="platt")
    p.set_defaults(handler=_fuse)
