"""The bounds of one corrective run (:class:`RAGConfig`) and its running budget and trace (:class:`RunState`).

Its own module so that the loop and the answerer both import it without importing each other.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from models.errors import ConfigError
from models.field_types import check_field_types
from pipeline.corrective.outcomes import Trace

__all__ = ["RAGConfig", "RunState"]


@dataclass(frozen=True, kw_only=True)
class RAGConfig:
    """Bounds of one run. ``max_llm_calls=0`` forbids the LLM even when one is configured."""

    k: int = 6
    broader_k: int = 16
    web_k: int = 5
    max_rounds: int = 3
    max_llm_calls: int = 8
    deadline_s: float = 20.0
    strip_token_budget: int = 120
    # refinement keeps only strips graded at least this share of the best strip's probability (0: every strip
    # above 0.1 within the token budget): shorter answers at some risk of leaving a needed sentence out
    strip_relative_floor: float = 0.0
    min_query_words: int = 2  # fewer words of 3+ letters: ask to clarify rather than search (0: search anything)
    max_query_chars: int = 2000
    min_answer_probability: float | None = None  # weak strips below this are not used (default: policy.lower)
    # grader-only answers need a chunk at or above this probability, else abstain (None: the grader bundle's
    # fitted floor, `crag answerability`; 0: answer from any strip above the lower threshold)
    answer_floor: float | None = None
    # "access denied" instead of "no answer" only when a hidden chunk covers this share of the question's
    # content terms (and at least two of them); None never reveals that hidden documents exist
    access_denied_min_coverage: float | None = 0.6

    def __post_init__(self) -> None:
        check_field_types(self)

        def unit(value: float | None, *, none_ok: bool = True) -> bool:
            return (value is None and none_ok) or (value is not None and 0 <= value <= 1)

        checks = [
            (self.k >= 1, "k", ">= 1"), (self.broader_k >= self.k, "broader_k", f">= k ({self.k})"),
            (self.web_k >= 1, "web_k", ">= 1"), (self.max_rounds >= 1, "max_rounds", ">= 1"),
            (self.deadline_s > 0, "deadline_s", "> 0 seconds"), (self.max_llm_calls >= 0, "max_llm_calls", ">= 0"),
            (self.strip_token_budget >= 10, "strip_token_budget", ">= 10"),
            (self.min_query_words >= 0, "min_query_words", ">= 0"),
            (self.max_query_chars >= 1, "max_query_chars", ">= 1"),
            (unit(self.min_answer_probability), "min_answer_probability", "in [0, 1] or None"),
            (unit(self.answer_floor), "answer_floor", "in [0, 1] or None"),
            (unit(self.strip_relative_floor, none_ok=False), "strip_relative_floor", "in [0, 1]"),
            (self.access_denied_min_coverage is None or 0 < self.access_denied_min_coverage <= 1,
             "access_denied_min_coverage", "in (0, 1] or None"),
        ]
        bad = [f"{name} must be {rule}, got {getattr(self, name)!r}" for ok, name, rule in checks if not ok]
        if bad:  # every value that fails, by name (NaN fails every comparison, so it is refused too)
            raise ConfigError(f"invalid RAGConfig: {'; '.join(bad)}")


class RunState:
    """Budget and bookkeeping of one run: deadline, LLM calls spent, degradations, the trace."""

    def __init__(self, config: RAGConfig) -> None:
        self.start = time.monotonic()
        self.deadline = self.start + config.deadline_s
        self.max_llm_calls = config.max_llm_calls
        self.llm_calls = 0
        self.degraded: list[str] = []
        self.tier = ""
        self.index_hits = 0  # chunks the index searches returned, before any check: 0 with filters names them
        self.first_query = ""  # what round 1 searched (a long message: its question), reused by the access check
        self.trace = Trace()

    def llm_left(self) -> int:
        return max(0, self.max_llm_calls - self.llm_calls)

    def expired(self) -> bool:
        return time.monotonic() >= self.deadline

    def degrade(self, reason: str) -> None:
        if reason not in self.degraded:
            self.degraded.append(reason)
