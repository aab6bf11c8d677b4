"""LLM-assisted labelling: unlabelled (query, text) pairs in, labelled pairs with the LLM's reason out.

Pairs the LLM cannot judge are left out and reported, never given a default label.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace

from grader.llm import LLMFailure, LLMGrader
from grader.llm_prompts import PROMPT_VERSION
from models.deps import require
from training.data import LabelledPair

__all__ = ["LabellingResult", "label_with_llm"]


@dataclass
class LabellingResult:
    """Labelled pairs and the ones the LLM could not judge (with the reason)."""

    labelled: list[LabelledPair]
    failed: list[tuple[LabelledPair, str]]
    seconds: float


def label_with_llm(llm: LLMGrader, pairs: Sequence[LabelledPair], *, progress: bool = True) -> LabellingResult:
    """Label every pair with the LLM, one query at a time (its chunks batched as configured)."""
    tqdm = require("tqdm", "train").tqdm
    by_query: dict[str, list[int]] = defaultdict(list)
    for i, pair in enumerate(pairs):
        by_query[pair.query_id].append(i)
    labelled: list[LabelledPair | None] = [None] * len(pairs)
    failed: list[tuple[LabelledPair, str]] = []
    start = time.perf_counter()
    with tqdm(total=len(pairs), desc="labelling", unit="pair", disable=not progress) as bar:
        for members in by_query.values():
            results = llm.judge(pairs[members[0]].query, [pairs[i].text for i in members])
            for i, result in zip(members, results, strict=True):
                if isinstance(result, LLMFailure):
                    failed.append((pairs[i], result.reason))
                else:
                    labelled[i] = replace(pairs[i], label=result.verdict, metadata={
                        **pairs[i].metadata, "labelled_by": "llm", "llm_model": llm.model,
                        "prompt_version": PROMPT_VERSION, "reason": result.reason,
                        "supports_answer": result.supports_answer, "missing_aspects": list(result.missing_aspects),
                        "llm_probability": result.probability,
                    })
            bar.update(len(members))
    return LabellingResult([p for p in labelled if p is not None], failed, time.perf_counter() - start)
