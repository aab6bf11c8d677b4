"""``crag convert``, ``crag mine`` and ``crag label``: preparing labelled pairs."""

from __future__ import annotations

import argparse
from pathlib import Path

from grader.llm import LLMGrader
from grader.llm_args import add_llm_arguments, llm_config_from_args
from models.errors import ConfigError
from models.output import check_output_path, print_json
from training.commands.common import add_pair_format, pairs_from_args
from training.data import PairSet, write_pairs

__all__ = ["register_convert", "register_label", "register_mine"]


def _convert(args: argparse.Namespace) -> int:
    from training.convert import squad_pairs, wikiqa_pairs

    check_output_path(args.out, args.input)
    pairs = squad_pairs(args.input, seed=args.seed) if args.format == "squad" else wikiqa_pairs(args.input)
    count = write_pairs(pairs, args.out)
    print_json({"out": args.out, "pairs": count, "summary": PairSet(pairs).summary()})
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

    check_output_path(args.out, args.data)
    data = pairs_from_args(args, args.data)
    corpus = None
    if args.corpus:
        corpus = [c.strip() for c in Path(args.corpus).read_text(encoding="utf-8").splitlines() if c.strip()]
    model_dir = str(resolve_base(args.base)) if args.method == "biencoder" else None
    mined = mine_hard_negatives(data.pairs, corpus=corpus, per_query=args.per_query, margin=args.margin,
                                method=args.method, model_dir=model_dir)
    count = write_pairs([*data.pairs, *mined], args.out)
    result: dict[str, object] = {"out": args.out, "pairs": count, "mined": len(mined)}
    if not mined:  # say why, or 0 reads like a failure of the method
        result["note"] = ("nothing mined: only queries whose pairs are all relevant get negatives, and a negative "
                          "is another text of --data (or of --corpus) scoring for the query above 0 and below "
                          "--margin times its best relevant text")
    print_json(result)
    return 0


def register_mine(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("mine", help="add mined hard negatives for queries that only have positives")
    p.add_argument("--data", required=True)
    add_pair_format(p)
    p.add_argument("--corpus", help="text file, one passage per line (default: the texts in --data)")
    p.add_argument("--out", required=True)
    p.add_argument("--per-query", type=int, default=2)
    p.add_argument("--margin", type=float, default=0.9)
    p.add_argument("--method", default="bm25", choices=["bm25", "biencoder"])
    p.add_argument("--base", default="default-base", help="bi-encoder for --method biencoder")
    p.set_defaults(handler=_mine)


def _label(args: argparse.Namespace) -> int:
    from training.labelling import label_with_llm

    config = llm_config_from_args(args)
    if config is None:
        raise ConfigError("crag label needs an LLM: pass --llm-model (and --llm-base-url for a local server)")
    check_output_path(args.out, args.data, keep_existing="labels an LLM was paid for, or a person's")
    data = pairs_from_args(args, args.data, labelled=False)
    if args.ray is not None:
        from training.ray_labelling import label_with_ray  # Ray is imported only on this path

        result, calls = label_with_ray(config, data.pairs, address=None if args.ray == "local" else args.ray,
                                       actors=args.ray_actors)
        cost = None
    else:
        llm = LLMGrader(config)
        result = label_with_llm(llm, data.pairs, progress=not args.no_progress)
        calls, cost = llm.stats.calls, llm.stats.cost_usd
    count = write_pairs(result.labelled, args.out) if result.labelled else 0
    print_json({"out": args.out if count else None, "labelled": count, "failed": len(result.failed),
                "failures": [{"query": p.query, "text": p.text[:80], "reason": why}
                             for p, why in result.failed[:20]],
                "seconds": round(result.seconds, 1), "llm_calls": calls, "cost_usd": cost})
    return 0 if count else 2


def register_label(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("label", help="label unlabelled (query, text) pairs with an LLM, recording its reasons")
    p.add_argument("--data", required=True, help="pairs with query and text (a label column is ignored)")
    add_pair_format(p, labels=False)
    p.add_argument("--out", required=True)
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                   help="label on Ray: a local runtime, or the cluster at ADDRESS; at most --ray-actors x "
                        "--llm-concurrency LLM requests are open in the whole cluster (needs crag-grader[ray])")
    p.add_argument("--ray-actors", type=int, default=2, help="labelling actors, each with one LLM client")
    add_llm_arguments(p, required=True)
    p.set_defaults(handler=_label)

