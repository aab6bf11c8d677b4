"""The corrective orchestrator: retrieve -> check -> grade -> decide -> correct -> answer, bounded and traced.

Grader-only mode (no LLM anywhere) answers extractively from refined strips, which are verbatim
sentences of readable chunks, so every claim is grounded by construction; otherwise it abstains.
The loop is bounded by rounds and a deadline and always terminates; each step lands in the trace.
"""

from __future__ import annotations

import enum
import re
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from grader.policy import ThresholdPolicy, decide
from grader.protocol import Grader
from models.errors import ConfigError
from models.types import Chunk, Decision, Grade, Verdict
from pipeline.correction import Strip, drop_bad_chunks, order_by_authority, refine, rewrite_query
from pipeline.documents import Principal, StoredChunk
from pipeline.index import Retriever

__all__ = ["CorrectiveRAG", "Outcome", "RAGConfig", "RAGResult", "TraceStep"]


class Outcome(str, enum.Enum):
    ANSWER = "answer"
    PARTIAL_ANSWER = "partial_answer"
    CLARIFICATION = "clarification"
    ABSTENTION = "abstention"
    ACCESS_DENIED = "access_denied"


@dataclass(frozen=True, kw_only=True)
class RAGConfig:
    k: int = 6
    broader_k: int = 16
    max_rounds: int = 3
    deadline_s: float = 20.0
    strip_token_budget: int = 120
    min_query_words: int = 2

    def __post_init__(self) -> None:
        if self.k < 1 or self.broader_k < self.k or self.max_rounds < 1 or self.deadline_s <= 0:
            raise ConfigError(f"invalid RAGConfig {self}: need k >= 1, broader_k >= k, max_rounds >= 1, deadline > 0")


@dataclass
class TraceStep:
    action: str
    detail: dict[str, Any]
    ms: float


@dataclass
class RAGResult:
    outcome: Outcome
    message: str
    answer: str | None
    sources: list[dict[str, Any]]
    decision: Decision | None
    trace: list[TraceStep] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["outcome"] = self.outcome.value
        out["decision"] = self.decision.value if self.decision else None
        return out


