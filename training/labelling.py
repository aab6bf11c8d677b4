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
from grader.llm_structured import base_url_of
from models.deps import require
from models.errors import LLMError
from training.data import LabelledPair

__all__ = ["FAIL_FAST_QUERIES", "LabellingResult", "label_with_llm"]

#: When every pair of this many first queries fails, the LLM is down or misconfigured: stop, do not grind on.
FAIL_FAST_QUERIES = 3


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
    judged_any = False
    first_reason = ""  # the first failure is the cause; later ones may only say the circuit is open
    with tqdm(total=len(pairs), desc="labelling", unit="pair", disable=not progress) as bar:
        for n, members in enumerate(by_query.values()):
            results = llm.judge(pairs[members[0]].query, [pairs[i].text for i in members])
            judged_any = judged_any or not all(isinstance(r, LLMFailure) for r in results)
            first_reason = first_reason or next((r.reason for r in results if isinstance(r, LLMFailure)), "")
            if not judged_any and n + 1 >= min(FAIL_FAST_QUERIES, len(by_query)):
                raise LLMError(f"the LLM {llm.model!r} at {_endpoint(llm)} failed every pair of the first {n + 1} "
                               f"queries (first: {first_reason}); is the server running and the model name right? "
                               "Nothing was written.")
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


def _endpoint(llm: LLMGrader) -> str:
    """The URL the LLM client talks to, for error messages."""
    return base_url_of(llm.config) or "https://api.openai.com/v1 (OpenAI)"
