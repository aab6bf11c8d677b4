"""The escalation cascade: the small model decides what it is sure of, an LLM judges only the rest.

``CascadeGrader(primary=..., escalate_to=..., policy=...)`` is itself a Grader. Chunks whose calibrated
probability falls inside the policy's band go to the LLM, most uncertain first, within a per-query
budget (LLM calls, deadline, cost). A chunk the LLM could not judge keeps the small model's verdict,
marked ``escalation_failed`` with the reason. Escalations can be logged (opt-in JSONL, in the
labelled-pair format) and fed back into ``crag train``.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from grader.cross_encoder import CrossEncoderGrader
from grader.llm import LLMFailure, LLMGrader, LLMJudgement
from grader.llm_prompts import PROMPT_VERSION
from grader.policy import ThresholdPolicy
from grader.protocol import PolicyGrader, check_grader
from grader.thresholds import ThresholdChoice, choose_thresholds
from models.errors import ConfigError
from models.field_types import check_field_types
from models.tracing import span
from models.types import Chunk, Grade, as_chunk

__all__ = ["NO_LLM", "Budget", "CascadeGrader", "llm_outage", "policy_for_target"]

logger = logging.getLogger(__name__)
NO_LLM = "no LLM configured"


def llm_outage(grade: Grade) -> bool:
    """True when the LLM was asked for this chunk and failed, i.e. the grade is degraded; a spent budget or a
    cascade without an LLM is a deliberate limit, not an outage."""
    reason = grade.reason or ""
    return grade.escalation_failed and "budget" not in reason and NO_LLM not in reason


@dataclass(frozen=True, kw_only=True)
class Budget:
    """Per-query limits on escalation; ``None`` means unlimited."""

    max_llm_calls: int | None = None
    deadline_s: float | None = None
    max_cost_usd: float | None = None

    def __post_init__(self) -> None:
        check_field_types(self)
        for name in ("max_llm_calls", "deadline_s", "max_cost_usd"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ConfigError(f"Budget.{name} must be >= 0 or None, got {value}")


def policy_for_target(
    primary: CrossEncoderGrader,
    pairs: Sequence[tuple[str, str]],
    labels: Sequence[int],
    *,
    max_error: float | None = None,
    max_escalation: float | None = None,
    delta: float | None = None,
) -> ThresholdChoice:
    """Thresholds for a target chosen on a labelled calibration set scored by ``primary`` (a guarantee counts
    the pairs of one query as the clustered draws they are)."""
    probs = primary.probabilities(primary.score_pairs(list(pairs)).logits)
    return choose_thresholds(probs, list(labels), max_error=max_error, max_escalation=max_escalation, delta=delta,
                             clusters=[query for query, _ in pairs])


def _writable_log(path: Path) -> Path:
    """``path`` once its folder exists and it can be appended to; checked when the cascade is made, not after the
    first LLM judgement has been paid for."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8"):
            pass
    except OSError as exc:
        raise ConfigError(f"escalation_log {str(path)!r} cannot be written ({exc.strerror or exc}); pass a file "
                          "in a folder you can write to") from exc
    return path


