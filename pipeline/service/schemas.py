"""Request and response models of the HTTP API; their constraints are the documented limits (OpenAPI)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from models.types import NON_BLANK

__all__ = ["GradeOut", "GradeResponse", "Limits", "QueryResponse", "SourceOut", "request_models"]


class Limits(BaseModel):
    """Per-request limits; exceeding one is a 413 or 422 that names the limit."""

    model_config = ConfigDict(frozen=True)
    max_query_chars: int = Field(default=2000, ge=1)
    max_chunks: int = Field(default=64, ge=1)
    max_chunk_chars: int = Field(default=8000, ge=1)
    max_body_bytes: int = Field(default=1_000_000, ge=1024)
    max_document_bytes: int = Field(default=20_000_000, ge=1024, description="body of PUT /v1/documents/{name}")
    max_document_chunks: int = Field(default=5000, ge=1, description="chunks one upload may make")
    rate_per_minute: int = Field(default=600, ge=1)
    grade_deadline_s: float = Field(default=10.0, gt=0, description="server-side deadline of /v1/grade")


def request_models(limits: Limits) -> tuple[type[BaseModel], type[BaseModel]]:
    """(GradeRequest, QueryRequest) whose constraints are this deployment's limits, so the OpenAPI
    spec documents exactly what the server accepts."""
    query_field: Any = Field(..., min_length=1, max_length=limits.max_query_chars, pattern=NON_BLANK,
                             description="the question; not blank")

    class ChunkIn(BaseModel):
        model_config = ConfigDict(extra="forbid", strict=True)
        text: str = Field(..., max_length=limits.max_chunk_chars)
        chunk_id: str | None = Field(None, max_length=256)

    chunk_text = Annotated[str, Field(max_length=limits.max_chunk_chars)]
    filter_key = Annotated[str, Field(min_length=1, max_length=128)]  # the index refuses an empty key (400 before)

    class GradeRequest(BaseModel):
        model_config = ConfigDict(extra="forbid", strict=True)
        query: str = query_field
        chunks: list[ChunkIn | chunk_text] = Field(
            ..., min_length=1, max_length=limits.max_chunks,
            description='each chunk as {"text": ..., "chunk_id": ...} or as its text alone')
        escalate: bool = Field(True, description="send uncertain chunks to the LLM grader when one is configured")
        deadline_s: float | None = Field(
            None, gt=0, allow_inf_nan=False,
            description=f"answer within this many seconds (capped at the server's {limits.grade_deadline_s:g}); "
                        "chunks the LLM has not judged by then keep the small model's verdict, flagged")

    class QueryRequest(BaseModel):
        model_config = ConfigDict(extra="forbid", strict=True)
        query: str = query_field
        confidential: bool = Field(False, description="never send this question to web search")
        filters: dict[filter_key, str | int | bool] | None = Field(
            None, max_length=8,
            description="exact-match filters that every search of this query keeps: status, source, title, "
                        "effective_date, authority, position, document (its name as GET /v1/documents lists it) or "
                        "any metadata key, e.g. {\"status\": \"active\"}")

    return GradeRequest, QueryRequest


class GradeOut(BaseModel):
    chunk_id: str | None
    verdict: Literal["relevant", "partial", "irrelevant"]
    probability: float
    uncertain: bool
    decided_by: Literal["model", "llm", "heuristic"]
    escalation_failed: bool
    truncated: bool
    windows: int = 1  # how many windows of max_length tokens were read (a long chunk is graded by its best)
    withheld: bool = False  # above the upper threshold but not accepted on it: a swapped opposite (see reason)
    reason: str | None = None
    llm_verdict: Literal["relevant", "partial", "irrelevant"] | None = None


class GradeResponse(BaseModel):
    decision: Literal["correct", "ambiguous", "incorrect"]
    grades: list[GradeOut]
    escalated: int
    degraded: bool
    model: str


class SourceOut(BaseModel):
    """A passage the answer (or message) rests on."""

    chunk_id: str
    source: str = Field(description="the file name; \"web\" for a web result (see url)")
    title: str
    probability: float = Field(description="the grader's probability that the passage is relevant")
    document: str | None = Field(None, description="the name a document was uploaded under "
                                                   "(PUT /v1/documents/{name}); null for files indexed on the server")
    url: str | None = Field(None, description="a web result's address")


class QueryResponse(BaseModel):
    outcome: Literal["answer", "partial_answer", "clarification", "abstention", "access_denied"]
    message: str
    answer: str | None
    sources: list[SourceOut]
    decision: Literal["correct", "ambiguous", "incorrect"] | None
    quality: dict[str, Any] | None
    grounding: str
    degraded: bool
    degraded_reasons: list[str]
    llm_calls: int
    tier: str
    trace: list[dict[str, Any]]
