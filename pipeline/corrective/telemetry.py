"""OpenTelemetry spans of a corrective run: one ``crag.run`` span and a child per trace step.

Span names follow the trace's actions (``crag.retrieve``, ``crag.grade``, ``crag.rewrite``, ``crag.web``,
``crag.generate``, ``crag.verify``...; the cascade adds ``crag.escalate`` live). Attributes are the trace's
counts, decisions and flags only: never the question, a rewritten query, chunk text, ids or the tenant.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from models.tracing import record_span
from pipeline.corrective.outcomes import RAGResult, TraceStep

__all__ = ["SPAN_NAMES", "record_run", "run_attributes", "step_attributes"]

SPAN_NAMES = {"web_search": "crag.web", "ground": "crag.verify"}
LABELS = ("decision", "outcome", "grounding", "level", "strategy", "provider")  # fixed vocabularies
FLAGS = ("answerable", "grounded", "revision", "hidden_matches", "kept_raw_query")
COUNTS = ("round", "k", "kept", "claims", "supported", "llm_calls_so_far")
LISTS = ("dropped", "conflicts", "hits", "strips", "missing_aspects", "sources", "unsupported", "answered_aspects")


def step_attributes(step: TraceStep) -> dict[str, Any]:
    """What one step may tell a tracing backend."""
    detail = step.detail
    out: dict[str, Any] = {}
    for key in LABELS:
        if isinstance(detail.get(key), str):
            out[f"crag.{key}"] = detail[key]
    for key in FLAGS + COUNTS:
        if isinstance(detail.get(key), bool | int | float):
            out[f"crag.{key}"] = detail[key]
    for key in LISTS:
        if isinstance(detail.get(key), list | dict):
            out[f"crag.{key}.count"] = len(detail[key])
    if isinstance(detail.get("grades"), dict):
        grades = list(detail["grades"].values())
        out["crag.chunks"] = len(grades)
        for by, n in Counter(g.get("by") for g in grades).items():
            out[f"crag.decided_by.{by}"] = n
        out["crag.uncertain"] = sum(bool(g.get("uncertain")) for g in grades)
    if step.action == "web_search":
        out["crag.skipped"] = "skipped" in detail
        out["crag.error"] = "error" in detail
    return out


def record_run(result: RAGResult) -> None:
    """Child spans for every step of a finished run (call inside its ``crag.run`` span)."""
    for step in result.trace:
        record_span(SPAN_NAMES.get(step.action, f"crag.{step.action}"), step.started,
                    step.started + step.ms / 1000, step_attributes(step))


def run_attributes(result: RAGResult) -> dict[str, Any]:
    """The outcome of a run, for its span."""
    return {"crag.outcome": result.outcome.value, "crag.decision": result.decision.value if result.decision else "",
            "crag.tier": result.tier, "crag.llm_calls": result.llm_calls, "crag.degraded": result.degraded,
            "crag.rounds": sum(step.action == "retrieve" for step in result.trace), "crag.grounding": result.grounding}
