"""``crag label --ray``: LLM labelling as a Ray Data job, the same output as the local command.

Queries (with all their pairs) are spread over ``actors`` actors; each holds one LLM client whose
``concurrency`` bounds its requests in flight, so the whole cluster never has more than
``actors x concurrency`` LLM requests open. Retries, the circuit breaker and the fail-fast check are the
local command's (each actor runs :func:`training.labelling.label_with_llm` on its share). Labelled pairs come
back in input order; pairs the LLM could not judge are returned with the reason, never dropped.
"""

from __future__ import annotations

import pickle
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from grader.llm import LLMConfig, LLMGrader
from models.deps import require
from models.errors import ConfigError
from training.data import LabelledPair
from training.labelling import LabellingResult, label_with_llm

__all__ = ["label_with_ray"]


class LabellingActor:
    """One LLM client per actor; labels whole queries and returns (index, pair or reason) records."""

    def __init__(self, config: LLMConfig) -> None:
        self.llm = LLMGrader(config)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, list[Any]]:
        indexed: list[tuple[int, LabelledPair]] = [item for payload in batch["payload"]
                                                   for item in pickle.loads(payload)]
        calls_before = self.llm.stats.calls
        result = label_with_llm(self.llm, [p for _, p in indexed], progress=False)
        index_of = {(p.query, p.text): i for i, p in indexed}  # pairs are unique per (query, text) once loaded
        rows = sorted([(index_of[(p.query, p.text)], p, None) for p in result.labelled]
                      + [(index_of[(p.query, p.text)], p, why) for p, why in result.failed], key=lambda row: row[0])
        calls = [self.llm.stats.calls - calls_before] + [0] * (len(rows) - 1)  # this batch's calls, counted once
        return {"result": [pickle.dumps(row) for row in rows], "calls": calls[:len(rows)]}


def label_with_ray(config: LLMConfig, pairs: Sequence[LabelledPair], *, address: str | None, actors: int = 2,
                   queries_per_task: int = 8) -> tuple[LabellingResult, int]:
    """Label ``pairs`` on Ray (``address`` None starts a local runtime); returns the result and LLM calls."""
    if actors < 1 or queries_per_task < 1:
        raise ConfigError(f"--ray-actors and queries per task must be >= 1, got {actors}, {queries_per_task}")
    ray = require("ray", "ray")
    start = time.perf_counter()
    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    groups: dict[str, list[tuple[int, LabelledPair]]] = {}
    for i, pair in enumerate(pairs):
        groups.setdefault(pair.query_id, []).append((i, pair))
    items = [{"payload": pickle.dumps(group)} for group in groups.values()]
    context = ray.data.DataContext.get_current()
    context.execution_options.preserve_order = True
    dataset = ray.data.from_items(items, override_num_blocks=max(1, -(-len(items) // queries_per_task)))
    # LLM-bound actors wait on the network: they reserve no CPU, so they never starve each other
    labelled = dataset.map_batches(LabellingActor, fn_constructor_kwargs={"config": config}, batch_size=None,
                                   batch_format="numpy", concurrency=actors, num_cpus=0)
    rows: list[tuple[int, LabelledPair, str | None]] = []
    calls = 0
    for batch in labelled.iter_batches(batch_format="numpy"):
        for payload, batch_calls in zip(batch["result"], batch["calls"], strict=True):
            rows.append(pickle.loads(payload))
            calls += int(batch_calls)
    rows.sort(key=lambda row: row[0])
    result = LabellingResult([p for _, p, why in rows if why is None],
                             [(p, why) for _, p, why in rows if why is not None], time.perf_counter() - start)
    return result, calls
