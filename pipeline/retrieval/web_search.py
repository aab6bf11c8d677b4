"""Web search as a fallback tier: a provider protocol, Tavily and SearxNG clients, and a privacy guard.

Results come back as :class:`StoredChunk` with ``source="web"`` and the URL in ``metadata["url"]``, so
the grader and the rest of the pipeline treat them like any other chunk. The :class:`PrivacyGuard`
decides, before any request is made, whether a query may leave the machine at all.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from grader.resilience import CircuitBreaker, RetryPolicy, check_http_url
from models.deps import require
from models.errors import ConfigError, CragError
from pipeline.retrieval.documents import StoredChunk

__all__ = ["PrivacyGuard", "SearxNGSearch", "TavilySearch", "WebSearchError", "WebSearchProvider", "web_chunk"]


class WebSearchError(CragError):
    """The web search provider failed (after retries) or is switched off by its circuit breaker."""


class WebSearchProvider(Protocol):
    name: str

    def search(self, query: str, *, k: int = 5) -> list[StoredChunk]: ...


@dataclass(frozen=True, kw_only=True)
class PrivacyGuard:
    """Queries marked confidential, or matching any configured pattern, never leave for the web.

    The default patterns catch e-mail addresses, long digit runs (accounts, cards) and internal ticket /
    invoice identifiers such as ``INV-2044``; pass ``patterns=()`` to allow those.
    """

    patterns: tuple[str, ...] = (r"[\w.+-]+@[\w-]+\.[\w.]+", r"\b\d{9,}\b", r"\b[A-Z]{2,}-\d{3,}\b")
    _compiled: tuple[re.Pattern[str], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.patterns, (str, bytes)):  # one pattern's letters would each block every query with it
            raise ConfigError(f"patterns must be a collection of regular expressions, not one string: write "
                              f"patterns=({self.patterns!r},)")
        compiled = []
        for pattern in self.patterns:
            if not isinstance(pattern, str):
                raise ConfigError(f"privacy pattern {pattern!r} must be a str (a regular expression)")
            try:
                compiled.append(re.compile(pattern))
            except re.error as exc:
                raise ConfigError(f"privacy pattern {pattern!r} is not a valid regular expression: {exc}") from exc
        object.__setattr__(self, "_compiled", tuple(compiled))

    def blocked_reason(self, query: str, *, confidential: bool = False) -> str | None:
        """Why the query must stay local, or None when it may be sent."""
        if confidential:
            return "the query is marked confidential"
        for pattern in self._compiled:
            if pattern.search(query):
                return f"the query matches the privacy pattern {pattern.pattern!r}"
        return None


def web_chunk(url: str, title: str, text: str, position: int, score: float | None = None) -> StoredChunk:
    """A web result in the index's chunk shape; the id is stable for the same URL and text."""
    digest = hashlib.sha1(f"{url}\n{text}".encode()).hexdigest()[:10]
    return StoredChunk(chunk_id=f"web:{digest}", text=text, tenant="web", source="web", title=title,
                       position=position, metadata={"url": url, "provider_score": score})


def _check_web_search(query: object, k: object) -> None:
    """A query and a result count a provider can be asked for, checked before any request is sent."""
    if not isinstance(query, str) or not query.strip():
        raise ConfigError(f"web search query must be a non-empty string, got {query!r:.80}")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ConfigError(f"web search k must be an int >= 1 (results wanted), got {k!r}")


