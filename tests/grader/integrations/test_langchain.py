"""The LangChain compressor, the LangGraph CRAG tutorial's graph with our node, and chat-model escalation."""

import asyncio
import subprocess
import sys
from typing import TypedDict

import pytest
from langchain_core.documents import Document
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langgraph.graph import END, START, StateGraph

from grader.cascade import CascadeGrader
from grader.integrations.langchain import CragDocumentCompressor, cascade_with_chat_model, grade_documents_node
from models import ConfigError
from tests.grader.integrations.conftest import QUERY, TEXTS

DOCS = [Document(page_content=t, id=f"d{i}", metadata={"source": f"s{i}"}) for i, t in enumerate(TEXTS)]


def test_compressor_drops_irrelevant_and_annotates_without_touching_inputs(small, band):
    no_llm = CascadeGrader(primary=small, escalate_to=None, policy=band)
    kept = CragDocumentCompressor(grader=no_llm).compress_documents(DOCS, QUERY)
    assert [d.id for d in kept] == ["d0", "d2", "d3"]  # bananas dropped, input order kept
    assert kept[0].metadata["crag_verdict"] == "relevant" and kept[0].metadata["source"] == "s0"
    assert kept[1].metadata["crag_uncertain"] and kept[1].metadata["crag_decided_by"] == "model"
    assert 0 <= kept[0].metadata["crag_probability"] <= 1
    assert all("crag_verdict" not in d.metadata for d in DOCS)
    strict = CragDocumentCompressor(grader=no_llm, keep_uncertain=False)
    assert [d.id for d in asyncio.run(strict.acompress_documents(DOCS, QUERY))] == ["d0"]


def test_a_withheld_swap_is_routed_as_uncertain_and_says_why(swap_grader):
    swapped = Document(page_content="Right ventricular hypertrophy is treated by addressing the pulmonary cause.",
                       id="swap")
    (kept,) = CragDocumentCompressor(grader=swap_grader).compress_documents([swapped], "left ventricular "
                                                                                       "hypertrophy treatment")
    assert kept.metadata["crag_uncertain"] and "'right ventricular'" in kept.metadata["crag_withheld"]
    assert not CragDocumentCompressor(grader=swap_grader, keep_uncertain=False).compress_documents(
        [swapped], "left ventricular hypertrophy treatment")


class GraphState(TypedDict, total=False):
    question: str
    generation: str
    web_search: str
    documents: list[Document]
    decision: str


def tutorial_graph(grader):
    """The LangGraph CRAG tutorial's graph, with our node in place of its per-chunk LLM grader."""
    visited = []

    def retrieve(state):
        return {"documents": DOCS, "question": state["question"]}

    def transform_query(state):
        visited.append("transform_query")
        return {"question": state["question"] + " (rewritten)"}

    def web_search(state):
        visited.append("web_search")
        return {"documents": state["documents"]}

    def generate(state):
        visited.append("generate")
        return {"generation": " ".join(d.page_content for d in state["documents"])}

    def decide_to_generate(state):  # unchanged from the tutorial
        return "transform_query" if state["web_search"] == "Yes" else "generate"

    graph = StateGraph(GraphState)
    for name, fn in [("retrieve", retrieve), ("grade_documents", grade_documents_node(grader)),
                     ("transform_query", transform_query), ("web_search_node", web_search), ("generate", generate)]:
        graph.add_node(name, fn)
    graph.add_edge(START, "retrieve")
    graph.add_edge("retrieve", "grade_documents")
    graph.add_conditional_edges("grade_documents", decide_to_generate,
                                {"transform_query": "transform_query", "generate": "generate"})
    graph.add_edge("transform_query", "web_search_node")
    graph.add_edge("web_search_node", "generate")
    graph.add_edge("generate", END)
    return graph.compile(), visited


