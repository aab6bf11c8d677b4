"""The one structural Grader protocol every backend, the LLM grader and the cascade implement."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from grader.policy import ThresholdPolicy
from models.types import Chunk, Grade

__all__ = ["Grader", "PolicyGrader"]


@runtime_checkable
class Grader(Protocol):
    """``grade`` returns one Grade per chunk, in input order, with a calibrated probability in [0, 1]."""

    def grade(self, query: str, chunks: Sequence[Chunk | str]) -> list[Grade]: ...


@runtime_checkable
class PolicyGrader(Grader, Protocol):
    """A Grader with a threshold policy: what the cascade needs from its small model."""

    @property
    def policy(self) -> ThresholdPolicy: ...
