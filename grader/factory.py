"""``load_grader``: a lazy factory over a ``"module:Class"`` registry of backends."""

from __future__ import annotations

import difflib
import importlib
import inspect
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grader.protocol import Grader
from models.bundle import Bundle, read_bundle
from models.errors import ConfigError
from models.registry import resolve_bundle

if TYPE_CHECKING:
    from grader.cross_encoder import CrossEncoderGrader

__all__ = ["BACKENDS", "load_cross_encoder", "load_grader"]

BACKENDS: dict[str, str] = {
    "onnx": "grader.onnx_backend:OnnxGrader",
    "torch": "grader.torch_backend:TorchGrader",
}


def _backend_class(backend: str) -> Any:
    if backend not in BACKENDS:
        close = difflib.get_close_matches(backend, list(BACKENDS), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ";"
        raise ConfigError(f"unknown grader backend {backend!r}{hint} choose one of {sorted(BACKENDS)} or 'auto'")
    module_name, class_name = BACKENDS[backend].split(":")
    return getattr(importlib.import_module(module_name), class_name)


def _check_options(cls: Any, backend: str, options: dict[str, Any]) -> None:
    """An option the backend does not take, named with the nearest it does (``thread`` for ``threads``)."""
    params = inspect.signature(cls.__init__).parameters.values()
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return
    known = sorted(p.name for p in params if p.kind is p.KEYWORD_ONLY)
    for name in options:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"load_grader has no option {name!r} for the {backend} backend{hint}; it takes {known}")


def load_grader(model: str | Path | Bundle = "default", *, backend: str = "onnx", **options: Any) -> Grader:
    """Load a grader from a registered name (``"default"``), a bundle path or a bundle already read and
    verified (not read again).

    ``backend`` is ``"onnx"`` (no torch), ``"torch"`` (reference) or ``"auto"`` (whatever the bundle
    holds). ``options`` go to the backend (``threads``, ``batch_size``, ``variant``, ``policy``...).
    """
    if not isinstance(model, (str, os.PathLike, Bundle)):
        raise ConfigError(f"model must be a bundle's name (such as 'default'), its folder or a Bundle, got "
                          f"{type(model).__name__}: {model!r:.80}")
    bundle = model if isinstance(model, Bundle) else read_bundle(resolve_bundle(model))
    chosen = bundle.manifest.backend if backend == "auto" else backend
    cls = _backend_class(chosen)
    _check_options(cls, chosen, options)
    grader: Grader = cls(bundle, **options)
    return grader


def load_cross_encoder(model: str | Path = "default", *, backend: str = "onnx", **options: Any) -> CrossEncoderGrader:
    """:func:`load_grader` for what needs a bundle's raw scores (evaluation, batch grading, recalibration): the
    grader of a cross-encoder bundle, or an error naming what was loaded instead."""
    from grader.cross_encoder import CrossEncoderGrader

    grader = load_grader(model, backend=backend, **options)
    if not isinstance(grader, CrossEncoderGrader):
        raise ConfigError(f"{model} must be a cross-encoder bundle (crag train / crag export); it loaded a "
                          f"{type(grader).__name__}")
    return grader