def test_graph_escalates_only_the_uncertain_band_to_the_llm(cascade, server):
    app, visited = tutorial_graph(cascade)
    state = app.invoke({"question": QUERY})
    assert len(server.requests) == 2  # four chunks, one LLM call per uncertain chunk, not one per chunk
    assert [d.id for d in state["documents"]] == ["d0", "d2", "d3"]
    assert {d.metadata["crag_decided_by"] for d in state["documents"][1:]} == {"llm"}
    assert state["decision"] == "correct" and state["web_search"] == "No" and visited == ["generate"]


def test_graph_degrades_when_the_llm_fails(cascade, server):
    server.default = "500"
    app, visited = tutorial_graph(cascade)
    state = app.invoke({"question": QUERY})
    flagged = [d for d in state["documents"] if "crag_escalation_failed" in d.metadata]
    assert [d.id for d in flagged] == ["d2", "d3"] and all(d.metadata["crag_uncertain"] for d in flagged)
    assert visited == ["generate"]  # the confident chunk still makes the retrieval correct


def test_graph_goes_to_rewrite_when_nothing_is_relevant(small, band):
    app, visited = tutorial_graph(CascadeGrader(primary=small, escalate_to=None, policy=band))
    state = app.invoke({"question": "Which fruit grows in tropical regions and is rich in potassium?"})
    assert state["decision"] != "correct" and state["web_search"] == "Yes"
    assert visited == ["transform_query", "web_search", "generate"]


def test_the_node_names_what_its_state_lacks(small):
    node = grade_documents_node(small)
    with pytest.raises(ConfigError, match=r"has no 'question' or 'documents' \(its keys: \['query'\]\)"):
        node({"query": QUERY})  # a graph whose state says "query": used to be KeyError('question')
    with pytest.raises(ConfigError, match=r"documents\[1\] must be a LangChain Document .*got str: 'plain text'"):
        node({"question": QUERY, "documents": [DOCS[0], "plain text"]})
    with pytest.raises(ConfigError, match="must be a LangChain Document"):
        CragDocumentCompressor(grader=small).compress_documents(["plain text"], QUERY)
    assert node({"question": QUERY, "documents": []})["decision"] == "incorrect"
    with pytest.raises(ConfigError, match=r"documents must be a list of LangChain Document .*got str: 'plain text'"):
        node({"question": QUERY, "documents": "plain text"})  # was "documents[0] ... got str: 'p'"


def test_an_adapter_without_a_grader_is_refused_when_it_is_made():
    with pytest.raises(ConfigError, match="grader must be a crag-grader Grader"):
        grade_documents_node(None)  # was an AttributeError at the first state graded
    with pytest.raises(ValueError, match="grader must be a crag-grader Grader"):  # pydantic's ValidationError
        CragDocumentCompressor(grader="default")


def test_a_chat_model_decides_the_uncertain_band(small, band):
    chat = GenericFakeChatModel(messages=iter([AIMessage(content="Yes."), AIMessage(content="no")]))
    grades = cascade_with_chat_model(small, chat, policy=band).grade(QUERY, TEXTS)
    assert [g.decided_by for g in grades] == ["model", "model", "llm", "llm"]
    assert sorted(g.verdict.value for g in grades[2:]) == ["irrelevant", "relevant"]  # one yes, one no


class Broken(GenericFakeChatModel):
    def invoke(self, *args, **kwargs):
        raise ConnectionError("provider down")


@pytest.mark.parametrize("chat", [Broken(messages=iter([])),
                                  GenericFakeChatModel(messages=iter([AIMessage(content="maybe")] * 2))])
def test_chat_model_failures_keep_the_small_grade_flagged(small, band, chat):
    grades = cascade_with_chat_model(small, chat, policy=band).grade(QUERY, TEXTS)
    assert all(g.decided_by == "model" and g.escalation_failed and g.uncertain for g in grades[2:])
    assert "chat model" in grades[2].reason


def test_without_langchain_the_error_names_the_extra():
    code = ("import sys; sys.modules['langchain_core'] = None; sys.modules['langchain_core.documents'] = None\n"
            "import grader.integrations.langchain")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode != 0 and "pip install 'crag-grader[langchain]'" in result.stderr
