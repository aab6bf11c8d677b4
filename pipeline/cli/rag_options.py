"""The corrective loop's options (RAGConfig), one definition for `crag ask`, `crag eval-pipeline` and
`crag serve`: what a user tunes with `crag ask` is what they can deploy."""

from __future__ import annotations

import argparse
from typing import Any

from pipeline.corrective.state import RAGConfig

__all__ = ["add_rag_arguments", "rag_settings"]


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
