"""Value types shared by every package: chunks, grades, verdicts and decisions.

All are frozen, keyword-only dataclasses so that graders can never mutate what callers pass in.
"""

from __future__ import annotations

import enum
import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from models.errors import ConfigError

__all__ = ["NON_BLANK", "Chunk", "Decision", "Grade", "Verdict", "as_chunk", "is_blank"]

NON_BLANK = r"[^ \t\n\r\f\v]"
"""A text is blank unless it has a character outside ASCII whitespace (the API's JSON-Schema ``pattern``)."""


def is_blank(text: str) -> bool:
    """True for empty or ASCII-whitespace-only text, the one definition every boundary uses."""
    return re.search(NON_BLANK, text) is None


class Verdict(str, enum.Enum):
    """How well one chunk serves one query."""

    RELEVANT = "relevant"
    PARTIAL = "partial"
    IRRELEVANT = "irrelevant"

    @property
    def is_positive(self) -> bool:
        """True for relevant and partial: the chunk carries at least part of the answer."""
        return self is not Verdict.IRRELEVANT


class Decision(str, enum.Enum):
    """CRAG's retrieval-level decision over all grades of one query."""

    CORRECT = "correct"
    AMBIGUOUS = "ambiguous"
    INCORRECT = "incorrect"


@dataclass(frozen=True, kw_only=True)
class Chunk:
    """A retrieved piece of text with its provenance."""

    text: str
    chunk_id: str | None = None
    source: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise ConfigError(f"Chunk.text must be a str, got {type(self.text).__name__}: {self.text!r:.80}")
        for name in ("chunk_id", "source"):  # ids key caches, logs and citations: 5 and "5" must not both exist
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise ConfigError(f"Chunk.{name} must be a str or None, got {type(value).__name__}: {value!r:.80}")
        if not isinstance(self.metadata, dict):
            raise ConfigError(f"Chunk.metadata must be a dict, got {type(self.metadata).__name__}: "
                              f"{self.metadata!r:.80}")


def as_chunk(value: Chunk | str) -> Chunk:
    """Accept a plain string or a :class:`Chunk`; anything else is a clear error."""
    if isinstance(value, Chunk):
        return value
    if isinstance(value, str):
        return Chunk(text=value)
    raise ConfigError(f"a chunk must be a str or Chunk, got {type(value).__name__}: {value!r:.80}")


@dataclass(frozen=True, kw_only=True)
class Grade:
    """The grade of one chunk: verdict, calibrated probability and who decided it.

    ``probability`` is the calibrated P(chunk is relevant or partially relevant).
    ``uncertain`` is true when the probability lies inside the policy's band, i.e. the small model
    would escalate it. ``decided_by`` is ``"model"``, ``"llm"`` or ``"heuristic"``. ``withheld`` marks a
    probability above the band that is still not accepted without a second opinion (the chunk speaks of the
    opposite of what was asked: :mod:`grader.contrast`); such a grade is uncertain whatever the thresholds.
    """

    verdict: Verdict
    probability: float
    decided_by: str = "model"
    uncertain: bool = False
    logit: float | None = None
    truncated: bool = False
    windows: int = 1  # windows of max_length tokens the model read (0: decided by a rule, not read)
    chunk_id: str | None = None
    llm_verdict: Verdict | None = None
    llm_probability: float | None = None
    escalation_failed: bool = False
    withheld: bool = False
    reason: str | None = None
    latency_ms: float = 0.0
    cost_usd: float = 0.0

    def __post_init__(self) -> None:
        for name in ("verdict", "llm_verdict"):  # "relevant" from your own grader: the Verdict it names
            value = getattr(self, name)
            if (value is None and name == "llm_verdict") or isinstance(value, Verdict):
                continue
            known = [v.value for v in Verdict]
            if not isinstance(value, str) or value not in known:
                raise ConfigError(f"Grade.{name} must be a Verdict or one of {known}, got {value!r}")
            object.__setattr__(self, name, Verdict(value))
        if not (isinstance(self.probability, float | int) and 0.0 <= self.probability <= 1.0):
            raise ConfigError(f"Grade.probability must be in [0, 1], got {self.probability!r}")
        if self.decided_by not in ("model", "llm", "heuristic"):
            raise ConfigError(f"Grade.decided_by must be 'model', 'llm' or 'heuristic', got {self.decided_by!r}")
        if self.logit is not None and not math.isfinite(self.logit):
            raise ConfigError(f"Grade.logit must be finite, got {self.logit!r}")

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict with enum values as strings."""
        out = asdict(self)
        out["verdict"] = self.verdict.value
        out["llm_verdict"] = self.llm_verdict.value if self.llm_verdict else None
        return out
