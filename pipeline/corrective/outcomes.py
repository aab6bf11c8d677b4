"""What the corrective pipeline returns: the outcome, the user-facing message, sources and the trace."""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field
from typing import Any

from models.types import Decision

__all__ = ["Outcome", "RAGResult", "Trace", "TraceStep"]


class Outcome(str, enum.Enum):
    ANSWER = "answer"
    PARTIAL_ANSWER = "partial_answer"
    CLARIFICATION = "clarification"
    ABSTENTION = "abstention"
    ACCESS_DENIED = "access_denied"


@dataclass
class TraceStep:
    action: str
    detail: dict[str, Any]
    ms: float
    started: float = field(default=0.0, repr=False, compare=False)  # wall clock (s since epoch), for spans


class Trace:
    """The ordered steps of one run; ``step`` records an action with the time since ``t0``."""

    def __init__(self) -> None:
        self.steps: list[TraceStep] = []

    def step(self, action: str, t0: float, **detail: Any) -> None:
        elapsed = time.monotonic() - t0
        self.steps.append(TraceStep(action, detail, round(1000 * elapsed, 2), started=time.time() - elapsed))


@dataclass
class RAGResult:
    """One answer (or refusal) with everything needed to audit it.

    ``grounding`` is ``extractive`` (verbatim strips, no LLM), ``verified`` (every claim checked),
    ``needs_revision`` (unsupported claims were removed; see ``message``), ``unverified`` (the verifier
    was unavailable: ``degraded`` is set) or ``none`` (no answer given).
    """

    outcome: Outcome
    message: str
    answer: str | None
    sources: list[dict[str, Any]]
    decision: Decision | None
    trace: list[TraceStep] = field(default_factory=list)
    quality: dict[str, Any] | None = None
    grounding: str = "none"
    degraded: bool = False
    degraded_reasons: list[str] = field(default_factory=list)
    llm_calls: int = 0
    tier: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome.value, "message": self.message, "answer": self.answer, "sources": self.sources,
            "decision": self.decision.value if self.decision else None, "quality": self.quality,
            "grounding": self.grounding, "degraded": self.degraded, "degraded_reasons": self.degraded_reasons,
            "llm_calls": self.llm_calls, "tier": self.tier,
            "trace": [{"action": t.action, "detail": t.detail, "ms": t.ms} for t in self.trace],
        }
