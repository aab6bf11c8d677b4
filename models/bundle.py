"""The grader bundle: a self-describing directory with model, tokenizer and ``manifest.json``.

The manifest records everything needed to use the model correctly (labels, max_length, input names,
calibration, thresholds) and to trust it (training data summary, metrics, versions, sha256 of every
file). :func:`read_bundle` refuses a bundle whose files are missing or whose hashes do not match, whose
manifest does not match its digest in ``manifest.sha256`` (an edited threshold is refused, not loaded), or
whose file entries point outside the bundle. The digest guards integrity (accidental or careless edits),
not authenticity: whoever can write the bundle can rewrite both files.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from models.errors import BundleError

__all__ = [
    "DIGEST_NAME",
    "MANIFEST_NAME",
    "Bundle",
    "BundleFile",
    "Manifest",
    "read_bundle",
    "sha256_file",
    "write_manifest",
]

MANIFEST_NAME = "manifest.json"
DIGEST_NAME = "manifest.sha256"
FORMAT_VERSION = 1


class BundleFile(BaseModel):
    """One file of the bundle with its integrity data."""

    model_config = ConfigDict(extra="forbid")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    bytes: int = Field(ge=0)


class Manifest(BaseModel):
    """Validated content of ``manifest.json``."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    format_version: int = FORMAT_VERSION
    name: str
    backend: Literal["onnx", "torch"]
    created: str
    base_model: str
    labels: list[str] = Field(default_factory=lambda: ["irrelevant", "partial", "relevant"])
    head: Literal["binary"] = "binary"
    max_length: int = Field(ge=8, le=8192)
    input_names: list[str] = Field(default_factory=list)
    output_name: str = "logits"
    files: dict[str, BundleFile]
    model_files: dict[str, str] = Field(
        default_factory=dict, description="variant name (fp32, int8, torch) -> file name in `files`"
    )
    calibration: dict[str, Any] = Field(default_factory=dict)
    thresholds: dict[str, Any] = Field(default_factory=dict)
    training: dict[str, Any] = Field(default_factory=dict)
    metrics: dict[str, Any] = Field(default_factory=dict)
    parity: dict[str, Any] = Field(default_factory=dict)
    versions: dict[str, str] = Field(default_factory=dict)
    reference: dict[str, Any] = Field(default_factory=dict)
    fusion: dict[str, Any] = Field(
        default_factory=dict,
        description="weights mixing the cosine of the bundle's embedder/ into the score (crag fuse)"
    )
    answerability: dict[str, Any] = Field(
        default_factory=dict,
        description="the best-chunk probability below which a grader-only answer abstains (crag answerability)",
    )


@dataclass(frozen=True)
class Bundle:
    """A verified bundle on disk."""

    path: Path
    manifest: Manifest

    def file(self, name: str) -> Path:
        """Path of a file listed in the manifest."""
        if name not in self.manifest.files:
            raise BundleError(f"bundle {self.path} lists no file {name!r}; it has {sorted(self.manifest.files)}")
        return self.path / name

    def model_file(self, variant: str | None = None) -> tuple[str, Path]:
        """The model file of ``variant`` (default: int8 when present, else fp32, else torch)."""
        variants = self.manifest.model_files
        if variant is None:
            for candidate in ("int8", "fp32", "torch"):
                if candidate in variants:
                    variant = candidate
                    break
        if variant is None or variant not in variants:
            raise BundleError(
                f"bundle {self.path} has no model variant {variant!r}; available: {sorted(variants)}"
            )
        return variant, self.file(variants[variant])


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_bundle(path: str | Path, *, verify: bool = True) -> Bundle:
    """Load and verify a bundle directory; raise :class:`BundleError` naming what is wrong."""
    root = Path(path)
    if not root.is_dir():
        raise BundleError(f"grader bundle {root} is not a directory; pass a bundle directory or a registered name")
    manifest_path = root / MANIFEST_NAME
    if not manifest_path.is_file():
        raise BundleError(f"grader bundle {root} has no {MANIFEST_NAME}; was it exported with `crag export`?")
    try:
        raw = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BundleError(f"{manifest_path} is not valid JSON: {exc}") from exc
    try:
        manifest = Manifest.model_validate(raw)
    except ValidationError as exc:
        raise BundleError(f"{manifest_path} is not a valid manifest: {exc}") from exc
    if manifest.format_version != FORMAT_VERSION:
        raise BundleError(
            f"{manifest_path} has format_version {manifest.format_version}; this crag-grader reads {FORMAT_VERSION}"
        )
    unknown = sorted(set(manifest.model_files.values()) - set(manifest.files))
    if unknown:
        raise BundleError(f"{manifest_path} names model files {unknown} that are not listed under 'files'")
    if verify:
        _verify_digest(root, manifest_path)
        _verify_files(root, manifest)
    return Bundle(path=root, manifest=manifest)


