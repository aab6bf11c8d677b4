"""The one structural Grader protocol every backend, the LLM grader and the cascade implement."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from grader.policy import ThresholdPolicy
from models.errors import ConfigError
from models.types import Chunk, Grade

__all__ = ["Grader", "PolicyGrader", "check_grader"]


@runtime_checkable
class Grader(Protocol):
    """``grade`` returns one Grade per chunk, in input order, with a calibrated probability in [0, 1]."""

    def grade(self, query: str, chunks: Sequence[Chunk | str]) -> list[Grade]: ...


@runtime_checkable
class PolicyGrader(Grader, Protocol):
    """A Grader with a threshold policy: what the cascade needs from its small model."""

    @property
    def policy(self) -> ThresholdPolicy: ...


def check_grader(grader: Any, what: str = "grader") -> Any:
    """``grader`` when it can grade (the small model, a CascadeGrader, your own Grader); else a ConfigError naming
    ``what`` when the part that needs it is made, not an AttributeError at the first chunks graded."""
    if not callable(getattr(grader, "grade", None)):
        raise ConfigError(f"{what} must be a crag-grader Grader (load_grader('default') or a CascadeGrader), got "
                          f"{type(grader).__name__}: {grader!r:.80}")
    return grader
