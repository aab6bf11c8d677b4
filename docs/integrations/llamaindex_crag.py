"""LlamaIndex: retrieved nodes graded by CragNodePostprocessor, the workflow branching on its decision.

LlamaIndex's CorrectiveRAG workflow asks an LLM about every retrieved node, then rewrites the query and
searches the web when any node is irrelevant. Here the postprocessor grades first and only the uncertain
band reaches the LLM; ``grade_nodes`` returns the decision the workflow branches on (rewrite and web search
are stand-ins: no internet). Counts LLM grading calls on the demo golden set.

Run: python docs/integrations/llamaindex_crag.py [--llm-model M --llm-base-url URL] [--json out.json]
"""

from __future__ import annotations

from collections import Counter

from _demo import Demo, arguments
from llama_index.core.schema import NodeWithScore, TextNode

from grader.integrations.llamaindex import CragNodePostprocessor


def main() -> None:
    demo = Demo(arguments(__doc__))
    postprocessor = CragNodePostprocessor(grader=demo.grader)
    chunks = escalated = 0
    decisions: Counter[str] = Counter()
    for question in demo.questions:
        nodes = [NodeWithScore(node=TextNode(text=text, id_=cid, metadata={"source": source}))
                 for cid, text, source in demo.retrieve(question)]
        graded = postprocessor.grade_nodes(nodes, question)
        chunks += len(nodes)
        escalated += sum(n.node.metadata["crag_decided_by"] == "llm" for n in graded.nodes) + len(graded.uncertain)
        decisions[graded.decision.value] += 1
        # a workflow would now branch: "correct" -> synthesize from graded.nodes; otherwise rewrite + web search
    demo.report("llamaindex", chunks, escalated, dict(decisions))


if __name__ == "__main__":
    main()