class _HTTPProvider:
    """Shared transport: timeouts, retries with backoff on 429/5xx/network errors, a circuit breaker."""

    name = "http"

    def __init__(self, base_url: str, *, timeout_s: float = 8.0, retry: RetryPolicy | None = None,
                 breaker: CircuitBreaker | None = None, transport: Any = None) -> None:
        check_http_url(base_url, f"{type(self).__name__} base_url", "https://search.example.com")
        if timeout_s <= 0:
            raise ConfigError(f"timeout_s must be > 0, got {timeout_s}")
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self.retry = retry or RetryPolicy(attempts=2)
        self.breaker = breaker or CircuitBreaker(failures=3, reset_s=30.0)
        self._httpx = require("httpx", "rag")
        self._transport = transport

    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        httpx = self._httpx
        last = "no attempt made"
        for attempt in range(self.retry.attempts):
            if not self.breaker.allow():
                raise WebSearchError(f"{self.name}: circuit open after repeated failures ({last})")
            try:
                with httpx.Client(timeout=self.timeout_s, transport=self._transport) as client:
                    response = client.request(method, self.base_url + path, **kwargs)
            except httpx.TimeoutException:
                last = f"timeout after {self.timeout_s}s"
            except httpx.HTTPError as exc:
                last = f"cannot reach {self.base_url}: {type(exc).__name__}"
            else:
                if response.status_code < 400:
                    try:
                        payload = response.json()
                    except ValueError as exc:
                        self.breaker.record_failure()
                        raise WebSearchError(f"{self.name}: answer is not JSON") from exc
                    self.breaker.record_success()
                    return payload
                last = f"HTTP {response.status_code}"
                if response.status_code not in (429, 500, 502, 503, 504):
                    self.breaker.record_failure()
                    hint = " (check the API key)" if response.status_code in (401, 403) else ""
                    raise WebSearchError(f"{self.name}: request rejected with {last}{hint}")
            self.breaker.record_failure()
            if attempt + 1 < self.retry.attempts:
                time.sleep(self.retry.delay(attempt))
        raise WebSearchError(f"{self.name}: failed after {self.retry.attempts} attempts: {last}")

    @staticmethod
    def _chunks(results: Any, text_key: str, k: int) -> list[StoredChunk]:
        if not isinstance(results, list):
            raise WebSearchError(f"answer has no 'results' list (got {type(results).__name__})")
        out: list[StoredChunk] = []
        for item in results:
            if not isinstance(item, dict):
                continue
            text = str(item.get(text_key) or "").strip()
            url = str(item.get("url") or "").strip()
            if text and url:
                out.append(web_chunk(url, str(item.get("title") or url), text, len(out), item.get("score")))
            if len(out) >= k:
                break
        return out


class TavilySearch(_HTTPProvider):
    """Tavily's hosted search API (``POST /search``); the key comes from the caller, never from a log."""

    name = "tavily"

    def __init__(self, api_key: str, *, base_url: str = "https://api.tavily.com", search_depth: str = "basic",
                 **kwargs: Any) -> None:
        if not api_key:
            raise ConfigError("TavilySearch needs an API key (set TAVILY_API_KEY)")
        if search_depth not in ("basic", "advanced"):
            raise ConfigError(f"search_depth must be 'basic' or 'advanced', got {search_depth!r}")
        super().__init__(base_url, **kwargs)
        self._api_key = api_key
        self.search_depth = search_depth

    def search(self, query: str, *, k: int = 5) -> list[StoredChunk]:
        _check_web_search(query, k)
        payload = self._request("POST", "/search", headers={"Authorization": f"Bearer {self._api_key}"},
                                json={"query": query, "max_results": k, "search_depth": self.search_depth})
        return self._chunks(payload.get("results") if isinstance(payload, dict) else None, "content", k)


class SearxNGSearch(_HTTPProvider):
    """A self-hosted SearxNG instance through its JSON output (``GET /search?format=json``)."""

    name = "searxng"

    def __init__(self, base_url: str, *, categories: Sequence[str] = ("general",), **kwargs: Any) -> None:
        super().__init__(base_url, **kwargs)
        self.categories = ",".join(categories)

    def search(self, query: str, *, k: int = 5) -> list[StoredChunk]:
        _check_web_search(query, k)
        payload = self._request("GET", "/search", params={"q": query, "format": "json",
                                                          "categories": self.categories})
        return self._chunks(payload.get("results") if isinstance(payload, dict) else None, "content", k)
