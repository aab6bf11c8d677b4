"""Build a :class:`CorrectiveRAG` from plain settings, for `crag ask`, `crag eval-pipeline` and the service."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from grader.cascade import CascadeGrader
from grader.cross_encoder import CrossEncoderGrader
from grader.factory import load_grader
from grader.llm import LLMConfig, LLMGrader
from grader.llm_structured import StructuredLLM
from grader.protocol import PolicyGrader
from grader.resilience import check_http_url
from models.errors import ConfigError
from pipeline.corrective.generation import LLMAnswerer
from pipeline.corrective.loop import CorrectiveRAG, RAGConfig
from pipeline.retrieval.index import Retriever
from pipeline.retrieval.web_search import PrivacyGuard, SearxNGSearch, TavilySearch, WebSearchProvider

__all__ = ["PipelineSettings", "build_rag", "web_provider"]

WEB_PROVIDERS = ("tavily", "searxng")


@dataclass(frozen=True, kw_only=True)
class PipelineSettings:
    """Everything a pipeline needs besides the retriever. ``llm=None`` is grader-only mode."""

    model: str = "default"
    threads: int | None = None
    llm: LLMConfig | None = None
    web: str | None = None
    web_url: str | None = None
    web_api_key_env: str = "TAVILY_API_KEY"
    privacy_patterns: tuple[str, ...] | None = None
    rag: RAGConfig = field(default_factory=RAGConfig)


def web_provider(kind: str | None, url: str | None, api_key_env: str = "TAVILY_API_KEY") -> WebSearchProvider | None:
    """A Tavily or SearxNG client, or None when ``kind`` is None."""
    if kind is None:
        if url:  # a URL with no provider would be ignored: the user meant a web tier and would get none
            raise ConfigError(f"a web search URL ({url}) was given without a provider; pass --web searxng or "
                              "--web tavily with it")
        return None
    if url:
        check_http_url(url, "the web search URL", "http://127.0.0.1:8888")
    if kind == "tavily":
        key = os.environ.get(api_key_env, "")
        if not key:
            raise ConfigError(f"web search 'tavily' needs an API key in ${api_key_env}")
        return TavilySearch(key, base_url=url or "https://api.tavily.com")
    if kind == "searxng":
        if not url:
            raise ConfigError("web search 'searxng' needs the instance URL (--web-url http://host:8888)")
        return SearxNGSearch(url)
    raise ConfigError(f"unknown web search provider {kind!r}; choose one of {list(WEB_PROVIDERS)}")


def build_rag(retriever: Retriever, settings: PipelineSettings, *, primary: PolicyGrader | None = None,
              llm_grader: LLMGrader | None = None) -> CorrectiveRAG:
    """The cascade (when an LLM is set) over the small grader, LLM answerer, web tier and privacy guard.

    Pass ``primary`` and ``llm_grader`` to share one loaded grader and one LLM client (with its circuit
    breaker) between many pipelines and endpoints (the service does).
    """
    if primary is None:
        loaded = load_grader(settings.model, threads=settings.threads)
        if not isinstance(loaded, CrossEncoderGrader):
            raise ConfigError(f"model must be a cross-encoder bundle, got {type(loaded).__name__}")
        primary = loaded
    grader: PolicyGrader | CascadeGrader = primary
    answerer = None
    if settings.llm is not None:
        llm_grader = llm_grader or LLMGrader(settings.llm)
        grader = CascadeGrader(primary=primary, escalate_to=llm_grader)
        answerer = LLMAnswerer(StructuredLLM(settings.llm, breaker=llm_grader.breaker))
    privacy = PrivacyGuard() if settings.privacy_patterns is None else PrivacyGuard(patterns=settings.privacy_patterns)
    return CorrectiveRAG(retriever, grader, policy=primary.policy, config=settings.rag, answerer=answerer,
                         web=web_provider(settings.web, settings.web_url, settings.web_api_key_env), privacy=privacy)
