"""Threshold policy and CRAG's pure decision rule.

Graders score; :func:`decide` maps a query's grades to CORRECT / AMBIGUOUS / INCORRECT. The two CRAG
thresholds live in a :class:`ThresholdPolicy` stored in the bundle manifest.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from models.errors import ConfigError
from models.types import Decision, Grade, Verdict

__all__ = ["ThresholdPolicy", "answer_floor_of", "decide"]


@dataclass(frozen=True, kw_only=True)
class ThresholdPolicy:
    """``p >= upper`` auto-accepts, ``p <= lower`` auto-rejects, the band between is uncertain.

    ``decision`` is the cut used for the best-guess verdict inside the band; left unset it is 0.5
    clipped into [lower, upper].
    """

    lower: float = 0.2
    upper: float = 0.8
    decision: float = None  # type: ignore[assignment]  # set in __post_init__

    def __post_init__(self) -> None:
        if self.decision is None and isinstance(self.lower, float | int) and isinstance(self.upper, float | int):
            object.__setattr__(self, "decision", min(max(0.5, self.lower), self.upper))
        for name in ("lower", "upper", "decision"):
            value = getattr(self, name)
            if not isinstance(value, float | int) or not 0.0 <= value <= 1.0:
                raise ConfigError(f"ThresholdPolicy.{name} must be a number in [0, 1], got {value!r}")
        if not self.lower <= self.decision <= self.upper:
            raise ConfigError(
                f"ThresholdPolicy needs lower <= decision <= upper, got lower={self.lower}, "
                f"decision={self.decision}, upper={self.upper}"
            )

    def verdict(self, probability: float, *, withheld: bool = False) -> tuple[Verdict, bool]:
        """Best-guess verdict and whether it needs a second opinion: the probability is inside the uncertain band,
        or the grade is ``withheld`` (above the band, but a swapped opposite: :mod:`grader.contrast`)."""
        if probability >= self.upper:
            return Verdict.RELEVANT, withheld
        if probability <= self.lower:
            return Verdict.IRRELEVANT, withheld
        return (Verdict.RELEVANT if probability >= self.decision else Verdict.IRRELEVANT), True

    def to_dict(self) -> dict[str, float]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> ThresholdPolicy:
        """Read ``lower``/``upper``/``decision`` from a manifest entry (other keys are reports)."""
        if not data:
            return cls()
        try:
            return cls(
                lower=float(data["lower"]), upper=float(data["upper"]),
                decision=float(data["decision"]) if data.get("decision") is not None else None,  # type: ignore[arg-type]
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"thresholds entry {data!r:.200} is malformed: {exc}") from exc


def answer_floor_of(entry: dict[str, Any] | None, bundle: str = "the bundle") -> float | None:
    """The answerability floor a manifest's ``answerability`` entry holds (None when it holds none): a
    grader-only answer needs some chunk at or above it (``crag answerability`` fits it)."""
    if not entry or entry.get("floor") is None:
        return None
    floor = entry["floor"]
    if isinstance(floor, bool) or not isinstance(floor, float | int) or not 0.0 <= floor <= 1.0:
        raise ConfigError(f"{bundle}: answerability floor must be a number in [0, 1], got {floor!r}; refit it with "
                          "`crag answerability`")
    return float(floor)


def _verdict_of(grade: Grade, policy: ThresholdPolicy | None) -> tuple[Verdict, bool]:
    if policy is not None and grade.decided_by == "model":
        return policy.verdict(grade.probability, withheld=grade.withheld)
    return grade.verdict, grade.uncertain


def decide(grades: Sequence[Grade], policy: ThresholdPolicy | None = None) -> Decision:
    """CRAG's rule: any confident relevant chunk -> CORRECT; all confidently irrelevant -> INCORRECT.

    With a ``policy``, model-decided grades are re-read against its thresholds; without one, each
    grade's own ``verdict``/``uncertain`` is used. LLM and heuristic grades keep their verdict.
    No grades at all is INCORRECT: nothing was retrieved.
    """
    if isinstance(grades, (str, bytes, Grade)):
        raise ConfigError(f"decide takes the list of Grade that grade() returns, got one {type(grades).__name__}: "
                          f"{grades!r:.80}")
    grades = list(grades)
    stray = next((g for g in grades if not isinstance(g, Grade)), None)
    if stray is not None:
        raise ConfigError(f"decide takes the list of Grade that grade() returns, got an item of type "
                          f"{type(stray).__name__}: {stray!r:.80}")
    if policy is not None and not isinstance(policy, ThresholdPolicy):
        raise ConfigError(f"policy must be a ThresholdPolicy (e.g. grader.policy), got {type(policy).__name__}")
    read = [_verdict_of(g, policy) for g in grades]
    if any(v is Verdict.RELEVANT and not unsure for v, unsure in read):
        return Decision.CORRECT
    if all(v is Verdict.IRRELEVANT and not unsure for v, unsure in read):
        return Decision.INCORRECT
    return Decision.AMBIGUOUS
