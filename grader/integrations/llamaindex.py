"""LlamaIndex: a node postprocessor that grades retrieved nodes and exposes the CRAG decision.

``CragNodePostprocessor(grader=load_grader("default"))`` keeps relevant nodes (and unresolved uncertain
ones unless ``keep_uncertain=False``), sets each kept node's score to the calibrated probability and
writes ``crag_*`` fields into its metadata, including ``crag_decision``; :meth:`grade_nodes` also returns
the decision, so a workflow can branch to a query rewrite or web search. Async through
``apostprocess_nodes``. Needs ``pip install 'crag-grader[llamaindex]'``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from grader.integrations.sorting import check_items, grade_metadata, sort_by_grade
from grader.protocol import check_grader
from models.deps import require
from models.types import Decision

schema = require("llama_index.core.schema", "llamaindex")
postprocessor_types = require("llama_index.core.postprocessor.types", "llamaindex")
pydantic = require("pydantic", "llamaindex")

__all__ = ["CragNodePostprocessor", "GradedNodes"]


@dataclass(frozen=True)
class GradedNodes:
    """Kept nodes (score = calibrated probability), the unresolved uncertain ones, and the CRAG decision."""

    nodes: list[Any]
    uncertain: list[Any]
    decision: Decision


class CragNodePostprocessor(postprocessor_types.BaseNodePostprocessor):  # type: ignore[misc,name-defined,unused-ignore]
    """Grades ``NodeWithScore`` objects with any crag-grader Grader (the small model or the cascade)."""

    model_config = pydantic.ConfigDict(arbitrary_types_allowed=True)
    grader: Any
    keep_uncertain: bool = True

    @pydantic.field_validator("grader")
    @classmethod
    def _can_grade(cls, grader: Any) -> Any:
        return check_grader(grader)

    @classmethod
    def class_name(cls) -> str:
        return "CragNodePostprocessor"

    def grade_nodes(self, nodes: list[Any], query: str) -> GradedNodes:
        """The kept nodes in input order, new objects (the inputs are not changed), and the decision."""
        check_items(nodes, "a LlamaIndex NodeWithScore", lambda n: hasattr(getattr(n, "node", None), "get_content"))
        sorted_ = sort_by_grade(self.grader, query, [n.node.get_content() for n in nodes],
                                [n.node.node_id for n in nodes])

        def rescored(i: int) -> Any:
            node = nodes[i].node.model_copy(deep=True)
            node.metadata.update({**grade_metadata(sorted_.grades[i]), "crag_decision": sorted_.decision.value})
            return schema.NodeWithScore(node=node, score=sorted_.grades[i].probability)

        return GradedNodes([rescored(i) for i in sorted_.kept(self.keep_uncertain)],
                           [rescored(i) for i in sorted_.uncertain], sorted_.decision)

    def _postprocess_nodes(self, nodes: list[Any], query_bundle: Any = None) -> list[Any]:
        if query_bundle is None:
            raise ValueError("CragNodePostprocessor needs the query: pass query_str= or query_bundle=")
        return self.grade_nodes(nodes, query_bundle.query_str).nodes

    async def _apostprocess_nodes(self, nodes: list[Any], query_bundle: Any = None) -> list[Any]:
        return await asyncio.to_thread(self._postprocess_nodes, nodes, query_bundle)