class CorrectiveRAG:
    """Corrective RAG over a permission-aware retriever and any Grader (the cascade or the model alone)."""

    def __init__(self, retriever: Retriever, grader: Grader, *, policy: ThresholdPolicy | None = None,
                 config: RAGConfig | None = None) -> None:
        self.retriever = retriever
        self.grader = grader
        self.policy = policy or getattr(grader, "policy", None) or ThresholdPolicy()
        self.config = config or RAGConfig()

    def run(self, query: str, principal: Principal) -> RAGResult:
        if not isinstance(query, str) or not query.strip():
            raise ConfigError(f"query must be a non-empty string, got {query!r:.80}")
        trace: list[TraceStep] = []
        start = time.monotonic()

        def step(action: str, t0: float, **detail: Any) -> None:
            trace.append(TraceStep(action, detail, round(1000 * (time.monotonic() - t0), 2)))

        content_words = [w for w in re.findall(r"\w+", query) if len(w) > 2]
        if len(content_words) < self.config.min_query_words:
            step("clarify", start, reason="query too short to retrieve on", words=content_words)
            return RAGResult(Outcome.CLARIFICATION, "Could you say more about what you are looking for?", None,
                             [], None, trace)
        tiers = [("initial search", query, self.config.k)]
        rewritten = rewrite_query(query)
        tiers.append(("rewrite + broader search", rewritten, self.config.broader_k))
        pool: dict[str, tuple[StoredChunk, Grade]] = {}
        decision: Decision | None = None
        for round_no, (strategy, current, k) in enumerate(tiers[: self.config.max_rounds], start=1):
            if time.monotonic() - start > self.config.deadline_s:
                step("stop", time.monotonic(), reason="deadline reached")
                break
            if round_no > 1:
                step("correct", time.monotonic(), strategy=strategy, rewritten=current, k=k)
            t0 = time.monotonic()
            hits = [c for c, _ in self.retriever.search(current, principal, k=k)]
            step("retrieve", t0, round=round_no, query=current, k=k, hits=[c.chunk_id for c in hits])
            t0 = time.monotonic()
            hits, dropped = drop_bad_chunks([c for c in hits if c.chunk_id not in pool])
            hits, conflicts = order_by_authority(hits)
            step("check", t0, kept=len(hits), dropped=dropped, conflicts=conflicts)
            if hits:
                t0 = time.monotonic()
                grades = self.grader.grade(query, [Chunk(text=c.text, chunk_id=c.chunk_id) for c in hits])
                pool.update({c.chunk_id: (c, g) for c, g in zip(hits, grades, strict=True)})
                step("grade", t0, grades={c.chunk_id: {"p": round(g.probability, 4), "verdict": g.verdict.value,
                                                      "by": g.decided_by, "uncertain": g.uncertain}
                                          for c, g in zip(hits, grades, strict=True)})
            decision = decide([g for _, g in pool.values()], self.policy)
            step("decide", time.monotonic(), decision=decision.value, round=round_no)
            if decision is Decision.CORRECT:
                break
        return self._answer(query, principal, pool, decision, trace, step)

    def _answer(self, query: str, principal: Principal, pool: dict[str, tuple[StoredChunk, Grade]],
                decision: Decision | None, trace: list[TraceStep], step: Any) -> RAGResult:
        usable = [c for c, g in pool.values() if g.verdict is not Verdict.IRRELEVANT or g.uncertain]
        if not pool or not usable:
            t0 = time.monotonic()
            hidden = self.retriever.hidden_matches(query, principal)
            step("access_check", t0, hidden_matches=hidden > 0)
            if hidden:
                return RAGResult(Outcome.ACCESS_DENIED, "Documents that may answer this exist, but your account "
                                 "does not have access to them. Ask an administrator for access.", None, [],
                                 decision, trace)
            return RAGResult(Outcome.ABSTENTION, "I could not find documents that answer this question, so I am "
                             "not answering rather than guessing.", None, [], decision, trace)
        t0 = time.monotonic()
        strips = refine(query, usable, self.grader, token_budget=self.config.strip_token_budget)
        step("refine", t0, strips=[{"chunk": s.chunk_id, "p": round(s.grade.probability, 4)} for s in strips])
        confident = [s for s in strips if s.grade.probability >= self.policy.upper]
        chosen = confident or [s for s in strips if s.grade.probability > self.policy.lower]
        if not chosen:
            return RAGResult(Outcome.ABSTENTION, "The retrieved passages do not contain an answer, so I am not "
                             "answering rather than guessing.", None, [], decision, trace)
        answer = _extractive(chosen)
        sources = _sources(chosen, pool)
        step("generate", time.monotonic(), mode="extractive (grader-only)", grounding="verbatim strips")
        if decision is Decision.CORRECT and confident:
            return RAGResult(Outcome.ANSWER, "Answer drawn from the cited passages.", answer, sources, decision,
                             trace)
        return RAGResult(Outcome.PARTIAL_ANSWER, "Partial answer: the passages below are related but none clearly "
                         "answers the whole question; treat it as incomplete.", answer, sources, decision, trace)


def _extractive(strips: list[Strip]) -> str:
    return " ".join(f"{s.text} [{s.chunk_id}]" for s in strips)


def _sources(strips: list[Strip], pool: dict[str, tuple[StoredChunk, Grade]]) -> list[dict[str, Any]]:
    seen: list[str] = []
    for s in strips:
        if s.chunk_id not in seen:
            seen.append(s.chunk_id)
    return [{"chunk_id": cid, "source": pool[cid][0].source, "title": pool[cid][0].title,
             "probability": round(pool[cid][1].probability, 4)} for cid in seen]
