import pytest

from models import ConfigError
from pipeline.corrective.assembly import web_provider
from pipeline.retrieval.web_search import SearxNGSearch, TavilySearch


def test_a_web_url_without_a_provider_is_refused_rather_than_ignored():
    assert web_provider(None, None) is None  # no web tier asked for
    with pytest.raises(ConfigError, match=r"web search URL \(http://127.0.0.1:8888\) was given without a provider"):
        web_provider(None, "http://127.0.0.1:8888")  # used to run with no web tier, silently


def test_a_web_url_must_be_http(monkeypatch):
    with pytest.raises(ConfigError, match=r"must be an http:// or https:// URL .*got 'ftp://x'"):
        web_provider("searxng", "ftp://x")
    with pytest.raises(ConfigError, match="needs the instance URL"):
        web_provider("searxng", None)
    assert isinstance(web_provider("searxng", "http://127.0.0.1:8888"), SearxNGSearch)
    monkeypatch.delenv("TAVILY_API_KEY", raising=False)
    with pytest.raises(ConfigError, match=r"needs an API key in \$TAVILY_API_KEY"):
        web_provider("tavily", None)
    monkeypatch.setenv("TAVILY_API_KEY", "tvly-test")
    assert isinstance(web_provider("tavily", None), TavilySearch)
    with pytest.raises(ConfigError, match="unknown web search provider 'bing'"):
        web_provider("bing", None)
