"""Group-aware splits: no query (or article) appears in two splits."""

from __future__ import annotations

from collections.abc import Sequence

from models.deps import require
from models.errors import ConfigError
from training.data import LabelledPair

__all__ = ["GROUP_KEYS", "group_of", "group_split"]

GROUP_KEYS = ("query", "source")


def group_of(pair: LabelledPair, by: str) -> str:
    """The split group of a pair: its query id, or its source (falling back to the query id)."""
    if by == "query":
        return pair.query_id
    if by == "source":
        return pair.source or pair.query_id
    raise ConfigError(f"unknown split key {by!r}; choose one of {list(GROUP_KEYS)}")


def group_split(
    pairs: Sequence[LabelledPair], *, test_size: float = 0.15, by: str = "query", seed: int = 13
) -> tuple[list[LabelledPair], list[LabelledPair]]:
    """Split pairs into (train, held-out) with scikit-learn's GroupShuffleSplit."""
    if not 0.0 < test_size < 1.0:
        raise ConfigError(f"test_size must be in (0, 1), got {test_size}")
    groups = [group_of(p, by) for p in pairs]
    if len(set(groups)) < 2:
        raise ConfigError(f"cannot split by {by!r}: all {len(pairs)} pairs share one group")
    model_selection = require("sklearn.model_selection", "eval")
    splitter = model_selection.GroupShuffleSplit(n_splits=1, test_size=test_size, random_state=seed)
    train_idx, test_idx = next(splitter.split(list(range(len(pairs))), groups=groups))
    return [pairs[i] for i in sorted(train_idx)], [pairs[i] for i in sorted(test_idx)]
