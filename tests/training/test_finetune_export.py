import json

import numpy as np
import pytest

from grader import load_grader
from models import BundleError, ConfigError, ParityError, read_bundle
from training.data import load_pairs
from training.evaluate import evaluate_bundle, write_plots
from training.export import export_bundle
from training.finetune import TrainConfig

REPORT_KEYS = {"auroc", "auroc_strict", "accuracy", "macro_f1", "escalation_rate", "auto_error_rate", "ece",
               "brier", "n"}


def test_trained_bundle_is_self_describing(tiny_torch_bundle):
    m = read_bundle(tiny_torch_bundle).manifest
    assert m.backend == "torch" and m.max_length == 64
    assert m.training["config"]["seed"] == 13 and m.training["steps"] == 3
    assert m.training["train_data"]["pairs"] > 0 and m.training["val_data"]["pairs"] > 0
    assert m.calibration["method"] == "platt"
    assert m.thresholds["target"]["max_escalation"] == 0.3
    assert m.thresholds["escalation_rate"] <= 0.3
    assert set(m.metrics["validation"]) >= REPORT_KEYS
    assert {"torch", "transformers", "python"} <= set(m.versions)
    assert (tiny_torch_bundle / "probe.jsonl").is_file()


def test_torch_and_onnx_backends_agree(tiny_torch_bundle, tiny_onnx_bundle):
    torch_grader = load_grader(tiny_torch_bundle, backend="torch")
    onnx_grader = load_grader(tiny_onnx_bundle, variant="fp32")
    chunks = ["Normandy is a region in France.", "Bananas are yellow.", "The Normans came from Norway."]
    a = [g.probability for g in torch_grader.grade("Where is Normandy?", chunks)]
    b = [g.probability for g in onnx_grader.grade("Where is Normandy?", chunks)]
    np.testing.assert_allclose(a, b, atol=1e-4)
    with pytest.raises(BundleError, match="export it to ONNX first"):
        load_grader(tiny_torch_bundle, backend="onnx")
    with pytest.raises(BundleError, match="torch backend needs"):
        load_grader(tiny_onnx_bundle, backend="torch")


def test_export_records_parity(tiny_onnx_bundle):
    m = read_bundle(tiny_onnx_bundle).manifest
    assert m.backend == "onnx" and set(m.model_files) == {"fp32", "int8"}
    assert m.parity["fp32"]["max_logit_diff"] < 1e-3
    assert m.parity["int8"]["verdict_flip_share"] <= 0.02
    assert m.calibration == read_bundle(tiny_onnx_bundle).manifest.calibration
    assert (tiny_onnx_bundle / "model.int8.onnx").stat().st_size < (tiny_onnx_bundle / "model.onnx").stat().st_size


def test_exported_bundle_follows_the_umask_so_other_users_can_read_it(tiny_onnx_bundle):
    import os

    mask = os.umask(0)
    os.umask(mask)
    assert tiny_onnx_bundle.stat().st_mode & 0o777 == 0o777 & ~mask
    assert (tiny_onnx_bundle / "manifest.json").stat().st_mode & 0o777 == 0o666 & ~mask


def test_failed_parity_gate_leaves_no_bundle(tiny_torch_bundle, tmp_path):
    out = tmp_path / "never"
    with pytest.raises(ParityError, match="bundle not written"):
        export_bundle(tiny_torch_bundle, out, int8=False, fp32_tolerance=0.0)
    assert not out.exists()


def test_export_input_errors(tiny_onnx_bundle, tiny_torch_bundle, tmp_path):
    with pytest.raises(BundleError, match="already an onnx bundle"):
        export_bundle(tiny_onnx_bundle, tmp_path / "x")
    with pytest.raises(ConfigError, match="nothing to export"):
        export_bundle(tiny_torch_bundle, tmp_path / "x", int8=False, keep_fp32=False)
    with pytest.raises(ConfigError, match="no probe pairs"):
        export_bundle(tiny_torch_bundle, tmp_path / "x", probe=tmp_path / "nope.jsonl")


def test_evaluate_report_and_plots(tiny_onnx_bundle, squad_pairs_file, tmp_path):
    report = evaluate_bundle(tiny_onnx_bundle, load_pairs(squad_pairs_file))
    assert set(report) >= REPORT_KEYS
    assert report["n"] == 90 and 0 <= report["auroc"] <= 1
    assert report["latency_ms_per_batch"]["p95"] >= report["latency_ms_per_batch"]["p50"] > 0
    cm = report["confusion_matrix"]["rows_gold_cols_predicted"]
    assert sum(map(sum, cm)) == 90
    paths = write_plots(report, tmp_path / "plots" / "tiny")
    assert [p.name for p in paths] == ["tiny_reliability.png", "tiny_tradeoff.png"]
    assert all(p.read_bytes()[:4] == b"\x89PNG" for p in paths)
    json.dumps(report)


@pytest.mark.parametrize("kwargs", [{"epochs": 0}, {"calibration": "magic"}, {"target_error": None},
                                    {"target_escalation": 0.2}, {"partial_target": 2}])
def test_train_config_validation(kwargs):
    with pytest.raises(ConfigError, match="TrainConfig"):
        TrainConfig(**kwargs)
