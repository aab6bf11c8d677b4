"""What the LLM grader is told to do (:class:`LLMConfig`) and what it gives back per chunk (:class:`LLMJudgement`,
or :class:`LLMFailure` with the reason; never a default verdict)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Literal

from grader.resilience import RetryPolicy, check_http_url
from models.errors import ConfigError
from models.field_types import check_field_types
from models.types import Verdict

__all__ = ["LOCAL_SERVER_EXAMPLE", "MODES", "LLMConfig", "LLMFailure", "LLMJudgement", "Mode"]

Mode = Literal["json_schema", "json_object", "logprobs"]
MODES = ("json_schema", "json_object", "logprobs")
LOCAL_SERVER_EXAMPLE = "http://127.0.0.1:8080/v1"  # what an OpenAI-compatible local server's URL looks like


@dataclass(frozen=True, kw_only=True)
class LLMConfig:
    """Where and how to ask.

    ``model``, ``base_url`` and ``api_key`` default to $CRAG_LLM_MODEL, $OPENAI_BASE_URL and $OPENAI_API_KEY.
    """

    model: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    mode: Mode = "json_schema"
    chunks_per_call: int = 1
    concurrency: int = 4
    timeout_s: float = 30.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    max_tokens: int = 512
    cache_dir: str | None = None
    input_cost_per_mtok: float = 0.0
    output_cost_per_mtok: float = 0.0
    breaker_failures: int = 5
    breaker_reset_s: float = 30.0

    def __post_init__(self) -> None:
        check_field_types(self)
        if self.mode not in MODES:
            raise ConfigError(f"unknown LLM mode {self.mode!r}; choose one of {list(MODES)}")
        for name in ("chunks_per_call", "concurrency", "max_tokens", "breaker_failures"):
            if getattr(self, name) < 1:
                raise ConfigError(f"LLMConfig.{name} must be >= 1, got {getattr(self, name)}")
        for name, low_ok in (("timeout_s", False), ("breaker_reset_s", False), ("input_cost_per_mtok", True),
                             ("output_cost_per_mtok", True)):
            value = getattr(self, name)
            if not (value >= 0 if low_ok else value > 0):  # NaN fails both
                raise ConfigError(f"LLMConfig.{name} must be {'>= 0' if low_ok else '> 0'}, got {value}")
        if self.base_url is not None:
            check_http_url(self.base_url, "LLMConfig.base_url", LOCAL_SERVER_EXAMPLE)
        if self.mode == "logprobs" and self.chunks_per_call != 1:
            raise ConfigError("logprobs mode asks about one chunk per call; set chunks_per_call=1")

    def resolved_model(self) -> str:
        model = self.model or os.environ.get("CRAG_LLM_MODEL") or os.environ.get("OPENAI_MODEL")
        if not model:
            raise ConfigError("no LLM model given: pass model=... (--llm-model) or set CRAG_LLM_MODEL")
        return model


@dataclass(frozen=True, kw_only=True)
class LLMJudgement:
    """The LLM's verdict on one chunk, with what it cost."""

    verdict: Verdict
    probability: float
    supports_answer: bool = False
    missing_aspects: tuple[str, ...] = ()
    reason: str = ""
    confidence: float | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    latency_ms: float = 0.0
    cached: bool = False


@dataclass(frozen=True, kw_only=True)
class LLMFailure:
    """Why the LLM gave no usable verdict for one chunk."""

    reason: str
