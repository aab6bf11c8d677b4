"""What every framework adapter does with a grader's output: sort chunks by verdict and decide as CRAG does."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from grader.policy import decide
from grader.protocol import Grader
from models.errors import ConfigError
from models.types import Chunk, Decision, Grade, Verdict

__all__ = ["Sorted", "check_items", "grade_metadata", "sort_by_grade", "web_search_flag"]


@dataclass(frozen=True)
class Sorted:
    """Input positions by outcome, the grades in input order, and the CRAG decision over all of them."""

    relevant: list[int]  # relevant or partial, decided (by the model, the LLM or a rule)
    uncertain: list[int]  # in the band and not resolved (no LLM, or the LLM failed or was out of budget)
    irrelevant: list[int]
    grades: list[Grade]
    decision: Decision

    def kept(self, keep_uncertain: bool) -> list[int]:
        """Positions to pass on, in input order."""
        return sorted(self.relevant + (self.uncertain if keep_uncertain else []))


def check_items(items: Sequence[Any], what: str, ok: Callable[[Any], bool]) -> None:
    """Refuse, by position, an item that is not the framework's document (a plain string, say), before grading:
    an AttributeError from deep inside an adapter names neither the item nor what was expected."""
    if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
        raise ConfigError(f"documents must be a list of {what.removeprefix('a ')}, got {type(items).__name__}: "
                          f"{items!r:.80}")
    for i, item in enumerate(items):
        if not ok(item):
            raise ConfigError(f"documents[{i}] must be {what}, got {type(item).__name__}: {item!r:.80}")


def sort_by_grade(grader: Grader, query: str, texts: Sequence[str], ids: Sequence[str | None]) -> Sorted:
    """Grade ``texts`` for ``query`` and sort them; ``ids`` become the grades' chunk ids."""
    grades = grader.grade(query, [Chunk(text=t, chunk_id=i) for t, i in zip(texts, ids, strict=True)])
    relevant, uncertain, irrelevant = [], [], []
    for i, grade in enumerate(grades):
        if grade.uncertain:
            uncertain.append(i)
        elif grade.verdict is Verdict.IRRELEVANT:
            irrelevant.append(i)
        else:
            relevant.append(i)
    return Sorted(relevant, uncertain, irrelevant, grades, decide(grades, getattr(grader, "policy", None)))


def grade_metadata(grade: Grade) -> dict[str, Any]:
    """The fields a framework's document metadata gets (prefixed, so they never clash with the user's)."""
    out: dict[str, Any] = {"crag_verdict": grade.verdict.value, "crag_probability": round(grade.probability, 6),
                           "crag_decided_by": grade.decided_by, "crag_uncertain": grade.uncertain}
    if grade.escalation_failed:
        out["crag_escalation_failed"] = grade.reason or "escalation failed"
    if grade.withheld:  # scored above the band but not accepted on it: a swapped opposite
        out["crag_withheld"] = grade.reason or "withheld"
    return out


def web_search_flag(decision: Decision) -> str:
    """The LangGraph CRAG tutorial's ``web_search`` state value: "No" only when the retrieval is CORRECT."""
    return "No" if decision is Decision.CORRECT else "Yes"
