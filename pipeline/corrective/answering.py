"""From refined strips to one of the outcomes: extractive (grader-only) or LLM-written and grounding-checked.

Rules, in order:
- no strip above the policy's lower bound (or ``min_answer_probability`` when set higher): abstain;
- answering without an LLM (grader-only, or the LLM failed or its budget is spent): abstain unless some
  chunk reaches the answerability floor (or the LLM grader judged one relevant): related text is not an answer.
  The loop asks :meth:`Answerer.floor_abstention` before refining, so such a run grades no strips;
- knowledge synthesis from weak evidence (only strips inside the uncertain band) needs at least one of
  them to come from a real document of the caller's, not only from the web; never from nothing;
- with an LLM and at least two calls left (one to write, one to verify): generate with citations,
  check every claim, revise once if the budget allows, then drop what stays unsupported
  (``needs_revision``) or abstain when nothing is supported;
- otherwise, or when the LLM fails: the verbatim strips, cited, which are grounded by construction.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath, PureWindowsPath
from typing import Any

from grader.cross_encoder import is_settled
from grader.policy import ThresholdPolicy
from models.errors import LLMError
from models.types import Decision, Grade, Verdict
from pipeline.corrective.context_quality import ContextQuality, heuristic_quality
from pipeline.corrective.correction import Strip
from pipeline.corrective.generation import Claim, Evidence, GeneratedAnswer, GroundingResult, LLMAnswerer
from pipeline.corrective.outcomes import Outcome
from pipeline.corrective.state import RunState
from pipeline.retrieval.documents import StoredChunk
from pipeline.retrieval.strips import FENCE, TABLE_ROW

__all__ = ["ANSWER_LLM_CALLS", "Answerer", "Draft"]

ANSWER_LLM_CALLS = 2  # an LLM-written answer: one call to write it, one to verify its claims

NO_ANSWER = "The retrieved passages do not contain an answer, so I am not answering rather than guessing."


@dataclass
class Draft:
    outcome: Outcome
    message: str
    answer: str | None = None
    sources: list[dict[str, Any]] | None = None
    quality: dict[str, Any] | None = None
    grounding: str = "none"


class Answerer:
    """Composes the final answer for one run, spending the run's LLM budget."""

    def __init__(self, policy: ThresholdPolicy, llm: LLMAnswerer | None,
                 pool: dict[str, tuple[StoredChunk, Grade]], state: RunState, *,
                 min_probability: float | None = None, answer_floor: float = 0.0) -> None:
        self.policy, self.llm, self.pool, self.state = policy, llm, pool, state
        self.floor = policy.lower if min_probability is None else max(policy.lower, min_probability)
        self.answer_floor = answer_floor

    def compose(self, query: str, strips: Sequence[Strip], decision: Decision | None,
                conflicts: Sequence[str]) -> Draft:
        confident = [s for s in strips if s.grade.probability >= self.policy.upper]
        weak = [s for s in strips if self.floor < s.grade.probability < self.policy.upper]
        chosen = _with_completions(confident or weak, strips)
        if not chosen:
            return Draft(Outcome.ABSTENTION, NO_ANSWER)
        if not confident and all(self.pool[s.chunk_id][0].source == "web" for s in weak):
            return Draft(Outcome.ABSTENTION, "Only weak web results touch on this and none of your documents "
                         "supports them, so I am not answering rather than guessing.")
        ids = {s.chunk_id for s in chosen}
        relevant_conflicts = [c for c in conflicts if any(cid in c for cid in ids)]
        shown = [f"{s.section}: {s.text}" if s.section else s.text for s in chosen]  # a strip reads under its section
        quality = heuristic_quality(query, shown, decision, relevant_conflicts)
        full = decision is Decision.CORRECT and bool(confident) and quality.level in ("sufficient", "conflicting")
        if self._llm_writes():
            return self._generated(query, chosen, full, quality)
        return self._extractive(chosen, full, quality)

    def _llm_writes(self) -> bool:
        """An LLM is set and has the budget (one call to write, one to verify) and the time to answer."""
        return self.llm is not None and self.state.llm_left() >= ANSWER_LLM_CALLS and not self.state.expired()

    # ----- grader-only --------------------------------------------------------------------------
    def floor_abstention(self) -> Draft | None:
        """The abstention an extractive answer would end in when no chunk reaches the answerability floor, known
        before any strip is graded; None when an LLM will write the answer or some chunk reaches the floor."""
        if self._llm_writes():
            return None
        best = self._best_below_floor()
        return None if best is None else self._below_floor(best)

    def _below_floor(self, best: float, quality: ContextQuality | None = None) -> Draft:
        digits = 2  # as many as it takes for "below" to be visible (0.247 and 0.250, not 0.25 and 0.25)
        while digits < 6 and f"{best:.{digits}f}" == f"{self.answer_floor:.{digits}f}":
            digits += 1
        # a chunk settled on the cosine (grader.cross_encoder.is_settled) carries the most its grade could be
        bound = any(is_settled(g) and g.probability == best for _, g in self.pool.values())
        return Draft(Outcome.ABSTENTION, f"No passage found is likely enough to answer this (best relevance "
                     f"{'at most ' if bound else ''}{best:.{digits}f}, below the answerability floor "
                     f"{self.answer_floor:.{digits}f}), so I am "
                     "not answering rather than guessing.", quality=quality.to_dict() if quality else None)

    def _best_below_floor(self) -> float | None:
        """The best chunk probability when no chunk reaches the answerability floor and the LLM grader found
        none relevant; None when an extractive answer may be given."""
        grades = [g for _, g in self.pool.values()]
        if self.answer_floor <= 0 or any(g.decided_by == "llm" and g.verdict is Verdict.RELEVANT for g in grades):
            return None
        best = max((g.probability for g in grades), default=0.0)
        return best if best < self.answer_floor else None

    def _extractive(self, chosen: Sequence[Strip], full: bool, quality: ContextQuality) -> Draft:
        best = self._best_below_floor()
        if best is not None:  # the LLM failed after refinement: the rule the loop applies before it
            return self._below_floor(best, quality)
        answer = _quoted(chosen)
        sources = self._sources(dict.fromkeys(s.chunk_id for s in chosen))
        outcome, message = self._message(full, quality, "Answer drawn from the cited passages.", ())
        return Draft(outcome, message, answer, sources, quality.to_dict(), "extractive")

    def _message(self, full: bool, quality: ContextQuality, base: str, gaps: Sequence[str]) -> tuple[Outcome, str]:
        note = ""
        if quality.conflicts:
            note = " Sources disagree; the active, newest, highest-authority one was preferred: " + \
                "; ".join(quality.conflicts)
        if full and not gaps:
            return Outcome.ANSWER, base + note
        missing = list(gaps) or quality.missing_aspects
        gap = f" They do not clearly cover: {', '.join(missing)}." if missing else ""
        return Outcome.PARTIAL_ANSWER, ("Partial answer: the passages below are related but do not clearly answer "
                                        "the whole question." + gap + " Treat it as incomplete." + note)

    # ----- LLM ----------------------------------------------------------------------------------
    def _spend(self) -> None:
        self.state.llm_calls += 1

    def _generated(self, query: str, chosen: Sequence[Strip], full: bool, quality: ContextQuality) -> Draft:
        by_chunk: dict[str, list[str]] = {}
        previous: Strip | None = None
        for strip in chosen:  # each section led by its heading, as a quoted answer is
            by_chunk.setdefault(strip.chunk_id, []).append(_lead(strip, previous) + strip.text)
            previous = strip
        evidence = [Evidence(cid, " ".join(texts)) for cid, texts in by_chunk.items()]
        llm = self.llm
        if llm is None:  # compose() checked; kept for the type checker
            return self._extractive(chosen, full, quality)
        try:
            draft = self._generate(llm, query, evidence, [])
            if not draft.answerable or not draft.claims:
                return Draft(Outcome.ABSTENTION, "The passages found do not answer this question (the answer "
                             "writer found nothing in them to state), so I am not answering.", None, [],
                             quality.to_dict())
            checked = self._verify(llm, draft, evidence)
            if not checked.grounded and self.state.llm_left() >= ANSWER_LLM_CALLS:
                draft = self._generate(llm, query, evidence, [f"{c.text} ({why})" for c, why in checked.unsupported])
                checked = self._verify(llm, draft, evidence) if draft.claims else GroundingResult([], [])
        except LLMError as exc:
            self.state.degrade(f"LLM generation or grounding check unavailable, extractive answer given ({exc})")
            return self._extractive(chosen, full, quality)
        return self._grounded(draft, checked, full, quality)

    def _generate(self, llm: LLMAnswerer, query: str, evidence: list[Evidence], feedback: list[str]) -> GeneratedAnswer:
        """One generation call, traced (a second one carries the grounding check's feedback)."""
        self._spend()
        t0 = time.monotonic()
        draft = llm.generate(query, evidence, deadline=self.state.deadline, feedback=feedback)
        self.state.trace.step("generate", t0, claims=len(draft.claims), answerable=draft.answerable,
                              gaps=list(draft.gaps), revision=bool(feedback))
        return draft

    def _verify(self, llm: LLMAnswerer, draft: GeneratedAnswer, evidence: list[Evidence]) -> GroundingResult:
        """One grounding check, traced with what it could not support."""
        self._spend()
        t0 = time.monotonic()
        checked = llm.verify(draft, evidence, deadline=self.state.deadline)
        self.state.trace.step("ground", t0, grounded=checked.grounded, supported=len(checked.supported),
                              unsupported=[why for _, why in checked.unsupported[:3]])
        return checked

    def _grounded(self, draft: GeneratedAnswer, checked: GroundingResult, full: bool,
                  quality: ContextQuality) -> Draft:
        if checked.grounded and checked.supported:
            outcome, message = self._message(full, quality, "Answer written from the cited passages; every "
                                             "statement was checked against them.", draft.gaps)
            return Draft(outcome, message, _render(checked.supported), self._cited(checked.supported),
                         quality.to_dict(), "verified")
        # a rejected statement is never shown, not even quoted in the message: it may repeat what a passage
        # the caller may not read says, or what no passage says at all
        removed = f"{len(checked.unsupported)} statement(s) ({_kinds_of(checked.unsupported)})"
        if not checked.supported:
            return Draft(Outcome.ABSTENTION, f"A draft answer was written, but the sources support none of its "
                         f"{removed}, so I am not answering.", None, [], quality.to_dict(), "none")
        return Draft(Outcome.PARTIAL_ANSWER, f"Partial answer: {removed} the sources do not support were removed. "
                     "Treat it as incomplete.", _render(checked.supported),
                     self._cited(checked.supported), quality.to_dict(), "needs_revision")

    # ----- sources ------------------------------------------------------------------------------
    def _cited(self, claims: Sequence[Claim]) -> list[dict[str, Any]]:
        return self._sources(dict.fromkeys(cid for c in claims for cid in c.chunk_ids if cid in self.pool))

    def _sources(self, ids: dict[str, None]) -> list[dict[str, Any]]:
        out = []
        for cid in ids:
            chunk, grade = self.pool[cid]
            entry = {"chunk_id": cid, "source": chunk.source, "title": chunk.title,
                     "probability": round(grade.probability, 4)}
            if (document := shown_document(chunk)) is not None:
                entry["document"] = document
            if chunk.metadata.get("url"):
                entry["url"] = chunk.metadata["url"]
            out.append(entry)
        return out


