"""The corrective loop's options (RAGConfig), one definition for `crag ask`, `crag eval-pipeline` and
`crag serve`: what a user tunes with `crag ask` is what they can deploy."""

from __future__ import annotations

import argparse
import re
from typing import Any

from models.errors import ConfigError
from pipeline.corrective.state import RAGConfig

__all__ = ["OPTION_OF", "add_rag_arguments", "rag_config", "rag_settings"]

OPTION_OF = {"max_llm_calls": "--max-llm-calls", "deadline_s": "--deadline", "max_rounds": "--max-rounds",
             "min_answer_probability": "--min-answer-p", "answer_floor": "--answer-floor",
             "strip_relative_floor": "--strip-relative-floor", "min_query_words": "--min-query-words",
             "access_denied_min_coverage": "--access-denied-coverage"}


def add_rag_arguments(p: argparse.ArgumentParser, *, per: str = "question") -> None:
    """Budgets and answer rules of one run; ``per`` names what one run is (a question, a /v1/query request)."""
    defaults = RAGConfig()
    p.add_argument("--max-llm-calls", type=int, default=defaults.max_llm_calls,
                   help=f"LLM calls per {per}, all steps together")
    p.add_argument("--deadline", type=float, default=defaults.deadline_s, help=f"seconds per {per}")
    p.add_argument("--max-rounds", type=int, default=defaults.max_rounds,
                   help="retrieval rounds (initial, broader, web)")
    p.add_argument("--min-answer-p", type=float, default=None,
                   help="answer from uncertain strips only above this probability (default: the lower threshold)")
    p.add_argument("--answer-floor", type=float, default=None,
                   help="without an LLM, abstain unless some chunk reaches this probability (default: the grader "
                        "bundle's fitted floor, see `crag answerability`; 0 turns it off)")
    p.add_argument("--strip-relative-floor", type=float, default=defaults.strip_relative_floor,
                   help="quote only sentences graded at least this share of the best one's probability (0-1; "
                        "0.3-0.5 gives shorter answers, see the README)")
    p.add_argument("--min-query-words", type=int, default=defaults.min_query_words,
                   help="ask to clarify a query with fewer words of 3+ letters (1: search single keywords "
                        "such as 'Normans'; 0: search anything)")


def rag_settings(args: argparse.Namespace) -> dict[str, Any]:
    """RAGConfig keyword arguments from the options above (JSON-serialisable, for `crag serve`'s workers)."""
    return {"max_llm_calls": args.max_llm_calls, "deadline_s": args.deadline, "max_rounds": args.max_rounds,
            "min_answer_probability": args.min_answer_p, "answer_floor": args.answer_floor,
            "strip_relative_floor": args.strip_relative_floor, "min_query_words": args.min_query_words}


def rag_config(settings: dict[str, Any]) -> RAGConfig:
    """The RAGConfig of these settings; a bad value is named by the option a user typed (``--max-rounds``), not by
    the field it sets (``max_rounds``)."""
    try:
        return RAGConfig(**settings)
    except ConfigError as exc:
        message = re.sub(r"\b(" + "|".join(OPTION_OF) + r") must\b", lambda m: f"{OPTION_OF[m.group(1)]} must",
                         str(exc))
        message = message.replace("--access-denied-coverage must be in (0, 1] or None",  # 0 is how a CLI says None
                                  "--access-denied-coverage must be in [0, 1] (0: never)").replace(" or None", "")
        raise ConfigError(message.replace("invalid RAGConfig: ", "invalid option(s): ")) from exc
