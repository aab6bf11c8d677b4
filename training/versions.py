"""Versions of the libraries that shaped a bundle, recorded in its manifest."""

from __future__ import annotations

import importlib.metadata
import platform

__all__ = ["library_versions"]

TRACKED = ("crag-grader", "torch", "transformers", "tokenizers", "onnx", "onnxruntime", "scikit-learn", "numpy")


def library_versions() -> dict[str, str]:
    """Installed versions of the tracked libraries (absent ones are left out) and Python's."""
    versions = {"python": platform.python_version()}
    for name in TRACKED:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions
