"""One exception tree for the whole project.

Every error a user can trigger derives from :class:`CragError`, so callers can catch one type.
Third-party errors are translated at a single boundary with ``raise ... from exc``.
"""

from __future__ import annotations

__all__ = [
    "BundleError",
    "ConfigError",
    "CragError",
    "DataError",
    "DataShiftWarning",
    "LLMError",
    "MissingDependencyError",
    "NotFittedError",
    "ParityError",
    "StoreError",
]


class CragError(Exception):
    """Base class of every error raised by crag-grader."""


class ConfigError(CragError, ValueError):
    """A configuration value is invalid; the message names the value and the fix."""


class DataError(CragError, ValueError):
    """A labelled data file is unreadable or holds an invalid record (file, line and value in the message)."""


class BundleError(CragError):
    """A grader bundle is missing, incomplete, tampered with or of an unknown format."""


class MissingDependencyError(CragError, ImportError):
    """An optional dependency is not installed; the message names the extra to install, ``extra`` too."""

    def __init__(self, message: str, *, extra: str | None = None) -> None:
        super().__init__(message)
        self.extra = extra


class NotFittedError(CragError, RuntimeError):
    """A calibrator or policy was used before ``fit``."""


class ParityError(CragError):
    """An exported model disagrees with its torch reference beyond the allowed tolerance."""


class LLMError(CragError):
    """An LLM call failed after its retries (server down, invalid output, refusal, truncation)."""


class StoreError(CragError):
    """A search store outside the process (a Qdrant server) failed or could not be reached."""


class DataShiftWarning(UserWarning):
    """The live data has moved away from the data the grader's thresholds were calibrated on."""
