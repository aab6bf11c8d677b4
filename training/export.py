"""Export a trained torch bundle to an ONNX bundle, with dynamic int8 quantisation and a parity gate.

Every export ends with a torch-vs-ONNX check on the probe pairs stored at training time: the largest
logit difference, and the share of verdicts (at the bundle's thresholds, after calibration) that flip.
If either exceeds its tolerance the export fails with :class:`ParityError` and no bundle is left
behind at ``out``.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from grader.cross_encoder import CrossEncoderGrader
from models.bundle import read_bundle, write_manifest
from models.deps import require
from models.errors import BundleError, ConfigError, ParityError
from models.output import check_replaceable_dir
from models.progress import stage
from models.registry import resolve_bundle
from training.data import PairSet, load_pairs
from training.finetune import PROBE_FILE
from training.versions import library_versions

__all__ = ["ParityReport", "export_bundle", "flip_p_value", "parity_report", "quantize_weights"]

logger = logging.getLogger(__name__)
FP32_MAX_LOGIT_DIFF = 1e-3
INT8_MAX_FLIP_SHARE = 0.02
FLIP_SIGNIFICANCE = 0.05
MIN_PROBE_PAIRS = 100
INPUT_NAMES = ["input_ids", "attention_mask", "token_type_ids"]
OPSET = 17


ParityReport = dict[str, Any]


def _onnx_export(model: Any, path: Path) -> None:
    torch = require("torch", "train")
    require("onnx", "train")
    model.eval()
    example = tuple(torch.ones((2, 16), dtype=torch.long) for _ in INPUT_NAMES)
    axes = {name: {0: "batch", 1: "sequence"} for name in INPUT_NAMES}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model, example, str(path), input_names=INPUT_NAMES, output_names=["logits"],
            dynamic_axes={**axes, "logits": {0: "batch"}}, opset_version=OPSET, dynamo=False,
        )


def quantize_weights(src: Path, dst: Path) -> None:
    """Dynamic int8 with per-channel **unsigned** 8-bit weights (u8 activations x u8 weights).

    Signed weights (u8 x s8, onnxruntime's usual choice) run through AVX2's ``vpmaddubsw``, whose int16 sums
    saturate on CPUs without AVX512-VNNI: measured on such a CPU (`bench/bench_quantization.py`,
    bench/results_quantization.json), a grader's int8 logits correlated 0.973 with its fp32 ones (mean
    |difference| 1.01 logits) with s8 weights, 0.996 (0.141) with u8 weights, at 14% more time per pair. u8 x u8
    has no int16-saturating step; its speed on a VNNI CPU was not measured here."""
    quantization = require("onnxruntime.quantization", "onnx")
    quantization.quantize_dynamic(str(src), str(dst), weight_type=quantization.QuantType.QUInt8, per_channel=True)


def parity_report(reference: CrossEncoderGrader, candidate: CrossEncoderGrader, probe: PairSet) -> ParityReport:
    """Compare two graders on the probe pairs: logit differences and verdict flips."""
    pairs = [(p.query, p.text) for p in probe.pairs]
    ref = reference.score_pairs(pairs).logits
    got = candidate.score_pairs(pairs).logits
    policy = reference.policy
    ref_v = [policy.verdict(float(p)) for p in reference.probabilities(ref)]
    got_v = [policy.verdict(float(p)) for p in candidate.probabilities(got)]
    flips = sum(a[0] is not b[0] for a, b in zip(ref_v, got_v, strict=True))
    band_moves = sum(a != b for a, b in zip(ref_v, got_v, strict=True))
    diff = np.abs(ref - got)
    return {
        "probe_pairs": len(pairs),
        "max_logit_diff": float(diff.max()),
        "mean_logit_diff": float(diff.mean()),
        "verdict_flip_share": flips / len(pairs),
        "decision_change_share": band_moves / len(pairs),
    }


def flip_p_value(report: ParityReport, max_flip_share: float) -> float:
    """P(at least this many flips | the true flip rate is ``max_flip_share``): small means the int8 model
    really flips more often than allowed. A binomial test, so one flip on a 45-pair probe (2.2%) does not fail
    a 2% gate, while 3% of 1,000 pairs does."""
    stats = require("scipy.stats", "train")
    n = int(report["probe_pairs"])
    flips = round(report["verdict_flip_share"] * n)
    if flips == 0:
        return 1.0
    return float(stats.binom.sf(flips - 1, n, max_flip_share))


def _int8_start_hint(source: Any) -> str:
    """Why int8 fails for a grader trained on from an int8 bundle (``crag train --init default``), if it was."""
    started = source.manifest.training.get("config", {}).get("extra", {}).get("init_bundle") or {}
    if started.get("variant") != "int8":
        return ""
    return (f". This grader was trained on from the int8 weights of {started.get('name')!r}: training moved them "
            "by less than one int8 step, so quantising rounds them back to where they started and undoes the "
            "training; export it in fp32 (without --int8)")


def export_bundle(
    model: str | Path,
    out: str | Path,
    *,
    int8: bool = True,
    keep_fp32: bool = True,
    probe: str | Path | None = None,
    max_flip_share: float = INT8_MAX_FLIP_SHARE,
    fp32_tolerance: float = FP32_MAX_LOGIT_DIFF,
) -> Path:
    """Export the torch bundle ``model`` to an ONNX bundle at ``out`` (replaced only if the gate passes)."""
    from grader.onnx_backend import OnnxGrader
    from grader.torch_backend import TorchGrader

    if not int8 and not keep_fp32:
        raise ConfigError("nothing to export: keep_fp32=False needs int8=True")
    if not 0.0 <= max_flip_share <= 1.0:
        raise ConfigError(f"max_flip_share must be in [0, 1], got {max_flip_share}")
    source = read_bundle(resolve_bundle(model))
    if source.manifest.backend != "torch":
        raise BundleError(f"{source.path} is already an {source.manifest.backend} bundle; export needs the "
                          "torch bundle written by `crag train`")
    probe_path = Path(probe) if probe else source.path / PROBE_FILE
    if not probe_path.is_file():
        raise ConfigError(f"no probe pairs for the parity gate: {probe_path} is missing; pass --probe <pairs file>")
    probe_set = load_pairs(probe_path)
    if int8 and len(probe_set.pairs) < MIN_PROBE_PAIRS:
        logger.warning("the parity probe %s has only %d pairs; the int8 gate can only catch gross flip rates "
                       "(pass a larger --probe pairs file, %d+ pairs)", probe_path, len(probe_set.pairs),
                       MIN_PROBE_PAIRS)
    out = Path(out)
    check_replaceable_dir(out, key="backend", value="onnx", what="an exported ONNX bundle")
    reference = TorchGrader(source)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="crag-export-") as tmp_name:
        tmp = Path(tmp_name)
        fp32_path = tmp / "model.onnx"
        with stage("exporting the model to ONNX"):
            _onnx_export(reference.model, fp32_path)
        shutil.copy(source.file("tokenizer.json"), tmp / "tokenizer.json")
        model_files = {"fp32": "model.onnx"}
        if int8:
            with stage("quantizing to int8"):
                quantize_weights(fp32_path, tmp / "model.int8.onnx")
            model_files["int8"] = "model.int8.onnx"
        base = source.manifest.model_dump(exclude={"files", "model_files", "backend", "parity", "versions"})
        manifest = {**base, "backend": "onnx", "input_names": INPUT_NAMES, "model_files": model_files,
                    "versions": library_versions()}
        write_manifest(tmp, manifest, ["tokenizer.json", *model_files.values()])
        staged = read_bundle(tmp)
        parity: dict[str, Any] = {}
        for variant in model_files:
            with stage(f"parity check of {variant} on {len(probe_set.pairs)} probe pairs"):
                report = parity_report(reference, OnnxGrader(staged, variant=variant), probe_set)
            parity[variant] = report
            logger.info("parity %s: %s", variant, report)
            if variant == "fp32" and report["max_logit_diff"] > fp32_tolerance:
                raise ParityError(f"fp32 ONNX differs from torch by {report['max_logit_diff']:.2e} logits "
                                  f"(tolerance {fp32_tolerance:.0e}); the export is broken, bundle not written")
            if variant == "int8":
                report["flip_p_value"] = flip_p_value(report, max_flip_share)
                if report["flip_p_value"] < FLIP_SIGNIFICANCE:
                    raise ParityError(
                        f"int8 flips {report['verdict_flip_share']:.1%} of {report['probe_pairs']} probe verdicts, "
                        f"significantly more than the allowed {max_flip_share:.1%} (p={report['flip_p_value']:.3f}); "
                        "allow more with --max-flip, check on a larger --probe pairs file, or export without "
                        f"--int8. Bundle not written{_int8_start_hint(source)}")
        if not keep_fp32:
            fp32_path.unlink()
            model_files.pop("fp32")
        manifest["model_files"] = model_files
        manifest["parity"] = {**parity, "probe": str(probe_path), "seconds": round(time.perf_counter() - start, 1)}
        write_manifest(tmp, manifest, ["tokenizer.json", *model_files.values()])
        if out.exists():
            shutil.rmtree(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(tmp, out)
    _apply_umask(out)
    read_bundle(out)
    return out


def _apply_umask(root: Path) -> None:
    """Give the bundle the modes any other tool would (the temporary directory it was staged in is 0700)."""
    mask = os.umask(0)
    os.umask(mask)
    root.chmod(0o777 & ~mask)
    for path in root.rglob("*"):
        path.chmod((0o777 if path.is_dir() else 0o666) & ~mask)
