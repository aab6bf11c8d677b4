"""The corrective loop with an LLM and web search at its edges: generation with citations, grounding vetoes,
the shared LLM budget, fallback tiers, privacy and degradation when outside services fail."""

import json

import pytest

from grader.cascade import CascadeGrader
from grader.llm import LLMConfig, LLMGrader
from grader.llm_structured import StructuredLLM
from grader.policy import ThresholdPolicy
from grader.resilience import RetryPolicy
from pipeline.corrective.generation import LLMAnswerer
from pipeline.corrective.loop import CorrectiveRAG, Outcome, RAGConfig
from pipeline.retrieval.documents import Principal
from pipeline.retrieval.web_search import SearxNGSearch
from tests.fakes.web_search_server import FakeWebSearch
from tests.pipeline.conftest import TENANT_A

FAST = RetryPolicy(attempts=2, base_s=0.01, cap_s=0.01)


def _llm_config(server, **kw):
    return LLMConfig(model="fake", base_url=server.base_url, api_key="k", mode="json_object", timeout_s=2.0,
                     retry=FAST, **kw)


def _rag(index, grader, server, *, web=None, policy=None, **config):
    cfg = _llm_config(server)
    cascade = CascadeGrader(primary=grader, escalate_to=LLMGrader(cfg), policy=policy)
    return CorrectiveRAG(index, cascade, config=RAGConfig(**config), answerer=LLMAnswerer(StructuredLLM(cfg)),
                         web=web, policy=policy)


def _kinds(server):
    systems = [r["messages"][0]["content"] for r in server.requests]
    return {"generate": sum(s.startswith("You answer") for s in systems),
            "verify": sum(s.startswith("You check") for s in systems)}


def test_generated_answer_cites_chunks_and_is_verified(index, grader, server):
    result = _rag(index, grader, server).run("What is the capital of France?", TENANT_A)
    assert result.outcome in (Outcome.ANSWER, Outcome.PARTIAL_ANSWER)
    assert result.grounding == "verified" and "[a-paris]" in result.answer
    assert [s["chunk_id"] for s in result.sources] == ["a-paris"]
    assert _kinds(server) == {"generate": 1, "verify": 1}
    assert result.llm_calls == len(server.requests) and not result.degraded
    steps = {t.action: t.detail for t in result.trace}
    assert steps["generate"]["claims"] >= 1 and steps["ground"]["grounded"] is True
    assert steps["compose"]["grounding"] == "verified" and steps["compose"]["sources"] == ["a-paris"]


def test_unsupported_claim_triggers_one_revision(index, grader, server):
    server.default = "hallucinate"
    result = _rag(index, grader, server).run("What is the capital of France?", TENANT_A)
    assert result.grounding == "verified" and "green cheese" not in result.answer
    assert _kinds(server) == {"generate": 2, "verify": 2}
    traced = [(t.action, t.detail.get("revision", t.detail.get("grounded"))) for t in result.trace
              if t.action in ("generate", "ground")]
    assert traced == [("generate", False), ("ground", False), ("generate", True), ("ground", True)]
    revision = [json.loads(r["messages"][-1]["content"]) for r in server.requests
                if r["messages"][0]["content"].startswith("You answer")][1]
    assert "green cheese" in revision["fix_these_unsupported_claims"][0]


def test_answer_with_no_supported_claim_becomes_an_abstention_stating_why(index, grader, server):
    server.default = "hallucinate_always"
    result = _rag(index, grader, server).run("What is the capital of France?", TENANT_A)
    assert result.outcome is Outcome.ABSTENTION and result.answer is None
    assert "support none" in result.message and "green cheese" not in result.message  # rejected text never shown
    assert "green cheese" not in json.dumps(result.to_dict()["sources"])


def test_revision_that_keeps_unsupported_claims_is_needs_revision(index, grader, server):
    server.default = "hallucinate"
    no_band = ThresholdPolicy(lower=0.4, upper=0.4)  # nothing escalated: the 3 calls are all for answering
    rag = _rag(index, grader, server, max_llm_calls=3, policy=no_band)  # generate + verify, no budget to revise
    result = rag.run("What is the capital of France?", TENANT_A)
    assert result.outcome is Outcome.PARTIAL_ANSWER and result.grounding == "needs_revision"
    assert "green cheese" not in result.answer and "Paris" in result.answer and "removed" in result.message
    assert "green cheese" not in result.message


def test_citations_of_unknown_chunks_fail_without_asking_the_verifier(index, grader, server):
    server.default = "bad_citation"
    result = _rag(index, grader, server).run("What is the capital of France?", TENANT_A)
    assert result.outcome is Outcome.ABSTENTION and "never given" in result.message
    assert _kinds(server)["verify"] == 0


def test_llm_outage_degrades_to_an_extractive_answer_never_an_error(index, grader, server):
    server.default = "500"
    result = _rag(index, grader, server).run("What is the capital of France?", TENANT_A)
    assert result.outcome in (Outcome.ANSWER, Outcome.PARTIAL_ANSWER) and result.grounding == "extractive"
    assert result.degraded and any("unavailable" in r for r in result.degraded_reasons)


def test_zero_llm_budget_means_no_llm_call_at_all(index, grader, server):
    result = _rag(index, grader, server, max_llm_calls=0).run("What are bananas rich in?", TENANT_A)
    assert server.requests == [] and result.llm_calls == 0 and result.grounding in ("extractive", "none")