def _verify_digest(root: Path, manifest_path: Path) -> None:
    digest_path = root / DIGEST_NAME
    if not digest_path.is_file():
        raise BundleError(f"grader bundle {root} has no {DIGEST_NAME}, so its manifest cannot be verified; "
                          "re-export it with `crag export` (or `crag calibrate` for a recalibrated bundle)")
    recorded = digest_path.read_text(encoding="utf-8").split()
    if not recorded or recorded[0] != sha256_file(manifest_path):
        raise BundleError(f"grader bundle {root}: {manifest_path.name} does not match its digest in {DIGEST_NAME} "
                          "(was the manifest edited by hand?); change thresholds with `crag calibrate`, which "
                          "writes a new verified bundle")


def _safe_member(root: Path, name: str) -> Path:
    """A file named by the manifest must be a plain file inside the bundle: no absolute paths, no '..', no links."""
    candidate = Path(name)
    if candidate.is_absolute() or ".." in candidate.parts or not name.strip():
        raise BundleError(f"grader bundle {root}: manifest file entry {name!r} points outside the bundle")
    path = root / candidate
    if path.is_symlink() or (path.exists() and not path.resolve().is_relative_to(root.resolve())):
        raise BundleError(f"grader bundle {root}: {name!r} is a symbolic link or leaves the bundle; bundles hold "
                          "plain files only")
    return path


def _verify_files(root: Path, manifest: Manifest) -> None:
    for name in manifest.files:
        _safe_member(root, name)
    missing = [name for name in manifest.files if not (root / name).is_file()]
    if missing:
        raise BundleError(f"grader bundle {root} is incomplete: missing {missing}")
    for name, entry in manifest.files.items():
        file_path = root / name
        size = file_path.stat().st_size
        if size != entry.bytes or sha256_file(file_path) != entry.sha256:
            raise BundleError(
                f"grader bundle {root} is tampered or corrupt: {name} does not match its sha256 in the manifest "
                f"({size} bytes on disk, {entry.bytes} recorded); re-export the bundle"
            )


def write_manifest(root: str | Path, manifest: dict[str, Any], file_names: list[str]) -> Manifest:
    """Hash ``file_names`` under ``root``, validate and write ``manifest.json`` atomically."""
    root = Path(root)
    files = {}
    for name in file_names:
        file_path = root / name
        if not file_path.is_file():
            raise BundleError(f"cannot write manifest: {file_path} does not exist")
        files[name] = {"sha256": sha256_file(file_path), "bytes": file_path.stat().st_size}
    try:
        validated = Manifest.model_validate({**manifest, "files": files})
    except ValidationError as exc:
        raise BundleError(f"manifest for {root} is invalid: {exc}") from exc
    text = json.dumps(validated.model_dump(), indent=2, sort_keys=True) + "\n"
    tmp = root / (MANIFEST_NAME + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    digest_tmp = root / (DIGEST_NAME + ".tmp")
    digest_tmp.write_text(f"{hashlib.sha256(text.encode('utf-8')).hexdigest()}  {MANIFEST_NAME}\n", encoding="utf-8")
    tmp.replace(root / MANIFEST_NAME)
    digest_tmp.replace(root / DIGEST_NAME)
    return validated
