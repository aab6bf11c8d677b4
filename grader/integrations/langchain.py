"""LangChain and LangGraph: a document compressor, a ``grade_documents`` node, escalation via a chat model.

``CragDocumentCompressor(grader=load_grader("default"))`` drops the chunks the grader calls irrelevant and
writes verdict, probability and ``decided_by`` into the kept documents' metadata (use it in a
``ContextualCompressionRetriever``). ``grade_documents_node(grader)`` replaces the LangGraph CRAG
tutorial's per-chunk LLM yes/no node: it reads ``question`` and ``documents`` and writes the kept documents,
the CRAG ``decision`` and the tutorial's ``web_search`` flag, so its ``decide_to_generate`` edge works
unchanged. Uncertain chunks reach an LLM only through a cascade: the project's own LLM grader (any
OpenAI-compatible server) or, with :class:`ChatModelJudge`, the LangChain chat model you already use.
Needs ``pip install 'crag-grader[langchain]'``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any

from grader.cascade import CascadeGrader
from grader.integrations.sorting import check_items, grade_metadata, sort_by_grade, web_search_flag
from grader.llm_config import LLMFailure, LLMJudgement
from grader.llm_prompts import YES_NO_SYSTEM_PROMPT, yes_no_message
from grader.protocol import Grader, PolicyGrader, check_grader
from models.deps import require
from models.errors import ConfigError
from models.types import Verdict

documents = require("langchain_core.documents", "langchain")
messages = require("langchain_core.messages", "langchain")
pydantic = require("pydantic", "langchain")

__all__ = ["ChatModelJudge", "CragDocumentCompressor", "cascade_with_chat_model", "grade_documents_node"]


class CragDocumentCompressor(documents.BaseDocumentCompressor):  # type: ignore[misc,name-defined,unused-ignore]
    """Keeps relevant (and, unless ``keep_uncertain=False``, unresolved uncertain) documents, annotated."""

    model_config = pydantic.ConfigDict(arbitrary_types_allowed=True)
    grader: Any
    keep_uncertain: bool = True

    @pydantic.field_validator("grader")
    @classmethod
    def _can_grade(cls, grader: Any) -> Any:
        return check_grader(grader)

    def compress_documents(self, documents: Sequence[Any], query: str, callbacks: Any = None) -> Sequence[Any]:
        """Documents in input order, minus the irrelevant ones; metadata gets ``crag_*`` fields."""
        kept, _ = _grade_documents(self.grader, query, documents, self.keep_uncertain)
        return kept


def grade_documents_node(grader: Grader, *, keep_uncertain: bool = True) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A LangGraph node: ``{"question", "documents"}`` in; kept ``documents``, ``decision`` ("correct",
    "ambiguous" or "incorrect") and ``web_search`` ("Yes" unless the decision is correct) out."""
    check_grader(grader)

    def grade_documents(state: dict[str, Any]) -> dict[str, Any]:
        missing = [key for key in ("question", "documents") if key not in state]
        if missing:  # a graph whose state names them otherwise: say so, not KeyError('documents')
            raise ConfigError(f"the grade_documents node reads the state's 'question' and 'documents'; this state "
                              f"has no {' or '.join(repr(k) for k in missing)} (its keys: {sorted(state)})")
        kept, sorted_ = _grade_documents(grader, state["question"], state["documents"], keep_uncertain)
        return {"documents": kept, "question": state["question"], "decision": sorted_.decision.value,
                "web_search": web_search_flag(sorted_.decision)}

    return grade_documents


def _grade_documents(grader: Grader, query: str, docs: Sequence[Any], keep_uncertain: bool) -> tuple[list[Any], Any]:
    check_items(docs, "a LangChain Document (with page_content)",
                lambda doc: isinstance(getattr(doc, "page_content", None), str))
    sorted_ = sort_by_grade(grader, query, [d.page_content for d in docs], [getattr(d, "id", None) for d in docs])
    kept = [documents.Document(page_content=docs[i].page_content, id=getattr(docs[i], "id", None),
                               metadata={**docs[i].metadata, **grade_metadata(sorted_.grades[i])})
            for i in sorted_.kept(keep_uncertain)]
    return kept, sorted_


@dataclass(frozen=True)
class _JudgeConfig:
    chunks_per_call: int = 1


class ChatModelJudge:
    """Asks a LangChain chat model yes/no for each uncertain chunk (the escalation side of a cascade).

    A call that raises, answers neither yes nor no, or runs past the deadline is a failure for that chunk:
    the cascade keeps the small model's grade and flags it ``escalation_failed``; nothing is guessed."""

    def __init__(self, chat_model: Any, *, timeout_s: float = 30.0) -> None:
        self.chat_model = chat_model
        self.model = getattr(chat_model, "model_name", None) or type(chat_model).__name__
        self.config = _JudgeConfig()
        self.timeout_s = timeout_s
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="crag-chat-judge")

    def judge(self, query: str, texts: Sequence[str], *, max_calls: int | None = None, deadline: float | None = None,
              max_cost_usd: float | None = None) -> list[LLMJudgement | LLMFailure]:
        out: list[LLMJudgement | LLMFailure] = []
        for i, text in enumerate(texts):
            if max_calls is not None and i >= max_calls:
                out.append(LLMFailure(reason="budget: no LLM calls left for this query"))
                continue
            left = self.timeout_s if deadline is None else min(self.timeout_s, deadline - time.monotonic())
            if left <= 0:
                out.append(LLMFailure(reason="budget: the deadline passed before this chunk was asked"))
                continue
            out.append(self._ask(query, text, left))
        return out

    def _ask(self, query: str, text: str, timeout_s: float) -> LLMJudgement | LLMFailure:
        prompt = [messages.SystemMessage(content=YES_NO_SYSTEM_PROMPT),
                  messages.HumanMessage(content=yes_no_message(query, text))]
        t0 = time.monotonic()
        call = self._pool.submit(self.chat_model.invoke, prompt)
        try:
            reply = call.result(timeout=timeout_s)
        except FutureTimeout:
            return LLMFailure(reason=f"the chat model gave no answer within {timeout_s:.1f} s")
        except Exception as exc:  # any provider error: the chunk keeps the small model's grade, flagged
            return LLMFailure(reason=f"the chat model failed: {type(exc).__name__}: {str(exc)[:200]}")
        answer = str(getattr(reply, "content", reply)).strip().lower()
        word = answer.split()[0].strip(".,!\"'") if answer else ""
        if word not in ("yes", "no"):
            return LLMFailure(reason=f"the chat model answered neither yes nor no ({answer[:40]!r})")
        relevant = word == "yes"
        return LLMJudgement(verdict=Verdict.RELEVANT if relevant else Verdict.IRRELEVANT,
                            probability=1.0 if relevant else 0.0, reason="chat model: " + word,
                            latency_ms=1000 * (time.monotonic() - t0))


def cascade_with_chat_model(primary: PolicyGrader, chat_model: Any, **cascade_options: Any) -> CascadeGrader:
    """The small grader first; only its uncertain band goes to ``chat_model`` (a LangChain chat model)."""
    return CascadeGrader(primary=primary, escalate_to=ChatModelJudge(chat_model), **cascade_options)  # type: ignore[arg-type]
