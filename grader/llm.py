"""LLM grader over any OpenAI-compatible server (OpenAI, vLLM, Ollama, llama.cpp) with the ``openai`` SDK.

Three ways to ask, all at temperature 0 with versioned prompts:
- ``json_schema``: OpenAI structured outputs via ``chat.completions.parse`` into pydantic models;
- ``json_object``: ``response_format={"type": "json_object", "schema": ...}``, the mode llama.cpp accepts;
- ``logprobs``: a yes/no question whose token log-probabilities give P(relevant).

Batched calls must answer every chunk index exactly once or the answer is rejected. Calls run with
bounded concurrency, a per-call timeout, retries with backoff on 429/5xx/timeouts/invalid output, and a
circuit breaker. Answers are cached on disk; tokens and cost are counted per call. A chunk the LLM
cannot judge comes back as an :class:`LLMFailure` with the reason: never a default verdict.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from grader.cross_encoder import validate_query
from grader.llm_cache import JudgementCache, cache_key
from grader.llm_config import MODES, LLMConfig, LLMFailure, LLMJudgement
from grader.llm_prompts import (
    PROMPT_VERSION,
    SYSTEM_PROMPT,
    YES_NO_SYSTEM_PROMPT,
    BatchJudgement,
    ChunkJudgement,
    batch_schema,
    user_message,
    yes_no_message,
)
from grader.llm_structured import (
    CallFailed,
    LLMStats,
    call_failure,
    choices_of,
    invalid_answer,
    openai_client_kwargs,
)
from grader.resilience import CircuitBreaker
from models.deps import require
from models.errors import ConfigError, LLMError
from models.types import Chunk, Grade, Verdict, as_chunk

__all__ = ["MODES", "LLMConfig", "LLMFailure", "LLMGrader", "LLMJudgement", "LLMStats"]

logger = logging.getLogger(__name__)


def _score(judgement: ChunkJudgement) -> float:
    """An (uncalibrated) P(relevant) from the verdict and the stated confidence."""
    confidence = 1.0 if judgement.confidence is None else judgement.confidence
    if judgement.verdict == "relevant":
        return 0.5 + 0.5 * confidence
    if judgement.verdict == "irrelevant":
        return 0.5 - 0.5 * confidence
    return 0.5


class LLMGrader:
    """Grades chunks with an LLM; also the escalation target of :class:`grader.cascade.CascadeGrader`."""

    def __init__(self, config: LLMConfig | None = None, *, client: Any = None) -> None:
        self.config = config or LLMConfig()
        self.model = self.config.resolved_model()
        self._client = client
        self._openai = require("openai", "llm")
        if client is None:
            openai_client_kwargs(self.config)  # no endpoint, or one without a scheme: say so now, not per call
        self.breaker = CircuitBreaker(self.config.breaker_failures, self.config.breaker_reset_s)
        self.cache = JudgementCache(self.config.cache_dir) if self.config.cache_dir else None
        self.stats = LLMStats()
        self._stats_lock = threading.Lock()

    # ----- public API -------------------------------------------------------------------------------
    def grade(self, query: str, chunks: Sequence[Chunk | str]) -> list[Grade]:
        """Grades from the LLM alone; raises :class:`LLMError` naming every chunk it could not judge."""
        items = [as_chunk(c) for c in chunks]
        results = self.judge(query, [c.text for c in items])
        failures = [(i, r.reason) for i, r in enumerate(results) if isinstance(r, LLMFailure)]
        if failures:
            raise LLMError(f"the LLM could not grade {len(failures)} of {len(items)} chunks: "
                           + "; ".join(f"chunk {i}: {why}" for i, why in failures[:5]))
        grades = []
        for chunk, judgement in zip(items, results, strict=True):
            if not isinstance(judgement, LLMJudgement):  # unreachable: failures raised above
                continue
            grades.append(Grade(
                verdict=judgement.verdict, probability=judgement.probability, decided_by="llm",
                chunk_id=chunk.chunk_id, llm_verdict=judgement.verdict, llm_probability=judgement.probability,
                reason=judgement.reason, latency_ms=judgement.latency_ms, cost_usd=judgement.cost_usd,
            ))
        return grades

    def judge(self, query: str, texts: Sequence[str], *, max_calls: int | None = None,
              deadline: float | None = None, max_cost_usd: float | None = None) -> list[LLMJudgement | LLMFailure]:
        """Synchronous :meth:`ajudge` (not callable from inside a running event loop)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.ajudge(query, texts, max_calls=max_calls, deadline=deadline,
                                           max_cost_usd=max_cost_usd))
        raise ConfigError("LLMGrader.judge was called inside a running event loop; use `await grader.ajudge(...)`")

    async def ajudge(self, query: str, texts: Sequence[str], *, max_calls: int | None = None,
                     deadline: float | None = None,
                     max_cost_usd: float | None = None) -> list[LLMJudgement | LLMFailure]:
        """One result per text, in order. ``deadline`` is a ``time.monotonic()`` instant."""
        client = self._client or self._new_client()
        try:
            return await self._judge(client, query, texts, max_calls, deadline, max_cost_usd)
        finally:
            if self._client is None:
                await client.close()

    # ----- internals --------------------------------------------------------------------------------
    def _new_client(self) -> Any:
        return self._openai.AsyncOpenAI(**openai_client_kwargs(self.config))

    def _key(self, query: str, text: str) -> str:
        return cache_key(self.model, PROMPT_VERSION, self.config.mode, query, text)

    async def _judge(self, client: Any, query: str, texts: Sequence[str], max_calls: int | None,
                     deadline: float | None, max_cost: float | None) -> list[LLMJudgement | LLMFailure]:
        query = validate_query(query)
        results: list[LLMJudgement | LLMFailure | None] = [None] * len(texts)
        todo = []
        for i, text in enumerate(texts):
            cached = self.cache.get(self._key(query, text)) if self.cache else None
            if cached is not None:
                results[i] = LLMJudgement(**{**cached, "verdict": Verdict(cached["verdict"]),
                                             "missing_aspects": tuple(cached["missing_aspects"]), "cached": True})
                self._add(cache_hits=1)
            else:
                todo.append(i)
        per_call = self.config.chunks_per_call
        groups = [todo[s : s + per_call] for s in range(0, len(todo), per_call)]
        semaphore = asyncio.Semaphore(self.config.concurrency)
        spent = {"calls": 0, "cost": 0.0}

        async def run(group: list[int]) -> None:
            async with semaphore:
                reason = self._budget_reason(spent, max_calls, deadline, max_cost)
                if reason:
                    for i in group:
                        results[i] = LLMFailure(reason=reason)
                    return
                spent["calls"] += 1
                outcome = await self._call_with_retries(client, query, [texts[i] for i in group], deadline)
                if isinstance(outcome, LLMFailure):
                    for i in group:
                        results[i] = outcome
                    return
                for i, judgement in zip(group, outcome, strict=True):
                    results[i] = judgement
                    spent["cost"] += judgement.cost_usd
                    if self.cache:
                        self.cache.put(self._key(query, texts[i]), {
                            k: v for k, v in judgement.__dict__.items() if k != "cached"
                        } | {"verdict": judgement.verdict.value, "missing_aspects": list(judgement.missing_aspects)})

        await asyncio.gather(*(run(g) for g in groups))
        return [r if r is not None else LLMFailure(reason="not attempted") for r in results]

    @staticmethod
    def _budget_reason(spent: dict[str, float], max_calls: int | None, deadline: float | None,
                       max_cost: float | None) -> str | None:
        if max_calls is not None and spent["calls"] >= max_calls:
            return f"budget: max_llm_calls={max_calls} reached"
        if deadline is not None and time.monotonic() >= deadline:
            return "budget: deadline passed"
        if max_cost is not None and spent["cost"] >= max_cost:
            return f"budget: cost cap ${max_cost} reached"
        return None

    def _add(self, **amounts: float) -> None:
        with self._stats_lock:
            for name, amount in amounts.items():
                setattr(self.stats, name, getattr(self.stats, name) + amount)

    async def _call_with_retries(self, client: Any, query: str, texts: list[str],
                                 deadline: float | None) -> list[LLMJudgement] | LLMFailure:
        retry = self.config.retry
        last = "no attempt made"
        for attempt in range(retry.attempts):
            start = time.perf_counter()
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return LLMFailure(reason=f"budget: deadline passed ({last})")
            if not self.breaker.allow():
                return LLMFailure(reason=f"circuit open after repeated LLM failures ({last})")
            try:
                # a call in flight is bounded by the time left, not only by its own timeout
                judgements = await asyncio.wait_for(self._call(client, query, texts), timeout=left)
            except TimeoutError:
                self._add(calls=1, failed_calls=1)
                return LLMFailure(reason="budget: deadline passed while the LLM call was in flight")
            except CallFailed as failure:
                self._add(calls=1, failed_calls=1)
                last = failure.reason
                logger.info("LLM call failed (attempt %d/%d): %s", attempt + 1, retry.attempts, failure.reason)
                if not failure.retriable:
                    self.breaker.record_failure()
                    return LLMFailure(reason=failure.reason)
                self.breaker.record_failure()
                if attempt + 1 < retry.attempts:
                    wait = retry.delay(attempt, failure.retry_after)
                    if deadline is not None and time.monotonic() + wait >= deadline:
                        return LLMFailure(reason=f"budget: deadline passed while retrying ({last})")
                    self._add(retries=1)
                    await asyncio.sleep(wait)
                continue
            self.breaker.record_success()
            latency = 1000.0 * (time.perf_counter() - start)
            self._add(calls=1)
            return [LLMJudgement(**{**j.__dict__, "latency_ms": latency}) for j in judgements]
        tries = f"{retry.attempts} attempts" if retry.attempts > 1 else "1 attempt"
        return LLMFailure(reason=f"failed after {tries}: {last}")

    async def _call(self, client: Any, query: str, texts: list[str]) -> list[LLMJudgement]:
        try:
            if self.config.mode == "logprobs":
                return [await self._call_logprobs(client, query, texts[0])]
            return await self._call_structured(client, query, texts)
        except CallFailed:
            raise
        except Exception as exc:
            failure = call_failure(self._openai, exc, self.config.timeout_s)
            if failure is None:
                raise
            raise failure from exc

    def _usage(self, response: Any) -> tuple[int, int, float]:
        usage = getattr(response, "usage", None)
        prompt = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion = int(getattr(usage, "completion_tokens", 0) or 0)
        cost = (prompt * self.config.input_cost_per_mtok + completion * self.config.output_cost_per_mtok) / 1e6
        self._add(prompt_tokens=prompt, completion_tokens=completion, cost_usd=cost)
        return prompt, completion, cost

    async def _call_structured(self, client: Any, query: str, texts: list[str]) -> list[LLMJudgement]:
        messages = [{"role": "system", "content": SYSTEM_PROMPT},
                    {"role": "user", "content": user_message(query, texts)}]
        common = {"model": self.model, "messages": messages, "temperature": 0, "max_tokens": self.config.max_tokens}
        if self.config.mode == "json_schema":
            response = await client.chat.completions.parse(response_format=BatchJudgement, **common)
        else:
            schema = batch_schema(len(texts))
            response = await client.chat.completions.create(
                response_format={"type": "json_object", "schema": schema}, **common)
        choice = choices_of(response)[0]
        prompt, completion, cost = self._usage(response)
        message = choice.message
        if getattr(message, "refusal", None):
            raise CallFailed(f"refused: {message.refusal[:200]}", False)
        if choice.finish_reason == "length":
            raise CallFailed("answer truncated at max_tokens", False)
        parsed = getattr(message, "parsed", None)
        if parsed is None:
            try:
                parsed = BatchJudgement.model_validate_json(message.content or "")
            except ValidationError as exc:
                raise invalid_answer(exc) from exc
        indices = [j.index for j in parsed.judgements]
        if sorted(indices) != list(range(len(texts))):
            raise CallFailed(f"answer covers chunk indices {indices}, expected each of 0..{len(texts) - 1} once",
                              True)
        by_index = {j.index: j for j in parsed.judgements}
        share = 1.0 / len(texts)
        return [
            LLMJudgement(
                verdict=Verdict(by_index[i].verdict), probability=_score(by_index[i]),
                supports_answer=by_index[i].supports_answer, missing_aspects=tuple(by_index[i].missing_aspects),
                reason=by_index[i].reason, confidence=by_index[i].confidence,
                prompt_tokens=round(prompt * share), completion_tokens=round(completion * share),
                cost_usd=cost * share,
            )
            for i in range(len(texts))
        ]

    async def _call_logprobs(self, client: Any, query: str, text: str) -> LLMJudgement:
        response = await client.chat.completions.create(
            model=self.model, temperature=0, max_tokens=1, logprobs=True, top_logprobs=10,
            messages=[{"role": "system", "content": YES_NO_SYSTEM_PROMPT},
                      {"role": "user", "content": yes_no_message(query, text)}],
        )
        logprobs = getattr(choices_of(response)[0], "logprobs", None)
        prompt, completion, cost = self._usage(response)
        content = getattr(logprobs, "content", None)
        if not content:
            raise CallFailed("the server returned no logprobs; use mode json_object or json_schema", False)
        mass = {"yes": 0.0, "no": 0.0}
        for candidate in content[0].top_logprobs or []:
            word = candidate.token.strip().lower()
            if word in mass:
                mass[word] += math.exp(candidate.logprob)
        if mass["yes"] + mass["no"] == 0.0:
            raise CallFailed("neither 'yes' nor 'no' among the top tokens", False)
        p_yes = mass["yes"] / (mass["yes"] + mass["no"])
        return LLMJudgement(
            verdict=Verdict.RELEVANT if p_yes >= 0.5 else Verdict.IRRELEVANT, probability=p_yes,
            supports_answer=p_yes >= 0.5, reason=f"P(yes)={p_yes:.3f} from token logprobs",
            prompt_tokens=prompt, completion_tokens=completion, cost_usd=cost,
        )
