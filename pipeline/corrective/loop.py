"""The corrective orchestrator: retrieve -> check -> grade -> decide -> correct -> generate -> ground.

A bounded state machine over fallback tiers, each a different strategy: the caller's search, then a
rewritten query with a larger k, then web search (if a provider is configured and the privacy guard allows),
then abstention. It stops at CORRECT, at ``max_rounds``, or at the deadline; one LLM-call budget covers
grading escalations, context checks, generation and grounding. Permissions are never relaxed: they live
inside the retriever; nor are the caller's filters (``{"status": "active"}`` must not come back as a
superseded policy, ``{"product": "X200"}`` as another product's manual): the broader search keeps them. Every
step lands in the trace.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from typing import Any

from grader.cascade import CascadeGrader, llm_outage
from grader.cross_encoder import CrossEncoderGrader
from grader.policy import ThresholdPolicy, decide
from grader.protocol import Grader, check_grader
from models.errors import ConfigError, LLMError
from models.tracing import span
from models.types import Chunk, Decision, Grade, Verdict, is_blank
from pipeline.corrective.answering import ANSWER_LLM_CALLS, Answerer, Draft
from pipeline.corrective.context_quality import ContextQuality, heuristic_quality
from pipeline.corrective.correction import (
    drop_bad_chunks,
    first_search,
    order_by_authority,
    refine,
    rewrite_query,
)
from pipeline.corrective.generation import Evidence, LLMAnswerer
from pipeline.corrective.outcomes import Outcome, RAGResult, TraceStep
from pipeline.corrective.state import RAGConfig, RunState
from pipeline.corrective.telemetry import record_run, run_attributes
from pipeline.retrieval.documents import Principal, StoredChunk, check_principal
from pipeline.retrieval.index import Retriever
from pipeline.retrieval.web_search import PrivacyGuard, WebSearchError, WebSearchProvider

__all__ = ["CorrectiveRAG", "Outcome", "RAGConfig", "RAGResult", "RunState", "TraceStep"]


class _BudgetedGrader:
    """The pipeline's grader as seen by refinement: same model, same shared LLM budget."""

    def __init__(self, rag: CorrectiveRAG, state: RunState) -> None:
        self.rag, self.state = rag, state

    def grade(self, query: str, chunks: Sequence[Chunk | str]) -> list[Grade]:
        return self.rag._grade(query, [c if isinstance(c, Chunk) else Chunk(text=c) for c in chunks], self.state)

    def upper_bounds(self, query: str, texts: Sequence[str]) -> Sequence[float]:
        """The grader's own bounds (``CrossEncoderGrader.upper_bounds``); 1.0 for every text when it has none."""
        bounds = getattr(self.rag.grader, "upper_bounds", None)
        return [1.0] * len(texts) if bounds is None else bounds(query, texts)


def _check_parts(retriever: object, grader: object, policy: object, config: object, privacy: object) -> None:
    """Refuse, when the pipeline is made, a part that would fail in the middle of a question."""
    missing = [m for m in ("search", "hidden_matches") if not callable(getattr(retriever, m, None))]
    if missing:
        raise ConfigError(f"retriever must have search() and hidden_matches() (the Retriever protocol; "
                          f"LocalHybridIndex, QdrantRetriever), got {type(retriever).__name__} without "
                          f"{' and '.join(missing)}()")
    check_grader(grader)
    for name, value, kind in (("policy", policy, ThresholdPolicy), ("config", config, RAGConfig),
                              ("privacy", privacy, PrivacyGuard)):
        if value is not None and not isinstance(value, kind):
            raise ConfigError(f"{name} must be a {kind.__name__} or None, got {type(value).__name__}: {value!r:.80}")


