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

__all__ = ["ContextQuality", "aspects_of", "heuristic_quality"]

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


def aspects_of(query: str) -> list[str]:
    """Content terms of the question, in order and without repeats."""
    seen: list[str] = []
    for word in content_words(re.findall(r"[\w'-]+", query)):
        if len(word) > 2 and word.lower() not in (s.lower() for s in seen):
            seen.append(word)
    return seen


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
