"""The nouns of crag-grader: value types, the error tree, the bundle format and the bundle registry."""

from models.bundle import Bundle, Manifest, read_bundle, write_manifest
from models.errors import (
    BundleError,
    ConfigError,
    CragError,
    DataError,
    LLMError,
    MissingDependencyError,
    NotFittedError,
    ParityError,
)
from models.registry import available_bundles, register_bundle, resolve_bundle
from models.types import Chunk, Decision, Grade, Verdict, as_chunk

__all__ = [
    "Bundle",
    "BundleError",
    "Chunk",
    "ConfigError",
    "CragError",
    "DataError",
    "Decision",
    "Grade",
    "LLMError",
    "Manifest",
    "MissingDependencyError",
    "NotFittedError",
    "ParityError",
    "Verdict",
    "as_chunk",
    "available_bundles",
    "read_bundle",
    "register_bundle",
    "resolve_bundle",
    "write_manifest",
]
