"""Haystack: BM25 retrieval -> CragDocumentGrader -> ConditionalRouter (generate, or go to web search).

Haystack's CRAG examples route on an LLM's yes/no for every document. Here the grader's ``decision`` drives
a ConditionalRouter and only the uncertain band reaches the LLM. The demo corpus is loaded into Haystack's
in-memory store. Counts LLM grading calls on the demo golden set.

Run: python docs/integrations/haystack_crag.py [--llm-model M --llm-base-url URL] [--json out.json]
"""

from __future__ import annotations

from collections import Counter

from _demo import Demo, arguments
from haystack import Document, Pipeline
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.components.routers import ConditionalRouter
from haystack.document_stores.in_memory import InMemoryDocumentStore

from grader.integrations.haystack import CragDocumentGrader

ROUTES = [
    {"condition": "{{ decision == 'correct' }}", "output": "{{ decision }}", "output_name": "generate",
     "output_type": str},
    {"condition": "{{ decision != 'correct' }}", "output": "{{ decision }}", "output_name": "web_search",
     "output_type": str},
]


def main() -> None:
    demo = Demo(arguments(__doc__))
    store = InMemoryDocumentStore()
    store.write_documents([Document(id=c.chunk_id, content=c.text, meta={"source": c.source})
                           for c in demo.index.iter_chunks("demo")])
    pipe = Pipeline()
    pipe.add_component("retriever", InMemoryBM25Retriever(store, top_k=demo.args.k))
    pipe.add_component("grader", CragDocumentGrader(demo.grader))
    pipe.add_component("router", ConditionalRouter(ROUTES))
    pipe.connect("retriever.documents", "grader.documents")
    pipe.connect("grader.decision", "router.decision")
    chunks = escalated = 0
    decisions: Counter[str] = Counter()
    for question in demo.questions:
        out = pipe.run({"retriever": {"query": question}, "grader": {"query": question}},
                       include_outputs_from={"retriever", "grader"})
        chunks += len(out["retriever"]["documents"])
        escalated += len(out["grader"]["uncertain_documents"]) + sum(
            d.meta["crag_decided_by"] == "llm" for d in out["grader"]["relevant_documents"])
        decisions[out["grader"]["decision"]] += 1
    demo.report("haystack", chunks, escalated, dict(decisions))


if __name__ == "__main__":
    main()