def shown_document(chunk: StoredChunk) -> str | None:
    """The document name a source shows, which tells apart files of one name in different folders: the name it was
    uploaded under (`PUT /v1/documents/{name}`, an archive member's ``<name>/<member>``), or a relative path it was
    indexed by. None for a file indexed by its path on the server (`crag index add` keeps absolute paths, which
    would show the server's folders to every reader) and for chunks not read from a file (web results)."""
    path = chunk.metadata.get("path")
    if not isinstance(path, str) or not path or PurePosixPath(path).is_absolute() or PureWindowsPath(path).drive:
        return None
    return path


def _lead(strip: Strip, previous: Strip | None) -> str:
    """``"<section heading>: "`` when ``strip`` opens a section of its chunk (the one before it was of another
    chunk or section), else ''."""
    opens = strip.section is not None and (previous is None or (previous.chunk_id, previous.section)
                                           != (strip.chunk_id, strip.section))
    return f"{strip.section}: " if opens else ""


def _with_completions(chosen: Sequence[Strip], strips: Sequence[Strip]) -> list[Strip]:
    """``chosen`` with each strip that completes a chosen one (what a strip ending in a colon announces: the
    command after "You can install it in editable mode:"), in document order."""
    picked = {s.order for s in chosen}
    return [s for s in strips if s.order in picked or (s.completes and s.order - 1 in picked)]