def test_no_llm_request_ever_contains_a_chunk_the_caller_may_not_read(index, grader, server):
    rag = _rag(index, grader, server)
    for query in ("What is the merger code name for Project Falcon?", "When was invoice INV-2044 paid?",
                  "What does Project Falcon do on Sundays?"):
        rag.run(query, TENANT_A)
    sent = json.dumps(server.requests)
    assert "BLUEBIRD" not in sent and "bird-watching" not in sent and "2024-03-01" not in sent


@pytest.fixture
def web():
    fake = FakeWebSearch([{"title": "Mars - Wikipedia", "url": "https://en.wikipedia.org/wiki/Mars",
                           "content": "Mars is the fourth planet from the Sun, known as the Red Planet."}]).start()
    yield fake
    fake.stop()


def test_fallback_tiers_end_in_web_search_with_urls(index, grader, server, web):
    rag = _rag(index, grader, server, web=SearxNGSearch(web.url, retry=FAST))
    result = rag.run("Which planet is known as the Red Planet?", TENANT_A)
    actions = [t.action for t in result.trace]
    assert actions.count("retrieve") == 2 and "web_search" in actions and "rewrite" in actions
    assert web.requests and web.requests[0]["query"] == "planet Red"  # the rewritten query: content words only
    if result.sources:
        assert any(s.get("url") == "https://en.wikipedia.org/wiki/Mars" for s in result.sources)
        assert result.tier == "web search"


def test_confidential_queries_never_reach_the_web(index, grader, server, web):
    rag = _rag(index, grader, server, web=SearxNGSearch(web.url, retry=FAST))
    for query, kw in (("Which planet is known as the Red Planet?", {"confidential": True}),
                      ("Which planet did invoice INV-7781 mention?", {})):
        result = rag.run(query, TENANT_A, **kw)
        step = next(t for t in result.trace if t.action == "web_search")
        assert "privacy rule" in step.detail["skipped"]
    assert web.requests == []


def test_web_outage_is_flagged_and_the_run_still_ends(index, grader, server, web):
    web.script = ["500", "500"]
    rag = _rag(index, grader, server, web=SearxNGSearch(web.url, retry=FAST))
    result = rag.run("Which planet is known as the Red Planet?", TENANT_A)
    assert result.degraded and any("web search unavailable" in r for r in result.degraded_reasons)
    assert result.outcome in (Outcome.ABSTENTION, Outcome.PARTIAL_ANSWER, Outcome.ANSWER)


def test_rounds_and_deadline_bound_the_loop(index, grader, server):
    one = _rag(index, grader, server, max_rounds=1).run("Which planet is known as the Red Planet?", TENANT_A)
    assert [t.action for t in one.trace].count("retrieve") == 1
    late = _rag(index, grader, server, deadline_s=1e-6).run("Which planet is known as the Red Planet?", TENANT_A)
    assert any(t.action == "stop" and t.detail["reason"] == "deadline reached" for t in late.trace)


def test_weak_web_evidence_alone_is_never_synthesised_into_an_answer(index, grader, web):
    nobody = Principal(tenant="nobody-has-documents")
    provider = SearxNGSearch(web.url, retry=FAST)
    weak = CorrectiveRAG(index, grader, web=provider, policy=ThresholdPolicy(lower=1e-4, upper=0.9999))
    result = weak.run("Which planet is known as the Red Planet?", nobody)
    assert web.requests and result.outcome is Outcome.ABSTENTION and "weak web results" in result.message
    confident = CorrectiveRAG(index, grader, web=provider, policy=ThresholdPolicy(lower=1e-4, upper=1e-3))
    answered = confident.run("Which planet is known as the Red Planet?", nobody)
    assert answered.outcome in (Outcome.ANSWER, Outcome.PARTIAL_ANSWER) and answered.tier == "web search"
    assert answered.sources[0]["url"] == "https://en.wikipedia.org/wiki/Mars" and "Red Planet" in answered.answer


def test_escalations_leave_the_calls_an_llm_written_answer_needs(index, grader, server):
    everything_uncertain = ThresholdPolicy(lower=0.0, upper=1.0)  # every chunk and strip would go to the LLM
    result = _rag(index, grader, server, max_llm_calls=3, policy=everything_uncertain).run(
        "What is the capital of France?", TENANT_A)
    assert _kinds(server) == {"generate": 1, "verify": 1}  # the answer is written and checked by the LLM
    assert result.grounding == "verified" and result.llm_calls == len(server.requests) == 3  # one escalation


def test_the_llm_reads_each_quoted_section_led_by_its_heading(tmp_path, grader, server):
    from pipeline.retrieval.index import LocalHybridIndex
    from tests.pipeline.conftest import HashEmbedder, make_chunk

    index = LocalHybridIndex(tmp_path / "api-idx", embedder=HashEmbedder())
    index.add([make_chunk("a-vec", "# Vec\n\n#### pub fn dedup(&mut self)\n\nRemoves consecutive repeated elements "
                          "in the vector.", title="Vec")])
    _rag(index, grader, server).run("How do I remove consecutive repeated elements from a vector?", TENANT_A)
    generate = [json.loads(r["messages"][-1]["content"]) for r in server.requests
                if r["messages"][0]["content"].startswith("You answer")]
    assert generate and generate[0]["passages"] == [
        {"id": "a-vec", "text": "pub fn dedup(&mut self): Removes consecutive repeated elements in the vector."}]


def test_an_answerer_without_an_llm_is_refused_when_it_is_made():
    from models import ConfigError

    for llm in (None, "gpt-4o-mini"):
        with pytest.raises(ConfigError, match="llm must be a StructuredLLM"):
            LLMAnswerer(llm)  # was accepted, and failed only once a question reached the LLM
