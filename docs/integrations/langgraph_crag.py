"""The LangGraph CRAG tutorial's graph with crag-grader's node in place of its per-chunk LLM grader.

retrieve -> grade_documents -> decide_to_generate -> (transform_query -> web_search ->) generate, as in the
tutorial; ``grade_documents`` is ``grade_documents_node(grader)``. Rewriting and web search are stand-ins
here (no internet, no generator LLM needed): what is measured is how many LLM grading calls the golden set
costs with the small grader deciding first, against the tutorial's one call per retrieved chunk.

Run: python docs/integrations/langgraph_crag.py [--llm-model M --llm-base-url URL] [--json out.json]
"""

from __future__ import annotations

from collections import Counter
from typing import TypedDict

from _demo import Demo, arguments
from langchain_core.documents import Document
from langgraph.graph import END, START, StateGraph

from grader.integrations.langchain import grade_documents_node


class GraphState(TypedDict, total=False):
    question: str
    generation: str
    web_search: str
    documents: list[Document]
    decision: str


def build(demo: Demo):
    def retrieve(state):
        return {"documents": [Document(page_content=text, id=cid, metadata={"source": source})
                              for cid, text, source in demo.retrieve(state["question"])]}

    def transform_query(state):  # the tutorial asks an LLM to rewrite; kept as is here
        return {"question": state["question"]}

    def web_search(state):  # the tutorial calls Tavily; this machine has no internet
        return {"documents": state["documents"]}

    def generate(state):
        return {"generation": " ".join(d.page_content for d in state["documents"])[:500]}

    def decide_to_generate(state):  # unchanged from the tutorial
        return "transform_query" if state["web_search"] == "Yes" else "generate"

    graph = StateGraph(GraphState)
    for name, node in [("retrieve", retrieve), ("grade_documents", grade_documents_node(demo.grader)),
                       ("transform_query", transform_query), ("web_search_node", web_search),
                       ("generate", generate)]:
        graph.add_node(name, node)
    graph.add_edge(START, "retrieve")
    graph.add_edge("retrieve", "grade_documents")
    graph.add_conditional_edges("grade_documents", decide_to_generate,
                                {"transform_query": "transform_query", "generate": "generate"})
    graph.add_edge("transform_query", "web_search_node")
    graph.add_edge("web_search_node", "generate")
    graph.add_edge("generate", END)
    return graph.compile()


def main() -> None:
    demo = Demo(arguments(__doc__))
    app = build(demo)
    chunks = escalated = 0
    decisions: Counter[str] = Counter()
    for question in demo.questions:
        state = app.invoke({"question": question})
        retrieved = len(demo.retrieve(question))
        chunks += retrieved
        escalated += sum(d.metadata["crag_decided_by"] == "llm" or d.metadata["crag_uncertain"]
                         for d in state["documents"])
        decisions[state["decision"]] += 1
    demo.report("langgraph", chunks, escalated, dict(decisions))


if __name__ == "__main__":
    main()
