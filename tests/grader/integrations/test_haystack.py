"""The Haystack component in a real pipeline: BM25 retrieval, grading, and a ConditionalRouter on the decision."""

import asyncio

import pytest
from haystack import Document, Pipeline
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.components.routers import ConditionalRouter
from haystack.document_stores.in_memory import InMemoryDocumentStore

from grader.cascade import CascadeGrader
from grader.integrations.haystack import CragDocumentGrader
from models import ConfigError
from tests.grader.integrations.conftest import QUERY, TEXTS

DOCS = [Document(id=f"h{i}", content=t, meta={"source": f"s{i}"}) for i, t in enumerate(TEXTS)]
ROUTES = [
    {"condition": "{{ decision == 'correct' }}", "output": "{{ documents }}", "output_name": "to_generate",
     "output_type": list[Document]},
    {"condition": "{{ decision != 'correct' }}", "output": "{{ query }}", "output_name": "to_web_search",
     "output_type": str},
]


def pipeline(grader) -> Pipeline:
    store = InMemoryDocumentStore()
    store.write_documents(DOCS)
    pipe = Pipeline()
    pipe.add_component("retriever", InMemoryBM25Retriever(store, top_k=4))
    pipe.add_component("grader", CragDocumentGrader(grader))
    pipe.add_component("router", ConditionalRouter(ROUTES, unsafe=True))  # unsafe: outputs Document objects
    pipe.connect("retriever.documents", "grader.documents")
    pipe.connect("grader.relevant_documents", "router.documents")
    pipe.connect("grader.decision", "router.decision")
    return pipe


def test_pipeline_routes_on_the_decision_and_escalates_only_the_band(cascade, server):
    out = pipeline(cascade).run({"retriever": {"query": QUERY}, "grader": {"query": QUERY},
                                 "router": {"query": QUERY}})
    kept = out["router"]["to_generate"]
    assert sorted(d.id for d in kept) == ["h0", "h2", "h3"] and len(server.requests) == 2
    assert all(d.meta["crag_verdict"] == "relevant" and d.score == pytest.approx(d.meta["crag_probability"])
               for d in kept)


def test_nothing_relevant_routes_to_web_search(small, band):
    query = "Which fruit grows in tropical regions?"
    out = pipeline(CascadeGrader(primary=small, escalate_to=None, policy=band)).run(
        {"retriever": {"query": query}, "grader": {"query": query}, "router": {"query": query}})
    assert out["router"] == {"to_web_search": query}


def test_uncertain_documents_and_async(small, band):
    component = CragDocumentGrader(CascadeGrader(primary=small, escalate_to=None, policy=band))
    out = asyncio.run(component.run_async(query=QUERY, documents=DOCS))
    assert [d.id for d in out["relevant_documents"]] == ["h0"]
    assert [d.id for d in out["uncertain_documents"]] == ["h2", "h3"] and out["decision"] == "correct"
    assert all(d.meta["crag_uncertain"] for d in out["uncertain_documents"]) and DOCS[0].score is None


def test_a_plain_string_among_the_documents_is_named(small):
    with pytest.raises(ConfigError, match=r"documents\[0\] must be a Haystack Document, got str: 'plain text'"):
        CragDocumentGrader(small).run(query=QUERY, documents=["plain text"])  # used to be an AttributeError
    with pytest.raises(ConfigError, match="grader must be a crag-grader Grader"):
        CragDocumentGrader(None)
