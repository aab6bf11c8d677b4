"""``crag eval --cascade``: what the cascade gives against escalation rate, for a real LLM and a simulated one.

For an escalation level e, the band is the share e of pairs whose calibrated probability is closest to
the decision cut (label-free, so nothing is tuned on the gold labels). Bands are nested, so the real
LLM judges the widest band once and every level reuses those answers. The simulated LLM is right with a
stated probability, drawn from the gold labels: a planning tool, labelled as a simulation.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from grader.cross_encoder import CrossEncoderGrader
from grader.llm import LLMFailure, LLMGrader, LLMJudgement
from models.deps import require
from models.errors import ConfigError
from models.progress import progress
from training.data import LabelledPair
from training.metrics import binary_labels

__all__ = ["DEFAULT_LEVELS", "evaluate_cascade"]

DEFAULT_LEVELS = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5)


def _scores(y: np.ndarray, predicted: np.ndarray, auto: np.ndarray) -> dict[str, float]:
    skm = require("sklearn.metrics", "eval")
    return {
        "accuracy": float(skm.accuracy_score(y, predicted)),
        "macro_f1": float(skm.f1_score(y, predicted, average="macro", zero_division=0)),
        "auto_error_rate": float((predicted[auto] != y[auto]).mean()) if auto.any() else 0.0,
    }


def evaluate_cascade(
    primary: CrossEncoderGrader,
    pairs: Sequence[LabelledPair],
    *,
    llm: LLMGrader | None = None,
    levels: Sequence[float] = DEFAULT_LEVELS,
    simulated_accuracy: Sequence[float] = (0.8, 0.9, 0.95),
    seed: int = 13,
) -> dict[str, Any]:
    """Rows per escalation level for the real LLM (if given) and each simulated accuracy."""
    if not pairs:
        raise ConfigError("cascade evaluation needs labelled pairs")
    if any(not 0.0 <= e <= 1.0 for e in levels):
        raise ConfigError(f"escalation levels must lie in [0, 1], got {list(levels)}")
    if any(not 0.0 <= a <= 1.0 for a in simulated_accuracy):  # an LLM right 150% of the time is no simulation
        raise ConfigError(f"simulated LLM accuracies must lie in [0, 1], got {list(simulated_accuracy)}")
    start = time.perf_counter()
    texts = [(p.query, p.text) for p in pairs]
    graded = primary.scores_as_graded(texts)  # rule-decided pairs as grade gives them: P 0, never escalated
    probs, ruled = graded.probabilities, graded.ruled
    model_seconds = time.perf_counter() - start
    y = binary_labels(pairs)
    model_pred = (probs >= primary.policy.decision).astype(int)
    order = np.argsort(np.where(ruled, np.inf, np.abs(probs - primary.policy.decision)), kind="stable")
    n_model = int((~ruled).sum())

    def band_of(level: float) -> np.ndarray:
        """The pairs escalated at ``level`` (a share of all pairs): the closest to the cut, never rule-decided."""
        return order[: min(round(level * len(pairs)), n_model)]

    queries: dict[str, list[int]] = defaultdict(list)
    for i, p in enumerate(pairs):
        queries[p.query_id].append(i)
    n_queries = len(queries)
    model_ms = 1000.0 * model_seconds / n_queries
    report: dict[str, Any] = {"n": len(pairs), "queries": n_queries,
                              "model_ms_per_query": model_ms,
                              "band": "share of pairs closest to the decision cut", "real_llm": None,
                              "simulated": {}}
    widest = band_of(max(levels))
    if llm is not None:
        judged: dict[int, LLMJudgement | LLMFailure] = {}
        chunk_ms = np.zeros(len(pairs))  # the LLM time of a query's call, shared among its escalated chunks
        in_widest = set(widest.tolist())
        for members in progress(queries.values(), desc="LLM grading", total=len(queries), unit="query"):
            band_members = [i for i in members if i in in_widest]
            if not band_members:
                continue
            t0 = time.perf_counter()
            results = llm.judge(pairs[band_members[0]].query, [pairs[i].text for i in band_members])
            chunk_ms[band_members] = 1000.0 * (time.perf_counter() - t0) / len(band_members)
            judged.update(zip(band_members, results, strict=True))
        rows = []
        for level in levels:
            band = band_of(level)
            predicted, failures, cost, calls = model_pred.copy(), 0, 0.0, 0
            for i in band:
                result = judged[int(i)]
                if isinstance(result, LLMJudgement):
                    predicted[i] = int(result.verdict.is_positive)
                    cost += result.cost_usd
                    calls += 1
                else:
                    failures += 1
            auto = np.ones(len(pairs), dtype=bool)
            auto[band] = False
            latency = [model_ms + float(chunk_ms[members][~auto[members]].sum()) for members in queries.values()]
            rows.append({"escalation_rate": float(level), **_scores(y, predicted, auto),
                         "llm_calls_per_query": calls / n_queries, "llm_failures": failures,
                         "p50_latency_ms_per_query": float(np.median(latency)), "cost_usd": cost})
        report["real_llm"] = {"model": llm.model, "mode": llm.config.mode, "rows": rows}
    rng = np.random.default_rng(seed)
    for accuracy in simulated_accuracy:
        correct = rng.random(len(pairs)) < accuracy
        simulated_pred = np.where(correct, y, 1 - y)
        rows = []
        for level in levels:
            band = band_of(level)
            predicted = model_pred.copy()
            predicted[band] = simulated_pred[band]
            auto = np.ones(len(pairs), dtype=bool)
            auto[band] = False
            rows.append({"escalation_rate": float(level), **_scores(y, predicted, auto),
                         "llm_calls_per_query": len(band) / n_queries})
        report["simulated"][f"llm_accuracy_{accuracy:.2f}"] = {
            "note": f"SIMULATION: an LLM right {accuracy:.0%} of the time, drawn from the gold labels", "rows": rows}
    return report
