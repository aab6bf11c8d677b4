"""A bundle's answerability floor: how likely the best retrieved chunk must be before a grader-only answer.

Without an LLM, the corrective pipeline answers extractively from whatever strips pass the lower
threshold, so a question whose answer is not in the corpus still gets a "partial answer" built from
related text. The floor says when to abstain instead: answer only when some chunk reaches it.

A question is *answerable* when at least one of its labelled chunks is relevant or partial (carries at least
part of the answer, as everywhere in crag-grader: a partial answer is an answer). Each question's best
probability is the highest the grader gives its chunks (rule-decided chunks count as 0, as ``grade``
gives them). The floor is the highest that still answers a stated share of the answerable questions in
every group (e.g. domain): a higher floor abstains on more unanswerable questions but also on more
answerable ones, and the user states which loss they accept. It is fitted on one set of questions and,
when ``test`` data is given, reported on another that took no part in the choice.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from grader.cross_encoder import CrossEncoderGrader
from models.errors import ConfigError
from training.data import LabelledPair, PairSet, groups_of
from training.metrics import auroc
from training.model_card import rewrite_card_section
from training.recalibrate import write_derived_bundle

__all__ = ["DEFAULT_MIN_ANSWER_RATE", "MIN_PER_CLASS", "QueryBest", "answerability_report", "best_per_query",
           "fit_answer_floor", "write_answerability"]

MIN_PER_CLASS = 10  # answerable (unanswerable) questions a group needs to bind (to report on) the floor
DEFAULT_MIN_ANSWER_RATE = 0.75
ALL = "all"


@dataclass(frozen=True)
class QueryBest:
    """One question: its group, whether any of its chunks is positive, and the grader's best probability."""

    query_id: str
    group: str
    answerable: bool
    best: float


def best_per_query(grader: CrossEncoderGrader, pairs: Sequence[LabelledPair],
                   group_by: str | None = None) -> list[QueryBest]:
    """Each question's best probability over its chunks, as ``grade`` would give them."""
    if not pairs:
        raise ConfigError("answerability needs labelled pairs; the data is empty")
    probabilities = grader.scores_as_graded([(p.query, p.text) for p in pairs], block=256).probabilities
    best: dict[str, float] = {}
    answerable: dict[str, bool] = {}
    first: dict[str, LabelledPair] = {}  # a question's group is its first pair's
    for pair, probability in zip(pairs, probabilities, strict=True):
        best[pair.query_id] = max(best.get(pair.query_id, 0.0), float(probability))
        answerable[pair.query_id] = answerable.get(pair.query_id, False) or pair.positive
        first.setdefault(pair.query_id, pair)
    groups = groups_of(list(first.values()), group_by) or [ALL] * len(first)
    return [QueryBest(q, group or "(none)", answerable[q], best[q]) for q, group in zip(first, groups, strict=True)]


def _by_group(rows: Sequence[QueryBest]) -> dict[str, list[QueryBest]]:
    groups: dict[str, list[QueryBest]] = defaultdict(list)
    for row in rows:
        groups[row.group].append(row)
    return dict(sorted(groups.items()))


def _rates(rows: Sequence[QueryBest], floor: float) -> dict[str, Any]:
    answerable = np.array([r.best for r in rows if r.answerable])
    unanswerable = np.array([r.best for r in rows if not r.answerable])
    answer_rate = float(np.mean(answerable >= floor)) if answerable.size else None
    abstention_rate = float(np.mean(unanswerable < floor)) if unanswerable.size else None
    both = answerable.size and unanswerable.size
    return {
        "answerable": int(answerable.size), "unanswerable": int(unanswerable.size),
        "answer_rate": answer_rate, "abstention_rate": abstention_rate,
        "balanced_accuracy": (answer_rate + abstention_rate) / 2 if both else None,  # type: ignore[operator]
        "auroc": auroc(np.r_[np.ones(answerable.size), np.zeros(unanswerable.size)],
                       np.r_[answerable, unanswerable]) if both else None,
    }


