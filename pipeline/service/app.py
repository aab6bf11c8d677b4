"""The HTTP service (FastAPI): grading and full corrective RAG for many tenants, behind API keys.

- ``POST /v1/grade`` and ``POST /v1/query`` need ``Authorization: Bearer <key>``; the key decides the
  tenant and roles, so every retrieval is scoped to them (callers cannot choose a tenant).
- ``PUT`` / ``DELETE /v1/documents/{name}`` and ``GET /v1/documents``: writer keys manage their tenant's
  documents in the local index or Qdrant (:mod:`pipeline.service.documents`).
- ``GET /healthz`` (alive), ``/readyz`` (model and index loaded, worker running; the index's embedder), ``/metrics``.
- One grader is loaded per process and owned by a micro-batching worker thread; pipeline runs happen in
  a thread pool. Outside failures (LLM, web search) degrade the answer and are flagged: never a 500.
- Request bodies over the limit get 413 before they are parsed; rate limits give 429 with Retry-After.
"""


import asyncio
import contextlib
import contextvars
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from grader.cascade import CascadeGrader, llm_outage
from grader.cross_encoder import CrossEncoderGrader
from grader.llm import LLMGrader
from grader.load_rewrites import rewrites_in_use
from grader.policy import decide
from models.deps import require
from models.errors import ConfigError, CragError
from models.field_types import check_field_types
from models.tracing import span
from models.types import Chunk, Grade
from pipeline.corrective.assembly import PipelineSettings, build_rag
from pipeline.corrective.loop import CorrectiveRAG
from pipeline.retrieval.index import Retriever
from pipeline.service.documents import DOCUMENT_ROUTE, add_document_routes
from pipeline.service.keys import ApiKey, KeyStore
from pipeline.service.metrics import ServiceMetrics
from pipeline.service.microbatch import BatchedGrader, MicroBatcher
from pipeline.service.rate_limit import RateLimiter
from pipeline.service.schemas import GradeOut, GradeResponse, Limits, QueryResponse, request_models

__all__ = ["ServiceConfig", "create_app"]

logger = logging.getLogger(__name__)
TRACED_ENDPOINTS = frozenset({"/v1/grade", "/v1/query", "/v1/documents"})
UPLOADS = "/v1/documents/"  # PUT bodies under this prefix are documents, with their own size limit


def route_of(path: str) -> str:
    """The route a request path belongs to, from a fixed set (metrics labels and span names never hold what a
    client typed: a document's name, a mistyped path)."""
    if path in TRACED_ENDPOINTS:
        return path
    return DOCUMENT_ROUTE if path.startswith(UPLOADS) else "/v1/(unknown)"


@dataclass(kw_only=True)
class ServiceConfig:
    """What one worker serves. ``retriever`` is built by the caller (local index or Qdrant)."""

    keys: KeyStore
    retriever: Retriever
    grader: CrossEncoderGrader
    pipeline: PipelineSettings = field(default_factory=PipelineSettings)
    limits: Limits = field(default_factory=lambda: Limits())
    micro_batch_wait_ms: float = 5.0
    micro_batch_max_pairs: int = 64
    request_timeout_s: float = 60.0
    llm_threads: int = 32  # threads for work that may wait on the LLM, apart from everything else
    llm_requests_per_tenant: int = 8  # a tenant's requests waiting on the LLM at once; more queue for a slot
    body_read_timeout_s: float = 30.0

    def __post_init__(self) -> None:
        """Refuse, before any worker starts, a part or a number that would fail on the first request."""
        for name, kind in (("keys", KeyStore), ("grader", CrossEncoderGrader), ("pipeline", PipelineSettings),
                           ("limits", Limits)):
            if not isinstance(getattr(self, name), kind):
                raise ConfigError(f"ServiceConfig.{name} must be a {kind.__name__}, got "
                                  f"{type(getattr(self, name)).__name__}")
        check_field_types(self)
        bad = [f"{name} must be {rule}, got {getattr(self, name)!r}" for ok, name, rule in (
            (self.micro_batch_wait_ms >= 0, "micro_batch_wait_ms", ">= 0"),
            (self.micro_batch_max_pairs >= 1, "micro_batch_max_pairs", ">= 1"),
            (self.request_timeout_s > 0, "request_timeout_s", "> 0"), (self.llm_threads >= 1, "llm_threads", ">= 1"),
            (self.llm_requests_per_tenant >= 1, "llm_requests_per_tenant", ">= 1"),
            (self.body_read_timeout_s > 0, "body_read_timeout_s", "> 0")) if not ok]
        if bad:
            raise ConfigError(f"invalid ServiceConfig: {'; '.join(bad)}")


