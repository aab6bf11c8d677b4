"""The LlamaIndex postprocessor inside a real (in-memory) query engine, sync and async."""

import asyncio

import pytest
from llama_index.core import VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.llms import MockLLM
from llama_index.core.schema import NodeWithScore, TextNode

from grader.cascade import CascadeGrader
from grader.integrations.llamaindex import CragNodePostprocessor
from models import ConfigError
from tests.grader.integrations.conftest import QUERY, TEXTS

NODES = [TextNode(text=t, id_=f"n{i}", metadata={"source": f"s{i}"}) for i, t in enumerate(TEXTS)]


def test_query_engine_keeps_relevant_nodes_scored_by_probability(cascade, server):
    index = VectorStoreIndex(NODES, embed_model=MockEmbedding(embed_dim=8))
    engine = index.as_query_engine(llm=MockLLM(), similarity_top_k=4,
                                   node_postprocessors=[CragNodePostprocessor(grader=cascade)])
    response = engine.query(QUERY)
    assert sorted(n.node.node_id for n in response.source_nodes) == ["n0", "n2", "n3"]
    assert len(server.requests) == 2  # only the uncertain band reached the LLM
    for node in response.source_nodes:
        assert node.score == pytest.approx(node.node.metadata["crag_probability"])
        assert node.node.metadata["crag_decision"] == "correct" and node.node.metadata["source"].startswith("s")


def test_decision_is_exposed_and_inputs_are_untouched(small, band):
    post = CragNodePostprocessor(grader=CascadeGrader(primary=small, escalate_to=None, policy=band),
                                 keep_uncertain=False)
    scored = [NodeWithScore(node=n, score=0.5) for n in NODES]
    graded = post.grade_nodes(scored, QUERY)
    assert graded.decision.value == "correct"
    assert [n.node.node_id for n in graded.nodes] == ["n0"] and len(graded.uncertain) == 2
    assert all("crag_verdict" not in n.node.metadata and n.score == 0.5 for n in scored)
    other = "Which fruit is rich in potassium?"  # the async path grades with the query it is given
    kept = asyncio.run(post.apostprocess_nodes(scored, query_str=other))
    expected = {f"n{i}": g.probability for i, g in enumerate(small.grade(other, TEXTS))}
    assert "n1" in [n.node.node_id for n in kept]  # the banana chunk answers this query, not the Eiffel one
    assert all(n.node.metadata["crag_probability"] == pytest.approx(expected[n.node.node_id]) for n in kept)
    with pytest.raises(ValueError, match="needs the query"):
        post.postprocess_nodes(scored)


def test_llm_failure_is_flagged_not_raised(cascade, server):
    server.default = "500"
    kept = CragNodePostprocessor(grader=cascade).postprocess_nodes([NodeWithScore(node=n) for n in NODES],
                                                                    query_str=QUERY)
    assert [n.node.node_id for n in kept] == ["n0", "n2", "n3"]
    assert all("crag_escalation_failed" in n.node.metadata for n in kept[1:])


def test_a_plain_string_among_the_nodes_is_named(small):
    nodes = [NodeWithScore(node=TextNode(text=TEXTS[0])), "plain text"]
    with pytest.raises(ConfigError, match=r"documents\[1\] must be a LlamaIndex NodeWithScore, got str: 'plain text'"):
        CragNodePostprocessor(grader=small).grade_nodes(nodes, QUERY)  # used to be AttributeError: 'str' ... 'node'
    with pytest.raises(ValueError, match="grader must be a crag-grader Grader"):  # pydantic's ValidationError
        CragNodePostprocessor(grader=None)
