"""One structured LLM call (question in, pydantic model out) with retries, a circuit breaker and accounting.

The grader's batch judgements and the pipeline's generation, grounding and context checks all go
through :func:`call_failure` to map SDK errors to retriable or final failures; :class:`StructuredLLM`
is the synchronous client the pipeline uses. ``json_schema`` mode uses the SDK's ``.parse`` (OpenAI
structured outputs); ``json_object`` passes the model's JSON schema the way llama.cpp accepts it.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from grader.llm_config import LOCAL_SERVER_EXAMPLE
from grader.resilience import CircuitBreaker, check_http_url
from models.deps import require
from models.errors import ConfigError, LLMError

__all__ = [
    "CallFailed",
    "LLMStats",
    "StructuredLLM",
    "base_url_of",
    "call_failure",
    "choices_of",
    "invalid_answer",
    "openai_client_kwargs",
]

logger = logging.getLogger(__name__)
T = TypeVar("T", bound=BaseModel)


class CallFailed(Exception):
    """One failed call: ``retriable`` says whether trying again may help."""

    def __init__(self, reason: str, retriable: bool, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retriable = retriable
        self.retry_after = retry_after


def invalid_answer(exc: ValidationError) -> CallFailed:
    """A retriable failure naming the first problem of an answer that is not the JSON asked for (and where in it,
    when it is JSON at all)."""
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first.get("loc", ()))
    return CallFailed(f"invalid JSON answer ({where + ': ' if where else ''}{first.get('msg')})", True)


def call_failure(openai: Any, exc: Exception, timeout_s: float) -> CallFailed | None:
    """The SDK exception as a :class:`CallFailed`, or None when it is not an SDK error."""
    if isinstance(exc, openai.APITimeoutError):
        return CallFailed(f"timeout after {timeout_s}s", True)
    if isinstance(exc, openai.APIConnectionError):
        return CallFailed(f"cannot reach the LLM server: {exc}", True)
    if isinstance(exc, openai.RateLimitError):
        return CallFailed("rate limited (429)", True, _retry_after(exc))
    if isinstance(exc, openai.InternalServerError):
        return CallFailed(f"server error ({exc.status_code})", True)
    if isinstance(exc, openai.LengthFinishReasonError):
        return CallFailed("answer truncated at max_tokens", False)
    if isinstance(exc, openai.ContentFilterFinishReasonError):
        return CallFailed("refused by the content filter", False)
    if isinstance(exc, openai.APIStatusError):
        return CallFailed(f"request rejected ({exc.status_code}): {str(exc)[:200]}", False)
    if isinstance(exc, openai.APIResponseValidationError | ValueError | TypeError | AttributeError | KeyError):
        # the SDK could not read what the server sent (not JSON, wrong shape): the server's failure, not ours
        return CallFailed(f"malformed answer from the LLM server ({type(exc).__name__})", True)
    return None


def choices_of(response: Any) -> list[Any]:
    """The choices of a chat completion; a CallFailed when the server sent something else (an HTML error
    page or plain text with HTTP 200) or no choice at all."""
    choices = getattr(response, "choices", None)
    if not isinstance(choices, list):
        raise CallFailed("the server's answer is not a chat completion (an HTML error page or a proxy?)", True)
    if not choices:
        raise CallFailed("empty answer (no choices)", True)
    return choices


def _retry_after(exc: Any) -> float | None:
    try:
        value = exc.response.headers.get("retry-after")
        return float(value) if value is not None else None
    except (AttributeError, TypeError, ValueError):
        return None


def base_url_of(config: Any) -> str | None:
    """The server URL a client of ``config`` talks to (None: the SDK's default, OpenAI). $OPENAI_BASE_URL is held
    to the rule LLMConfig.base_url is: without a scheme every call would fail, each retried, long after start-up."""
    if config.base_url:  # LLMConfig checked it
        return str(config.base_url)
    url = os.environ.get("OPENAI_BASE_URL")
    return check_http_url(url, "$OPENAI_BASE_URL", LOCAL_SERVER_EXAMPLE) if url else None


def openai_client_kwargs(config: Any) -> dict[str, Any]:
    """api_key / base_url / timeout for an SDK client; local servers accept any key."""
    api_key = config.api_key or os.environ.get("OPENAI_API_KEY")
    base_url = base_url_of(config)
    if not api_key:
        if not base_url:
            raise ConfigError("no LLM endpoint: set base_url (--llm-base-url) or OPENAI_API_KEY for OpenAI")
        api_key = "not-needed"
    return {"api_key": api_key, "base_url": base_url, "timeout": config.timeout_s, "max_retries": 0}


@dataclass
class LLMStats:
    """Running totals of LLM calls over a client's lifetime."""

    calls: int = 0
    failed_calls: int = 0
    retries: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0


class StructuredLLM:
    """Synchronous structured calls for the pipeline (generation, grounding, context checks).

    ``config`` is a :class:`grader.llm.LLMConfig`; ``logprobs`` mode falls back to ``json_object`` here.
    """

    def __init__(self, config: Any, *, client: Any = None, breaker: CircuitBreaker | None = None) -> None:
        self.config = config
        self.model = config.resolved_model()
        self._openai = require("openai", "llm")
        self._client = client
        if client is None:
            openai_client_kwargs(config)  # no endpoint, or one without a scheme: say so now, not per call
        self.breaker = breaker or CircuitBreaker(config.breaker_failures, config.breaker_reset_s)
        self.usage = LLMStats()
        self._lock = threading.Lock()

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = self._openai.OpenAI(**openai_client_kwargs(self.config))
        return self._client

    def ask(self, system: str, user: str, response_model: type[T], *, deadline: float | None = None) -> T:
        """The parsed answer; raises :class:`LLMError` with the reason after the retries are spent."""
        retry = self.config.retry
        last = "no attempt made"
        for attempt in range(retry.attempts):
            if deadline is not None and time.monotonic() >= deadline:
                raise LLMError(f"deadline passed before the LLM answered ({last})")
            if not self.breaker.allow():
                raise LLMError(f"circuit open after repeated LLM failures ({last})")
            try:
                answer = self._call(system, user, response_model)
            except CallFailed as failure:
                self._count(failed_calls=1)
                self.breaker.record_failure()
                last = failure.reason
                logger.info("LLM call failed (attempt %d/%d): %s", attempt + 1, retry.attempts, failure.reason)
                if not failure.retriable:
                    break
                if attempt + 1 < retry.attempts:
                    wait = retry.delay(attempt, failure.retry_after)
                    if deadline is not None and time.monotonic() + wait >= deadline:
                        break
                    self._count(retries=1)
                    time.sleep(wait)
                continue
            self.breaker.record_success()
            return answer
        raise LLMError(f"the LLM gave no usable answer: {last}")

    def _call(self, system: str, user: str, response_model: type[T]) -> T:
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        common = {"model": self.model, "messages": messages, "temperature": 0, "max_tokens": self.config.max_tokens}
        try:
            if self.config.mode == "json_schema":
                response = self.client.chat.completions.parse(response_format=response_model, **common)
            else:
                response = self.client.chat.completions.create(
                    response_format={"type": "json_object", "schema": response_model.model_json_schema()}, **common)
        except Exception as exc:
            failure = call_failure(self._openai, exc, self.config.timeout_s)
            if failure is None:
                raise
            raise failure from exc
        choice = choices_of(response)[0]
        self._account(response)
        if getattr(choice.message, "refusal", None):
            raise CallFailed(f"refused: {choice.message.refusal[:200]}", False)
        if choice.finish_reason == "length":
            raise CallFailed("answer truncated at max_tokens", False)
        parsed = getattr(choice.message, "parsed", None)
        if isinstance(parsed, response_model):
            return parsed
        try:
            return response_model.model_validate_json(getattr(choice.message, "content", None) or "")
        except ValidationError as exc:
            raise invalid_answer(exc) from exc

    def _account(self, response: Any) -> None:
        usage = getattr(response, "usage", None)
        prompt = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion = int(getattr(usage, "completion_tokens", 0) or 0)
        cost = (prompt * self.config.input_cost_per_mtok + completion * self.config.output_cost_per_mtok) / 1e6
        self._count(calls=1, prompt_tokens=prompt, completion_tokens=completion, cost_usd=cost)

    def _count(self, **amounts: float) -> None:
        with self._lock:
            for name, amount in amounts.items():
                setattr(self.usage, name, getattr(self.usage, name) + amount)
