# mypy: disable-error-code="name-defined"
"""Haystack: a component that grades documents and routes on the CRAG decision.

``CragDocumentGrader(grader=load_grader("default"))`` takes ``query`` and ``documents`` and emits
``relevant_documents``, ``uncertain_documents`` and ``decision`` ("correct", "ambiguous" or "incorrect"),
ready for a ``ConditionalRouter`` that sends anything but "correct" to a query rewrite or web search.
Documents get ``crag_*`` metadata and their score set to the calibrated probability; the inputs are not
changed. ``run_async`` grades in a worker thread. Needs ``pip install 'crag-grader[haystack]'``.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from grader.integrations.sorting import check_items, grade_metadata, sort_by_grade
from grader.protocol import Grader, check_grader
from models.deps import require

haystack = require("haystack", "haystack")  # a runtime value to mypy: hence name-defined is off above

__all__ = ["CragDocumentGrader"]


@haystack.component
class CragDocumentGrader:
    """Relevant, uncertain (unresolved) and the CRAG decision, from any crag-grader Grader."""

    def __init__(self, grader: Grader) -> None:
        self.grader = check_grader(grader)

    @haystack.component.output_types(relevant_documents=list[haystack.Document],
                                      uncertain_documents=list[haystack.Document], decision=str)
    def run(self, query: str, documents: list[haystack.Document]) -> dict[str, Any]:
        check_items(documents, "a Haystack Document", lambda d: isinstance(d, haystack.Document))
        sorted_ = sort_by_grade(self.grader, query, [d.content or "" for d in documents], [d.id for d in documents])

        def graded(i: int) -> haystack.Document:
            return dataclasses.replace(documents[i], score=sorted_.grades[i].probability,
                                       meta={**documents[i].meta, **grade_metadata(sorted_.grades[i])})

        return {"relevant_documents": [graded(i) for i in sorted_.relevant],
                "uncertain_documents": [graded(i) for i in sorted_.uncertain],
                "decision": sorted_.decision.value}

    @haystack.component.output_types(relevant_documents=list[haystack.Document],
                                      uncertain_documents=list[haystack.Document], decision=str)
    async def run_async(self, query: str, documents: list[haystack.Document]) -> dict[str, Any]:
        return await asyncio.to_thread(self.run, query, documents)
