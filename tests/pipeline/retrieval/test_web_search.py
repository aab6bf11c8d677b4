"""Web search providers against loopback stand-ins: result shape, faults, retries and the privacy rule."""

import re

import pytest

from grader.resilience import CircuitBreaker, RetryPolicy
from models import ConfigError
from pipeline.retrieval.web_search import PrivacyGuard, SearxNGSearch, TavilySearch, WebSearchError
from tests.fakes.web_search_server import FakeWebSearch

RESULTS = [
    {"title": "Normandy - Wikipedia", "url": "https://en.wikipedia.org/wiki/Normandy",
     "content": "Normandy is a region in northern France.", "score": 0.91},
    {"title": "No text", "url": "https://example.org/empty", "content": ""},
    {"title": "Norman conquest", "url": "https://example.org/conquest", "content": "The Norman conquest of 1066."},
]
FAST = RetryPolicy(attempts=2, base_s=0.01, cap_s=0.01)


@pytest.fixture
def web():
    fake = FakeWebSearch(RESULTS, sleep_s=1.5).start()
    yield fake
    fake.stop()


def test_tavily_returns_web_chunks_with_urls_and_sends_the_key_as_bearer(web):
    chunks = TavilySearch("tvly-secret", base_url=web.url, retry=FAST).search("Where is Normandy?", k=5)
    assert [c.metadata["url"] for c in chunks] == ["https://en.wikipedia.org/wiki/Normandy",
                                                    "https://example.org/conquest"]  # empty content dropped
    assert all(c.source == "web" and c.chunk_id.startswith("web:") for c in chunks)
    request = web.requests[0]
    assert request["path"] == "/search" and request["query"] == "Where is Normandy?" and request["max_results"] == 5
    assert request["headers"]["Authorization"] == "Bearer tvly-secret"


def test_searxng_uses_the_json_format_and_respects_k(web):
    chunks = SearxNGSearch(web.url, retry=FAST).search("Normandy", k=1)
    assert len(chunks) == 1 and chunks[0].title == "Normandy - Wikipedia"
    assert web.requests[0]["params"]["format"] == "json"


def test_server_errors_are_retried_then_succeed(web):
    web.script = ["500"]
    assert SearxNGSearch(web.url, retry=FAST).search("Normandy")
    assert len(web.requests) == 2


@pytest.mark.parametrize(("fault", "message"), [("401", "rejected with HTTP 401 (check the API key)"),
                                                ("not_json", "not JSON")])
def test_final_faults_raise_a_clear_error_without_retrying(web, fault, message):
    web.script = [fault]
    with pytest.raises(WebSearchError, match=re.escape(message)):
        TavilySearch("k", base_url=web.url, retry=FAST).search("Normandy")
    assert len(web.requests) == 1


def test_timeouts_exhaust_retries_and_then_the_breaker_opens(web):
    web.script = ["sleep", "sleep"]
    provider = SearxNGSearch(web.url, timeout_s=0.3, retry=FAST, breaker=CircuitBreaker(failures=2, reset_s=60))
    with pytest.raises(WebSearchError, match="timeout"):
        provider.search("Normandy")
    with pytest.raises(WebSearchError, match="circuit open"):
        provider.search("Normandy")
    assert len(web.requests) == 2


def test_an_upper_case_scheme_is_a_url_like_any_other(web):
    assert SearxNGSearch(web.url.replace("http://", "HTTP://"), retry=FAST).search("Normandy", k=1)


def test_bad_configuration_is_rejected():
    with pytest.raises(ConfigError, match="API key"):
        TavilySearch("")
    with pytest.raises(ConfigError, match="http"):
        SearxNGSearch("localhost:8888")
    with pytest.raises(ConfigError, match="regular expression"):
        PrivacyGuard(patterns=("([unclosed",))
    with pytest.raises(ConfigError, match=r"not one string: write patterns=\('secret',\)"):
        PrivacyGuard(patterns="secret")  # was one pattern per letter: every query with an 's' stayed local
    with pytest.raises(ConfigError, match="must be a str"):
        PrivacyGuard(patterns=(3,))


def test_a_bad_query_or_count_is_refused_before_any_request(web):
    for query, k, said in (("", 5, "non-empty string"), ("Normandy", 0, "k must be an int >= 1"),
                           ("Normandy", "5", "k must be an int")):
        with pytest.raises(ConfigError, match=said):
            SearxNGSearch(web.url, retry=FAST).search(query, k=k)
    assert web.requests == []


def test_privacy_guard_blocks_confidential_and_patterned_queries():
    guard = PrivacyGuard()
    assert guard.blocked_reason("Where is Normandy?") is None
    assert "confidential" in guard.blocked_reason("Where is Normandy?", confidential=True)
    assert guard.blocked_reason("status of invoice INV-2044") is not None
    assert guard.blocked_reason("mail jane.doe@corp.example about it") is not None
    assert PrivacyGuard(patterns=(r"(?i)project falcon",)).blocked_reason("Project Falcon budget") is not None
