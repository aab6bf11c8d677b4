"""Lazy imports of optional dependencies with an error that names the extra to install."""

from __future__ import annotations

import importlib
from types import ModuleType

from models.errors import MissingDependencyError

__all__ = ["require"]


def require(module: str, extra: str) -> ModuleType:
    """Import ``module`` or raise :class:`MissingDependencyError` naming ``pip install 'crag-grader[extra]'``."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependencyError(
            f"{module!r} is needed for this feature but is not installed; "
            f"install it with: pip install 'crag-grader[{extra}]'", extra=extra
        ) from exc