def _quoted(strips: Sequence[Strip]) -> str:
    """Strips in order, each followed by its chunk id; a code block or a table row on lines of its own, so that
    code still renders as code and rows read as rows, not run into the sentences around them, and a table's
    record (``question: ... / answer: ...`` lines) as a paragraph of its own lines. A strip that
    opens a section of its chunk is led by the section's heading, which in API documentation is what names the
    thing described (``pub fn dedup(&mut self): Removes consecutive ...``)."""
    out = ""
    previous: Strip | None = None
    for strip in strips:
        lead = _lead(strip, previous)
        if FENCE.match(strip.text):
            out = out.rstrip(" ") + ("\n" if out else "") + (f"{lead.rstrip()}\n" if lead else "") + \
                f"{strip.text}\n[{strip.chunk_id}]\n"
        elif strip.record:
            out = out.rstrip() + ("\n\n" if out else "") + f"{strip.text} [{strip.chunk_id}]\n\n"
        elif TABLE_ROW.search(strip.text):
            out = out.rstrip(" ") + ("\n" if out and not out.endswith("\n") else "") + \
                f"{lead}{strip.text} [{strip.chunk_id}]\n"
        else:
            out += f"{lead}{strip.text} [{strip.chunk_id}] "
        previous = strip
    return out.strip()


def _render(claims: Sequence[Claim]) -> str:
    return " ".join(f"{c.text} [{', '.join(c.chunk_ids)}]" for c in claims)


def _kinds_of(unsupported: Sequence[tuple[Claim, str]]) -> str:
    """Why statements were rejected, as fixed categories: never the statement, nor the verifier's free text."""
    kinds = {"cites passages that were never given" if why.startswith("cites passages that were never given")
             else "cites no passage" if why == "cites no passage" else "not stated in the cited passages"
             for _, why in unsupported}
    return "; ".join(sorted(kinds))