def answerability_report(rows: Sequence[QueryBest], floor: float) -> dict[str, dict[str, Any]]:
    """Answer rate, abstention rate, balanced accuracy and AUROC of the best probability, per group."""
    return {group: _rates(members, floor) for group, members in _by_group(rows).items()}


def fit_answer_floor(rows: Sequence[QueryBest], *, min_answer_rate: float = DEFAULT_MIN_ANSWER_RATE,
                     min_per_class: int = MIN_PER_CLASS) -> dict[str, Any]:
    """The highest floor that still answers ``min_answer_rate`` of the answerable questions in every group holding
    ``min_per_class`` of them: the worst group binds, as the thresholds hold their target in every domain. Any
    higher floor would abstain on more unanswerable questions, so this is the most abstention that answer rate
    allows. Raises unless some group has ``min_per_class`` unanswerable questions to show what the floor buys."""
    if min_per_class < 1:
        raise ConfigError(f"min_per_class must be at least 1, got {min_per_class}")
    if not 0.0 < min_answer_rate <= 1.0:
        raise ConfigError(f"min_answer_rate must be in (0, 1], got {min_answer_rate}")
    groups = _by_group(rows)
    answerable = {g: sorted((r.best for r in m if r.answerable), reverse=True) for g, m in groups.items()}
    unanswerable = {g: sum(not r.answerable for r in m) for g, m in groups.items()}
    answer_groups = [g for g, best in answerable.items() if len(best) >= min_per_class]
    abstain_groups = [g for g, n in unanswerable.items() if n >= min_per_class]
    if not answer_groups or not abstain_groups:
        seen = ", ".join(f"{g}: {len(answerable[g])} answerable / {unanswerable[g]} unanswerable" for g in groups)
        fixes = []
        if not answer_groups:
            fixes.append("add questions with a relevant or partial chunk")
        if not abstain_groups:
            fixes.append("add questions whose answer is not in their chunks")
        if (not answer_groups and any(answerable.values())) or (not abstain_groups and any(unanswerable.values())):
            fixes.append("lower --min-per-class")  # only where some group has a few of the missing kind
        raise ConfigError(f"fitting an answerability floor needs groups with at least {min_per_class} answerable and "
                          f"{min_per_class} unanswerable questions (none of whose chunks is relevant or partial); got "
                          f"{seen}. To fix: {'; or '.join(fixes)}")
    # answering min_answer_rate of n questions needs the k-th best of them at or above the floor
    kth = {g: answerable[g][math.ceil(min_answer_rate * len(answerable[g]) - 1e-9) - 1] for g in answer_groups}
    binding = min(kth, key=lambda g: kth[g])
    floor = float(kth[binding])
    fit = answerability_report(rows, floor)
    return {"floor": floor, "min_answer_rate": min_answer_rate, "binding_group": binding,
            "objective": f"highest floor answering at least {min_answer_rate:.0%} of the answerable questions in "
                         "every domain",
            "answer_groups": answer_groups, "abstain_groups": abstain_groups, "min_per_class": min_per_class,
            "mean_abstention_rate": float(np.mean([fit[g]["abstention_rate"] for g in abstain_groups])),
            "questions": len(rows), "fit": fit}


def write_answerability(source_model: str | Path, out: str | Path, entry: dict[str, Any], data: PairSet,
                        settings: dict[str, Any]) -> Path:
    """A new bundle: the source's files with ``answerability`` set (what data, what command, what it measured)."""

    def change(manifest: dict[str, Any]) -> None:
        manifest["answerability"] = {**entry, "fitted_on": data.summary(), "fitted_with": settings}

    out = write_derived_bundle(source_model, out, change, model_card=False)
    rewrite_card_section(out, "## Answerability floor (grader-only answers)")
    return out
