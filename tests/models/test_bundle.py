import json
from pathlib import Path

import pytest

from models import BundleError, read_bundle, resolve_bundle
from models.bundle import write_manifest
from models.registry import available_bundles, register_bundle


def _make_bundle(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "model.onnx").write_bytes(b"not really a model")
    (root / "tokenizer.json").write_text("{}", encoding="utf-8")
    write_manifest(root, {"name": "t", "backend": "onnx", "created": "now", "base_model": "b", "max_length": 64,
                          "model_files": {"fp32": "model.onnx"}}, ["model.onnx", "tokenizer.json"])
    return root


def test_roundtrip_records_hashes(tmp_path):
    bundle = read_bundle(_make_bundle(tmp_path / "b"))
    assert set(bundle.manifest.files) == {"model.onnx", "tokenizer.json"}
    assert bundle.model_file() == ("fp32", tmp_path / "b" / "model.onnx")


def test_tampered_file_is_refused(tmp_path):
    root = _make_bundle(tmp_path / "b")
    (root / "model.onnx").write_bytes(b"not really a model!")
    with pytest.raises(BundleError, match=r"tampered or corrupt: model.onnx"):
        read_bundle(root)


def test_same_size_tamper_is_refused(tmp_path):
    root = _make_bundle(tmp_path / "b")
    (root / "model.onnx").write_bytes(b"NOT really a model")
    with pytest.raises(BundleError, match="sha256"):
        read_bundle(root)


def test_missing_file_is_named(tmp_path):
    root = _make_bundle(tmp_path / "b")
    (root / "tokenizer.json").unlink()
    with pytest.raises(BundleError, match=r"incomplete: missing \['tokenizer.json'\]"):
        read_bundle(root)


@pytest.mark.parametrize(
    ("content", "message"),
    [("{not json", "not valid JSON"), (json.dumps({"name": "x"}), "not a valid manifest")],
)
def test_bad_manifest(tmp_path, content, message):
    root = _make_bundle(tmp_path / "b")
    (root / "manifest.json").write_text(content, encoding="utf-8")
    with pytest.raises(BundleError, match=message):
        read_bundle(root)


def test_missing_manifest_and_dir(tmp_path):
    with pytest.raises(BundleError, match="is not a directory"):
        read_bundle(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(BundleError, match=r"has no manifest\.json"):
        read_bundle(tmp_path / "empty")


def test_unknown_variant(tmp_path):
    bundle = read_bundle(_make_bundle(tmp_path / "b"))
    with pytest.raises(BundleError, match="no model variant 'int8'"):
        bundle.model_file("int8")


def test_registry_did_you_mean():
    assert "default" in available_bundles()
    with pytest.raises(BundleError, match="did you mean 'default'"):
        resolve_bundle("defualt")
    with pytest.raises(BundleError) as info:
        resolve_bundle("zzzz")
    assert str(info.value).startswith("no grader bundle named or at 'zzzz'. Known names: default")


def test_register_bundle(tmp_path):
    root = _make_bundle(tmp_path / "mine")
    register_bundle("mine-test", root)
    assert resolve_bundle("mine-test") == root
    with pytest.raises(BundleError):
        register_bundle("a/b", root)


def test_shipped_default_bundle_verifies():
    bundle = read_bundle(resolve_bundle("default"))
    assert bundle.manifest.backend == "onnx"
    assert "int8" in bundle.manifest.model_files
    assert bundle.manifest.calibration["method"] in {"platt", "isotonic", "temperature"}
    assert 0.0 <= bundle.manifest.thresholds["lower"] <= bundle.manifest.thresholds["upper"] <= 1.0


def test_an_edited_manifest_is_refused_naming_the_digest(tmp_path):
    root = _make_bundle(tmp_path / "b")
    manifest = json.loads((root / "manifest.json").read_text(encoding="utf-8"))
    manifest["thresholds"] = {"lower": 0.0, "upper": 0.01}
    (root / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    with pytest.raises(BundleError, match=r"manifest.json does not match its digest in manifest.sha256"):
        read_bundle(root)
    (root / "manifest.sha256").unlink()
    with pytest.raises(BundleError, match=r"has no manifest\.sha256"):
        read_bundle(root)


@pytest.mark.parametrize("entry", ["../outside.bin", "/etc/passwd"])
def test_file_entries_outside_the_bundle_are_refused(tmp_path, entry):
    root = _make_bundle(tmp_path / "b")
    (tmp_path / "outside.bin").write_bytes(b"x")
    with pytest.raises(BundleError, match="outside the bundle"):
        write_manifest(root, {"name": "t", "backend": "onnx", "created": "now", "base_model": "b", "max_length": 64,
                              "model_files": {"fp32": "model.onnx"}}, ["model.onnx", entry])
        read_bundle(root)


def test_a_symlinked_file_is_refused(tmp_path):
    root = _make_bundle(tmp_path / "b")
    (tmp_path / "real.json").write_text("{}", encoding="utf-8")
    (root / "tokenizer.json").unlink()
    (root / "tokenizer.json").symlink_to(tmp_path / "real.json")
    write_manifest(root, {"name": "t", "backend": "onnx", "created": "now", "base_model": "b", "max_length": 64,
                          "model_files": {"fp32": "model.onnx"}}, ["model.onnx", "tokenizer.json"])
    with pytest.raises(BundleError, match="symbolic link"):
        read_bundle(root)