class CascadeGrader:
    """A Grader that escalates the small model's uncertain chunks to an LLM grader."""

    def __init__(
        self,
        *,
        primary: PolicyGrader,
        escalate_to: LLMGrader | None,
        policy: ThresholdPolicy | None = None,
        budget: Budget | None = None,
        escalation_log: str | Path | None = None,
    ) -> None:
        check_grader(primary, "primary")
        if escalate_to is not None and not callable(getattr(escalate_to, "judge", None)):
            raise ConfigError(f"escalate_to must be an LLMGrader (or None: the band is flagged, not judged), got "
                              f"{type(escalate_to).__name__}")
        chosen = policy if policy is not None else getattr(primary, "policy", None)
        if not isinstance(chosen, ThresholdPolicy):
            raise ConfigError(f"the cascade needs a ThresholdPolicy: pass policy=... (the primary grader has none of "
                              f"its own), got {type(chosen).__name__}")
        if budget is not None and not isinstance(budget, Budget):
            raise ConfigError(f"budget must be a Budget(max_llm_calls=..., deadline_s=..., max_cost_usd=...), got "
                              f"{type(budget).__name__}")
        self.primary = primary
        self.llm = escalate_to
        self.policy = chosen
        self.answer_floor: float | None = getattr(primary, "answer_floor", None)
        self.budget = budget or Budget()
        self.escalation_log = _writable_log(Path(escalation_log)) if escalation_log else None
        self._log_lock = threading.Lock()
        self._log_failed = False

    def grade(self, query: str, chunks: Sequence[Chunk | str]) -> list[Grade]:
        """One Grade per chunk, in order; uncertain ones decided by the LLM when it can."""
        return self.grade_within(query, chunks)[0]

    def upper_bounds(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """The most each text could be graded: the small model's bound where it stays below the band (never
        escalated, so the model's grade stands), 1.0 where the LLM might judge it (or the primary cannot tell)."""
        bounds = getattr(self.primary, "upper_bounds", None)
        if bounds is None:
            return np.ones(len(texts))
        highest = np.asarray(bounds(query, texts), dtype=np.float64)
        return np.where(highest < self.policy.lower, highest, 1.0)

    def grade_within(self, query: str, chunks: Sequence[Chunk | str], *, max_llm_calls: int | None = None,
                     deadline: float | None = None, primary_grades: Sequence[Grade] | None = None,
                     settle_below: float | None = None) -> tuple[list[Grade], int]:
        """Like :meth:`grade`, under a caller's budget as well as the grader's own; returns (grades, LLM calls).

        The corrective pipeline uses this to keep one LLM-call budget across grading, generation and checks.
        ``deadline`` is a ``time.monotonic()`` instant. ``primary_grades`` skips the small model when the
        caller already scored these chunks with it (the service's micro-batcher does). ``settle_below``: passed
        to a ``CrossEncoderGrader`` primary at the lower of it and the band's lower end, so that what it settles
        on the cosine is never what the band would have sent to the LLM.
        """
        items = [as_chunk(c) for c in chunks]
        start = time.monotonic()
        if primary_grades is not None and len(primary_grades) != len(items):
            raise ConfigError(f"primary_grades has {len(primary_grades)} grades for {len(items)} chunks")
        if primary_grades is not None:
            first = list(primary_grades)
        elif settle_below is not None and isinstance(self.primary, CrossEncoderGrader):
            first = self.primary.grade(query, items, settle_below=min(settle_below, self.policy.lower))
        else:
            first = self.primary.grade(query, items)
        grades = [self._rebanded(g) for g in first]
        band = [i for i, g in enumerate(grades) if g.uncertain and g.decided_by == "model"]
        if not band:
            return grades, 0
        if self.llm is None:
            return [self._flag(g, NO_LLM) if i in band else g for i, g in enumerate(grades)], 0
        band.sort(key=lambda i: abs(grades[i].probability - self.policy.decision))
        own_deadline = start + self.budget.deadline_s if self.budget.deadline_s is not None else None
        deadlines = [d for d in (own_deadline, deadline) if d is not None]
        calls = [c for c in (self.budget.max_llm_calls, max_llm_calls) if c is not None]
        with span("crag.escalate", **{"crag.chunks": len(band)}) as escalation:
            results = self.llm.judge(query, [items[i].text for i in band], max_calls=min(calls) if calls else None,
                                     deadline=min(deadlines) if deadlines else None,
                                     max_cost_usd=self.budget.max_cost_usd)
            if escalation is not None:
                escalation.set_attribute("crag.failures", sum(isinstance(r, LLMFailure) for r in results))
        out = list(grades)
        attempted = 0
        for i, result in zip(band, results, strict=True):
            if isinstance(result, LLMFailure):
                out[i] = self._flag(grades[i], result.reason)
                attempted += not result.reason.startswith(("budget", "circuit open"))
            else:
                out[i] = self._escalated(grades[i], result)
                attempted += not result.cached
                self._log(query, items[i], grades[i], result)
        return out, -(-attempted // self.llm.config.chunks_per_call)

    def _rebanded(self, grade: Grade) -> Grade:
        if grade.decided_by != "model":
            return grade
        verdict, uncertain = self.policy.verdict(grade.probability, withheld=grade.withheld)
        return replace(grade, verdict=verdict, uncertain=uncertain)

    @staticmethod
    def _flag(grade: Grade, reason: str) -> Grade:
        why = f"escalation failed: {reason}"  # what the model's grade already said (truncation, a swap) is kept
        return replace(grade, escalation_failed=True, reason=f"{why}; {grade.reason}" if grade.reason else why)

    @staticmethod
    def _escalated(grade: Grade, judgement: LLMJudgement) -> Grade:
        return replace(
            grade, verdict=judgement.verdict, decided_by="llm", uncertain=False, llm_verdict=judgement.verdict,
            llm_probability=judgement.probability, reason=judgement.reason or None,
            latency_ms=grade.latency_ms + judgement.latency_ms, cost_usd=grade.cost_usd + judgement.cost_usd,
        )

    def _log(self, query: str, chunk: Chunk, grade: Grade, judgement: LLMJudgement) -> None:
        if self.escalation_log is None:
            return
        record: dict[str, Any] = {
            "query": query, "text": chunk.text, "label": judgement.verdict.value, "chunk_id": chunk.chunk_id,
            "source": chunk.source,
            "metadata": {"labelled_by": "llm", "llm_model": self.llm.model if self.llm else None,
                         "prompt_version": PROMPT_VERSION, "model_probability": grade.probability,
                         "reason": judgement.reason, "logged_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
        }
        line = json.dumps(record, ensure_ascii=False) + "\n"
        with self._log_lock:
            try:
                with self.escalation_log.open("a", encoding="utf-8") as handle:
                    handle.write(line)
            except OSError as exc:  # the judgement is paid for and returned; only its record is lost
                if not self._log_failed:
                    logger.warning("cannot write the escalation log %s (%s); grading goes on without it",
                                   self.escalation_log, exc)
                self._log_failed = True
