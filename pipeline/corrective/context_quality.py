"""Context-level quality of what was retrieved: sufficient / partial / insufficient / conflicting.

The heuristic needs no model: the question's content terms are its aspects, and an aspect counts as
answered when a kept strip mentions it. The LLM variant (see :class:`pipeline.corrective.generation.LLMAnswerer`)
replaces it only when the cascade is unsure (an AMBIGUOUS decision) and the budget allows.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from models.types import Decision
from pipeline.retrieval.words import content_words

__all__ = ["ContextQuality", "aspects_of", "heuristic_quality", "question_of"]

LEVELS = ("sufficient", "partial", "insufficient", "conflicting")


@dataclass(frozen=True)
class ContextQuality:
    level: str
    answered_aspects: list[str] = field(default_factory=list)
    missing_aspects: list[str] = field(default_factory=list)
    decided_by: str = "heuristic"
    conflicts: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


MAX_ASPECTS = 12  # more content terms than this: a long message, whose aspects are those of its question
QUESTION_OPENERS = frozenset({
    "what", "how", "why", "when", "where", "who", "whom", "whose", "which", "is", "are", "was", "were", "do", "does",
    "did", "can", "could", "should", "would", "will", "may", "might", "has", "have", "had"})


# words of a question that asks for help with what was told, not about a subject of its own
CONVERSATIONAL = frozenset({
    "help", "anyone", "anybody", "someone", "somebody", "everyone", "ideas", "idea", "suggestions", "suggestion",
    "advice", "thoughts", "think", "right", "wrong", "missing", "something", "anything", "doing", "know", "possible",
    "correct", "fix", "solve", "work", "works", "working", "happening", "happen", "mean", "normal", "okay", "ok",
    "else", "way", "guys", "folks", "tips", "recommend", "recommendations", "explain", "case", "expected"})


def aspects_of(query: str) -> list[str]:
    """Content terms of the question, in order and without repeats. In a long message (more than ``MAX_ASPECTS``
    terms: a story told before the question, "... Anyway, what religion were the Normans?") only its question's:
    every word of the story is not an aspect an answer must cover."""
    return _terms(question_of(query))


def question_of(query: str) -> str:
    """The query itself, or for a long message (more than ``MAX_ASPECTS`` content terms) the question it asks, when
    one of its clauses ends with "?" and asks about something (:func:`_question_part`)."""
    if len(_terms(query)) <= MAX_ASPECTS:
        return query
    return _question_part(query) or query  # a question it returns has a content term


def _terms(text: str) -> list[str]:
    seen: list[str] = []
    for word in content_words(re.findall(r"[\w'-]+", text)):
        if len(word) > 2 and word.lower() not in (s.lower() for s in seen):
            seen.append(word)
    return seen


def _question_part(query: str) -> str | None:
    """The last question of the message that asks about something: a clause ending with "?", from the clause
    before it that opens with a question word (what, how, can, ...) when there is one, with a content term that is
    not a conversational one ("Can anyone help?", "How do I fix it?" ask about what was told before them, so an
    earlier question is taken, or none); None when no such question is found."""
    clauses = re.split(r"(?<=[.!?;:,])\s+", query.strip())
    ends = [i for i, clause in enumerate(clauses) if clause.rstrip().endswith("?")]
    for end in reversed(ends):
        question = clauses[end]
        for start in range(end, max(-1, end - 4), -1):  # a question spans a few clauses at most
            first = re.match(r"\W*(\w+)", clauses[start])
            if first is not None and first.group(1).lower() in QUESTION_OPENERS:
                question = " ".join(clauses[start:end + 1])
                break
        if any(term.lower() not in CONVERSATIONAL for term in _terms(question)):
            return question
    return None


def _mentions(text: str, aspect: str) -> bool:
    stem = aspect.lower()[: max(4, len(aspect) - 2)]
    return re.search(rf"\b{re.escape(stem)}", text.lower()) is not None


def heuristic_quality(query: str, strip_texts: Sequence[str], decision: Decision | None,
                      conflicts: Sequence[str] = ()) -> ContextQuality:
    """Aspects answered by the kept strips; the level follows the decision and the coverage.

    A CORRECT decision counts as sufficient when the strips mention at least half of the aspects:
    answers rarely repeat every word of the question ("religion" in "What religion were the Normans?").
    """
    aspects = aspects_of(query)
    joined = " ".join(strip_texts)
    answered = [a for a in aspects if _mentions(joined, a)]
    missing = [a for a in aspects if a not in answered]
    if not strip_texts:
        level = "insufficient"
    elif conflicts:
        level = "conflicting"
    elif decision is Decision.CORRECT and 2 * len(answered) >= len(aspects):
        level = "sufficient"
    else:
        level = "partial" if answered else "insufficient"
    return ContextQuality(level, answered, missing, "heuristic", list(conflicts))