class _State:
    def __init__(self, config: ServiceConfig) -> None:
        self.config = config
        self.metrics = ServiceMetrics()
        self.metrics.watch_shift(config.grader.shift_status)
        self.batcher = MicroBatcher(config.grader, max_wait_ms=config.micro_batch_wait_ms,
                                    max_pairs=config.micro_batch_max_pairs)
        self.batcher.on_batch = self.metrics.batch
        self.primary = BatchedGrader(self.batcher, timeout_s=config.request_timeout_s)
        llm = LLMGrader(config.pipeline.llm) if config.pipeline.llm is not None else None
        self.cascade = CascadeGrader(primary=self.primary, escalate_to=llm, policy=config.grader.policy)
        self.rag: CorrectiveRAG = build_rag(config.retriever, config.pipeline, primary=self.primary, llm_grader=llm)
        self.limiter = RateLimiter(config.limits.rate_per_minute)
        if config.llm_threads < 1 or config.llm_requests_per_tenant < 1:
            raise ConfigError("llm_threads and llm_requests_per_tenant must be >= 1")
        # work that may wait on the LLM runs in its own pool, and each tenant holds at most a few of its threads:
        # a hung LLM and one tenant's flood of escalations can neither starve LLM-free requests nor other tenants
        self.llm_pool = ThreadPoolExecutor(max_workers=config.llm_threads, thread_name_prefix="crag-llm")
        self._slots: dict[str, asyncio.Semaphore] = {}
        self.ready = True

    def tenant_slot(self, tenant: str) -> asyncio.Semaphore:
        """The tenant's share of the LLM pool (created on first use, in the event loop's thread)."""
        slot = self._slots.get(tenant)
        if slot is None:
            slot = self._slots[tenant] = asyncio.Semaphore(self.config.llm_requests_per_tenant)
        return slot

    async def run_llm_bound(self, tenant: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run ``fn`` on the LLM pool within the tenant's share of it."""
        async with self.tenant_slot(tenant):
            # the caller's context (its tracing span) goes along to the pool's thread
            call = partial(contextvars.copy_context().run, fn, *args, **kwargs)
            return await asyncio.get_running_loop().run_in_executor(self.llm_pool, call)


def create_app(config: ServiceConfig) -> Any:
    """The FastAPI application for one worker process."""
    require("fastapi", "serve")
    from fastapi import Depends, FastAPI, HTTPException, Request
    from fastapi.concurrency import run_in_threadpool
    from fastapi.exception_handlers import http_exception_handler
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse, Response
    from starlette.exceptions import HTTPException as StarletteHTTPException
    from starlette.routing import Match

    state = _State(config)
    GradeRequest, QueryRequest = request_models(config.limits)
    onnx_rewrites = rewrites_in_use().describe()  # what this worker's ONNX models were loaded with

    @asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        yield
        state.ready = False  # uvicorn has finished the in-flight requests; stop the worker last
        state.batcher.close()
        state.llm_pool.shutdown(wait=False, cancel_futures=True)

    app = FastAPI(title="crag-grader", version="0.1.0", lifespan=lifespan,
                  description="Relevance grading and corrective RAG with a small calibrated grader.")
    app.state.crag = state
    limits = config.limits

    @app.middleware("http")
    async def guard(request: Request, call_next: Callable[[Request], Awaitable[Any]]) -> Any:
        endpoint = request.url.path
        started = time.perf_counter()
        route = route_of(endpoint)  # /v1/* requests are spans and metrics, by route
        with (span(f"crag.http {route}", **{"http.request.method": request.method, "http.route": route})
              if endpoint.startswith("/v1/") else contextlib.nullcontext()) as current:
            try:
                response = await call_next(request)
            except Exception:  # a bug, not an outside failure: log it, answer 500 without internals
                logger.exception("unhandled error on %s", endpoint)
                response = JSONResponse({"detail": "internal error"}, status_code=500)
            if current is not None:
                current.set_attribute("http.response.status_code", response.status_code)
        if endpoint.startswith("/v1/"):
            state.metrics.requests.labels(route, str(response.status_code)).inc()
            state.metrics.latency.labels(route).observe(time.perf_counter() - started)
        return response

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> Any:
        # the framework's default echoes the input back; a field path and a reason are enough
        return JSONResponse({"detail": [{"loc": list(e.get("loc", ())), "msg": e.get("msg", ""),
                                         "type": e.get("type", "")} for e in exc.errors()]}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Any:
        if exc.status_code == 405:  # Starlette names the methods of the path's first route only; HTTP wants all
            methods = sorted({m for r in app.router.routes if r.matches(request.scope)[0] == Match.PARTIAL
                              for m in getattr(r, "methods", None) or ()})
            exc = StarletteHTTPException(405, exc.detail, headers={**(exc.headers or {}), "Allow": ", ".join(methods)})
        return await http_exception_handler(request, exc)

    @app.exception_handler(TimeoutError)
    async def timed_out(request: Request, exc: TimeoutError) -> Any:
        return JSONResponse({"detail": f"grading took longer than {config.request_timeout_s}s; retry later"},
                            status_code=503, headers={"Retry-After": "5"})

    @app.exception_handler(CragError)
    async def crag_error(request: Request, exc: CragError) -> Any:
        if isinstance(exc, ConfigError):
            return JSONResponse({"detail": str(exc)}, status_code=400)
        return JSONResponse({"detail": str(exc)}, status_code=503, headers={"Retry-After": "5"})

    def caller(request: Request) -> ApiKey:
        header = request.headers.get("authorization", "")
        token = header[7:].strip() if header.lower().startswith("bearer ") else None
        key = config.keys.authenticate(token)
        if key is None:
            raise HTTPException(401, "missing or invalid API key (send Authorization: Bearer <key>)",
                                headers={"WWW-Authenticate": "Bearer"})
        wait = state.limiter.acquire(key.key_id, rate_per_minute=key.rate_per_minute)
        if wait > 0:
            state.metrics.rate_limited.inc()
            raise HTTPException(429, f"rate limit reached for this key; retry in {wait:.1f}s",
                                headers={"Retry-After": str(max(1, round(wait)))})
        return key

    errors: dict[int | str, dict[str, Any]] = {400: {"description": "malformed JSON or invalid value"},
                                               401: {"description": "missing or invalid API key"},
                                               408: {"description": "request body not received in time"},
                                               413: {"description": "body too large"},
                                               429: {"description": "rate limit"},
                                               503: {"description": "overloaded: retry after the given time"}}
    authenticated = Depends(caller)

    @app.post("/v1/grade", response_model=GradeResponse, responses=errors)
    async def grade(payload: GradeRequest, key: ApiKey = authenticated) -> GradeResponse:  # type: ignore[valid-type]
        body: Any = payload  # the class is built per deployment; mypy cannot see its fields
        deadline = time.monotonic() + min(limits.grade_deadline_s, body.deadline_s or limits.grade_deadline_s)
        chunks = [Chunk(text=c) if isinstance(c, str) else Chunk(text=c.text, chunk_id=c.chunk_id)
                  for c in body.chunks]
        first = await asyncio.wait_for(asyncio.wrap_future(state.batcher.submit(body.query, chunks)),
                                       timeout=config.request_timeout_s)
        grades: list[Grade] = first
        if body.escalate and state.cascade.llm is not None and any(g.uncertain for g in first):
            grades, _ = await state.run_llm_bound(key.tenant, state.cascade.grade_within, body.query, chunks,
                                                  primary_grades=first, deadline=deadline)
        state.metrics.graded(grades)
        degraded = any(llm_outage(g) for g in grades)
        if degraded:
            state.metrics.degraded.labels("/v1/grade").inc()
        return GradeResponse(
            decision=decide(grades, config.grader.policy).value, model=config.grader.name, degraded=degraded,
            escalated=sum(1 for g in grades if g.decided_by == "llm"),
            grades=[GradeOut.model_validate({
                "chunk_id": g.chunk_id, "verdict": g.verdict.value, "probability": g.probability,
                "uncertain": g.uncertain, "decided_by": g.decided_by, "escalation_failed": g.escalation_failed,
                "truncated": g.truncated, "windows": g.windows, "withheld": g.withheld, "reason": g.reason,
                "llm_verdict": g.llm_verdict.value if g.llm_verdict else None}) for g in grades])

    @app.post("/v1/query", response_model=QueryResponse, responses=errors)
    async def query(payload: QueryRequest, key: ApiKey = authenticated) -> QueryResponse:  # type: ignore[valid-type]
        body: Any = payload
        run = partial(state.rag.run, body.query, key.principal, filters=body.filters, confidential=body.confidential)
        # a pipeline that may call the LLM (or web search) shares the tenant's LLM slots; one that cannot does not
        result = await (state.run_llm_bound(key.tenant, run) if state.rag.llm is not None or state.rag.web is not None
                        else run_in_threadpool(run))
        state.metrics.answered(result.outcome.value, result.tier, result.degraded_reasons)
        if result.outcome.value == "access_denied":
            state.metrics.access_denied.labels(key.key_id).inc()
        grades = [g for t in result.trace if t.action == "grade" for g in t.detail.get("grades", {}).values()]
        state.metrics.chunks.inc(len(grades))
        if result.degraded:
            state.metrics.degraded.labels("/v1/query").inc()
        return QueryResponse(**result.to_dict())

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", responses={503: {"description": "not ready"}})
    async def readyz() -> Any:
        config.keys.refresh()
        ready = state.ready and state.batcher.alive and config.keys.problem is None
        llm = state.cascade.llm
        body = {"ready": ready, "model": config.grader.name, "index_embedder": _embedder_name(config.retriever),
                "llm_circuit": llm.breaker.state if llm is not None else "not configured",
                "key_store": config.keys.problem or "ok", "onnx_rewrites": onnx_rewrites,
                # reported, never a reason to stop serving: verdicts are unchanged, the thresholds may not hold
                "data_shift": _shift_field(config.grader.shift_status())}
        return JSONResponse(body, status_code=200 if ready else 503)

    @app.get("/metrics", response_class=Response,
             responses={200: {"content": {"text/plain": {}}, "description": "Prometheus text format"}})
    async def metrics() -> Any:
        data, content_type = state.metrics.render()
        return Response(data, media_type=content_type)

    add_document_routes(app, retriever=config.retriever, caller=caller, limits=limits,
                        on_write=lambda action, chunks: state.metrics.documents.labels(action).inc(chunks))
    app.add_middleware(BodyGuard, max_bytes=limits.max_body_bytes, upload_max_bytes=limits.max_document_bytes,
                       read_timeout_s=config.body_read_timeout_s)
    return app


def _embedder_name(retriever: Any) -> str | None:
    """The embedder whose vectors the index holds and searches with (``CRAG_EMBEDDER`` or the shipped one), for an
    operator to check; None for a retriever that does not say."""
    return getattr(getattr(retriever, "embedder", None), "name", None)


def _shift_field(status: Any) -> str:
    if status is None:
        return "not monitored (the bundle has no calibration reference)"
    if status.shifted:
        return status.message
    return f"none detected ({status.seen} chunks seen, {status.checks} checks)"


class BodyGuard:
    """ASGI middleware for request bodies, before anything parses them:

    - 413 for bodies over ``max_bytes`` (a document's ``PUT`` under ``/v1/documents/``: ``upload_max_bytes``), by
      Content-Length or while streaming (chunked);
    - 408 when the body does not arrive within ``read_timeout_s`` (a client that sends headers and stalls
      no longer holds a connection forever);
    - 422 for JSON that Python would accept but the API must not: ``NaN`` / ``Infinity`` and unpaired UTF-16
      surrogates (``"\\ud800"``), naming the field and never echoing the text."""

    def __init__(self, app: Any, *, max_bytes: int, upload_max_bytes: int | None = None,
                 read_timeout_s: float = 30.0) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.upload_max_bytes = upload_max_bytes or max_bytes
        self.read_timeout_s = read_timeout_s

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        upload = scope.get("method") == "PUT" and str(scope.get("path", "")).startswith(UPLOADS)
        max_bytes = self.upload_max_bytes if upload else self.max_bytes
        what = "document" if upload else "request body"
        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > max_bytes):
            await _reply(send, 413, f"{what} over the {max_bytes}-byte limit")
            return
        messages, size = [], 0
        while True:
            try:
                message = await asyncio.wait_for(receive(), timeout=self.read_timeout_s)
            except asyncio.TimeoutError:
                await _reply(send, 408, f"request body not received within {self.read_timeout_s:g} s")
                return
            messages.append(message)
            size += len(message.get("body", b""))
            if size > max_bytes:
                await _reply(send, 413, f"{what} over the {max_bytes}-byte limit")
                return
            if message["type"] != "http.request" or not message.get("more_body"):
                break
        if scope.get("method") == "POST" and size:
            problem = unsafe_json(b"".join(m.get("body", b"") for m in messages))
            if problem:
                await _reply(send, 422, [{"loc": ["body", *problem[0]], "msg": problem[1], "type": "value_error"}])
                return
        replay = iter(messages)

        async def buffered() -> Any:
            return next(replay, None) or await receive()

        await self.app(scope, buffered, send)


def unsafe_json(raw: bytes) -> tuple[list[str | int], str] | None:
    """(field path, reason) for a body with NaN/Infinity or an unpaired surrogate; None when it is fine
    (malformed JSON is left to the framework's own 422)."""
    def constant(name: str) -> Any:
        raise ValueError(name)

    try:
        data = json.loads(raw, parse_constant=constant)
    except ValueError as exc:
        if str(exc) in ("NaN", "Infinity", "-Infinity"):
            return [], f"{exc} is not a JSON number; send a finite number"
        return None
    stack: list[tuple[list[str | int], Any]] = [([], data)]
    while stack:
        path, value = stack.pop()
        items: Any = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
        for key, child in items:
            if isinstance(key, str) and not _encodable(key):
                return path, "a field name is not valid Unicode (an unpaired surrogate)"
            stack.append(([*path, key], child))
        if isinstance(value, str) and not _encodable(value):
            return path, "text with an unpaired surrogate (\\ud800-\\udfff) is not valid Unicode"
    return None


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


async def _reply(send: Any, status: int, detail: Any) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
