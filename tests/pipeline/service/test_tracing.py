"""OpenTelemetry spans of /v1/* requests and of corrective runs, read back from the SDK's in-memory exporter."""

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.pipeline.service.test_service import _auth, _client

QUESTION = "What is the capital of France?"


@pytest.fixture(scope="module")
def exporter():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)  # once per process: the SDK refuses a second global provider
    return exporter


def ancestors(span, exporter) -> set[int]:
    by_id = {s.context.span_id: s for s in exporter.get_finished_spans()}
    out = set()
    while span.parent is not None and span.parent.span_id in by_id:
        out.add(span.parent.span_id)
        span = by_id[span.parent.span_id]
    return out


def test_a_query_is_one_tree_of_spans_without_tenant_text_or_keys(exporter, tmp_path, keys, grader, server):
    exporter.clear()
    with _client(tmp_path, keys, grader, llm_server=server) as client:
        response = client.post("/v1/query", json={"query": QUESTION}, headers=_auth(keys[1]["a"]))
        assert response.status_code == 200
    spans = {s.name: s for s in exporter.get_finished_spans()}
    http, run = spans["crag.http /v1/query"], spans["crag.run"]
    assert http.context.span_id in ancestors(run, exporter)  # the run went to a worker thread with its context
    steps = [s for s in exporter.get_finished_spans() if s.parent and s.parent.span_id == run.context.span_id]
    names = {s.name for s in steps}
    assert {"crag.retrieve", "crag.grade", "crag.generate", "crag.verify"} <= names
    assert http.attributes["http.response.status_code"] == 200 and http.attributes["http.route"] == "/v1/query"
    assert run.attributes["crag.outcome"] == response.json()["outcome"]
    assert run.attributes["crag.llm_calls"] == response.json()["llm_calls"]
    grade = next(s for s in steps if s.name == "crag.grade")
    assert grade.attributes["crag.chunks"] >= 1 and grade.start_time <= grade.end_time
    assert run.start_time <= grade.start_time and grade.end_time <= run.end_time
    secret = keys[1]["a"]
    for s in exporter.get_finished_spans():
        for key, value in s.attributes.items():
            assert "tenant" not in key and "query" not in key
            assert not (isinstance(value, str) and ("France" in value or secret in value or "Paris" in value))


def test_escalations_and_grade_requests_are_spans(exporter, tmp_path, keys, grader, server):
    exporter.clear()
    chunks = [{"text": "Paris is the capital and largest city of France."}, {"text": "Lyon is a city in France."}]
    with _client(tmp_path, keys, grader, llm_server=server) as client:
        graded = client.post("/v1/grade", json={"query": QUESTION, "chunks": chunks}, headers=_auth(keys[1]["a"]))
        client.post("/v1/nothing-here", json={}, headers=_auth(keys[1]["a"]))
        client.get("/healthz")
    names = [s.name for s in exporter.get_finished_spans()]
    assert "crag.http /v1/grade" in names and "crag.http /v1/(unknown)" in names
    assert not any(n.startswith("crag.") and "healthz" in n for n in names)  # FastAPI may trace it itself
    if graded.json()["escalated"]:
        escalate = next(s for s in exporter.get_finished_spans() if s.name == "crag.escalate")
        assert escalate.attributes["crag.chunks"] >= 1 and escalate.attributes["crag.failures"] == 0