class CorrectiveRAG:
    """Corrective RAG over a permission-aware retriever and any Grader (the cascade or the model alone).

    ``answerer`` (an :class:`LLMAnswerer`) enables LLM generation with a grounding check; without it
    the pipeline answers extractively from refined strips (grader-only mode) or abstains.
    """

    def __init__(self, retriever: Retriever, grader: Grader, *, policy: ThresholdPolicy | None = None,
                 config: RAGConfig | None = None, answerer: LLMAnswerer | None = None,
                 web: WebSearchProvider | None = None, privacy: PrivacyGuard | None = None) -> None:
        _check_parts(retriever, grader, policy, config, privacy)
        self.retriever = retriever
        self.grader = grader
        self.policy = policy or getattr(grader, "policy", None) or ThresholdPolicy()
        self.config = config or RAGConfig()
        floor = self.config.answer_floor
        self.answer_floor: float = (getattr(grader, "answer_floor", None) or 0.0) if floor is None else floor
        self.llm = answerer
        self.web = web
        self.privacy = privacy or PrivacyGuard()

    # ----- the loop ------------------------------------------------------------------------------
    def run(self, query: str, principal: Principal, *, filters: dict[str, Any] | None = None,
            confidential: bool = False) -> RAGResult:
        """Answer, partially answer, ask to clarify, abstain or report access denied; never raises on an
        outside failure (the LLM or web search), which degrades the result and is flagged instead.
        With the ``otel`` extra, the run and each of its steps are OpenTelemetry spans."""
        with span("crag.run") as run_span:
            result = self._run(query, principal, filters=filters, confidential=confidential)
            if run_span is not None:
                run_span.set_attributes(run_attributes(result))
                record_run(result)
        return result

    def _run(self, query: str, principal: Principal, *, filters: dict[str, Any] | None,
             confidential: bool) -> RAGResult:
        if not isinstance(query, str) or is_blank(query):
            raise ConfigError(f"query must be a non-empty string, got {query!r:.80}")
        if len(query) > self.config.max_query_chars:
            raise ConfigError(f"query is {len(query)} characters; the limit is {self.config.max_query_chars}")
        check_principal(principal)  # who may read what: never guessed from a bare tenant name
        state = RunState(self.config)
        content_words = [w for w in re.findall(r"\w+", query) if len(w) > 2]
        if len(content_words) < self.config.min_query_words:
            state.trace.step("clarify", state.start, reason="query too short to retrieve on", words=content_words)
            return self._result(state, Outcome.CLARIFICATION, "Your question is too short to search on. Could you "
                                "say what you want to know, e.g. which document, product or period it is about?")
        pool: dict[str, tuple[StoredChunk, Grade]] = {}
        decision: Decision | None = None
        state.first_query = first_search(query)  # a long message: its question
        current, tier_used, conflicts = state.first_query, "", []
        tiers = [("initial search", self.config.k, False), ("rewrite + broader search", self.config.broader_k, False),
                 ("web search", self.config.web_k, True)]
        rounds = 0
        for name, k, is_web in tiers:
            if rounds >= self.config.max_rounds:
                break
            if state.expired():
                state.trace.step("stop", time.monotonic(), reason="deadline reached")
                break
            if rounds:
                state.trace.step("correct", time.monotonic(), strategy=name, query=current, k=k)
            hits = self._web_hits(query, current, k, confidential, state) if is_web else \
                self._index_hits(current, principal, k, filters, state, rounds + 1)  # every index search: filtered
            if hits is None:
                continue
            rounds += 1
            tier_used = name
            t0 = time.monotonic()
            hits, dropped = drop_bad_chunks([c for c in hits if c.chunk_id not in pool])
            hits, new_conflicts = order_by_authority(hits)
            conflicts += new_conflicts
            state.trace.step("check", t0, kept=len(hits), dropped=dropped, conflicts=new_conflicts)
            if hits:
                self._grade_into(query, hits, pool, state)
            decision = decide([g for _, g in pool.values()], self.policy)
            state.trace.step("decide", time.monotonic(), decision=decision.value, round=rounds)
            if decision is Decision.CORRECT:
                break
            quality = self._assess(query, pool, decision, conflicts, state)
            current = self._rewrite(query, quality.missing_aspects, state)
        state.tier = tier_used
        return self._answer(query, principal, pool, decision, conflicts, state, filters)

    def _index_hits(self, query: str, principal: Principal, k: int, filters: dict[str, Any] | None,
                    state: RunState, round_no: int) -> list[StoredChunk]:
        t0 = time.monotonic()
        hits = [c for c, _ in self.retriever.search(query, principal, k=k, filters=filters)]
        state.index_hits += len(hits)
        state.trace.step("retrieve", t0, round=round_no, query=query, k=k, filters=filters or {},
                         hits=[c.chunk_id for c in hits])
        return hits

    def _web_hits(self, query: str, current: str, k: int, confidential: bool,
                  state: RunState) -> list[StoredChunk] | None:
        """Web results, or None when this tier is skipped (no provider, private query, provider down)."""
        t0 = time.monotonic()
        if self.web is None:
            state.trace.step("web_search", t0, skipped="no web search provider configured")
            return None
        blocked = self.privacy.blocked_reason(query, confidential=confidential) or \
            self.privacy.blocked_reason(current)
        if blocked:
            state.trace.step("web_search", t0, skipped=f"privacy rule: {blocked}; the query was not sent")
            return None
        try:
            hits = self.web.search(current, k=k)
        except WebSearchError as exc:
            state.degrade(f"web search unavailable: {exc}")
            state.trace.step("web_search", t0, provider=self.web.name, error=str(exc))
            return None
        state.trace.step("web_search", t0, provider=self.web.name, query=current,
                         hits=[{"id": c.chunk_id, "url": c.metadata.get("url")} for c in hits])
        return hits

    def _escalation_budget(self, state: RunState) -> int:
        """LLM calls that escalations and context checks may spend: what is left of the run's budget, less the
        calls an LLM-written answer needs (write and verify), so grading never leaves the answer to be made
        without the LLM that was configured to write it."""
        reserve = ANSWER_LLM_CALLS if self.llm is not None else 0
        return max(0, state.llm_left() - reserve)

    def _grade(self, query: str, chunks: list[Chunk], state: RunState, *, settle: bool = False) -> list[Grade]:
        """Grades within the run's LLM budget. ``settle``: chunks the grader's cosine alone keeps below the lower
        threshold are decided irrelevant without its cross-encoder (``CrossEncoderGrader.grade``), as their
        exact grade would be; refinement's strips are not settled (their probability ranks them)."""
        below = self.policy.lower if settle else None
        within = getattr(self.grader, "grade_within", None)
        if within is None:
            if below is not None and isinstance(self.grader, CrossEncoderGrader):
                return self.grader.grade(query, chunks, settle_below=below)
            return self.grader.grade(query, chunks)
        options = {"settle_below": below} if isinstance(self.grader, CascadeGrader) else {}
        grades, calls = within(query, chunks, max_llm_calls=self._escalation_budget(state), deadline=state.deadline,
                               **options)
        state.llm_calls += calls
        for grade in grades:
            if llm_outage(grade):
                state.degrade(f"LLM grader unavailable, the small model's grade was kept ({grade.reason})")
        return grades

    def _grade_into(self, query: str, hits: list[StoredChunk], pool: dict[str, tuple[StoredChunk, Grade]],
                    state: RunState) -> None:
        t0 = time.monotonic()
        grades = self._grade(query, [Chunk(text=c.text, chunk_id=c.chunk_id) for c in hits], state, settle=True)
        pool.update({c.chunk_id: (c, g) for c, g in zip(hits, grades, strict=True)})
        state.trace.step("grade", t0, llm_calls_so_far=state.llm_calls, grades={
            c.chunk_id: {"p": round(g.probability, 4), "verdict": g.verdict.value, "by": g.decided_by,
                         "uncertain": g.uncertain, **({"escalation": g.reason} if g.escalation_failed else {})}
            for c, g in zip(hits, grades, strict=True)})

    def _assess(self, query: str, pool: dict[str, tuple[StoredChunk, Grade]], decision: Decision,
                conflicts: list[str], state: RunState) -> ContextQuality:
        """Heuristic quality; the LLM's when the decision is AMBIGUOUS, an LLM is set and the budget allows."""
        t0 = time.monotonic()
        positive = [c for c, g in pool.values() if g.verdict.is_positive or g.uncertain]
        quality = heuristic_quality(query, [c.text for c in positive], decision, conflicts)
        if decision is Decision.AMBIGUOUS and self.llm is not None and self._escalation_budget(state) and positive:
            state.llm_calls += 1
            try:
                judged = self.llm.assess(query, [Evidence(c.chunk_id, c.text) for c in positive[:6]],
                                         deadline=state.deadline)
                quality = ContextQuality(judged.quality, judged.answered_aspects, judged.missing_aspects, "llm",
                                         conflicts)
            except LLMError as exc:
                state.degrade(f"LLM context check unavailable, heuristic used ({exc})")
        state.trace.step("assess", t0, **quality.to_dict())
        return quality

    def _rewrite(self, query: str, missing: list[str], state: RunState) -> str:
        t0 = time.monotonic()
        rewritten = rewrite_query(query, missing)
        state.trace.step("rewrite", t0, rewritten=rewritten, missing_aspects=missing,
                         kept_raw_query=rewritten == query)
        return rewritten

    # ----- answering -----------------------------------------------------------------------------
    def _answer(self, query: str, principal: Principal, pool: dict[str, tuple[StoredChunk, Grade]],
                decision: Decision | None, conflicts: list[str], state: RunState,
                filters: dict[str, Any] | None = None) -> RAGResult:
        usable = [c for c, g in pool.values() if g.verdict is not Verdict.IRRELEVANT or g.uncertain]
        if filters and not pool and not state.index_hits:  # no search found anything: name the filters
            shown = ", ".join(f"{key}={value!r}" for key, value in filters.items())
            return self._result(state, Outcome.ABSTENTION, f"No document you can read matches the filters {shown}, "
                                "so I am not answering. Check each filter's name and value (a field such as status "
                                "or document, or a metadata key of your documents), or ask without them.",
                                decision=decision)
        if not usable:
            t0 = time.monotonic()
            coverage = self.config.access_denied_min_coverage
            hidden = 0 if coverage is None else self.retriever.hidden_matches(state.first_query, principal,
                                                                             min_coverage=coverage)
            state.trace.step("access_check", t0, hidden_matches=hidden > 0)
            if hidden:
                return self._result(state, Outcome.ACCESS_DENIED, "Documents that may answer this exist, but your "
                                    "account does not have access to them. Ask an administrator for access.",
                                    decision=decision)
            return self._result(state, Outcome.ABSTENTION, "I could not find documents that answer this question, "
                                "so I am not answering rather than guessing.", decision=decision)
        answerer = Answerer(self.policy, self.llm, pool, state, min_probability=self.config.min_answer_probability,
                            answer_floor=self.answer_floor)
        t0 = time.monotonic()
        early = answerer.floor_abstention()
        if early is not None:  # no strip could change it: none is graded
            state.trace.step("compose", t0, outcome=early.outcome.value, grounding="none",
                             reason="no chunk reaches the answerability floor", floor=self.answer_floor)
            return self._from_draft(state, early, decision)
        strips = refine(query, usable, _BudgetedGrader(self, state), token_budget=self.config.strip_token_budget,
                        relative_floor=self.config.strip_relative_floor)
        state.trace.step("refine", t0, strips=[{"chunk": s.chunk_id, "p": round(s.grade.probability, 4)}
                                               for s in strips])
        t0 = time.monotonic()
        draft = answerer.compose(query, strips, decision, conflicts)
        quality = draft.quality or {}
        state.trace.step("compose", t0, outcome=draft.outcome.value, grounding=draft.grounding,
                         level=quality.get("level"), missing_aspects=quality.get("missing_aspects", []),
                         sources=[s["chunk_id"] for s in draft.sources or []])
        return self._from_draft(state, draft, decision)

    def _from_draft(self, state: RunState, draft: Draft, decision: Decision | None) -> RAGResult:
        return self._result(state, draft.outcome, draft.message, answer=draft.answer, sources=draft.sources,
                            decision=decision, quality=draft.quality, grounding=draft.grounding)

    @staticmethod
    def _result(state: RunState, outcome: Outcome, message: str, *, answer: str | None = None,
                sources: list[dict[str, Any]] | None = None, decision: Decision | None = None,
                quality: dict[str, Any] | None = None, grounding: str = "none") -> RAGResult:
        return RAGResult(outcome, message, answer, sources or [], decision, state.trace.steps, quality=quality,
                         grounding=grounding, degraded=bool(state.degraded), degraded_reasons=list(state.degraded),
                         llm_calls=state.llm_calls, tier=state.tier)
