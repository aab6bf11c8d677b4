"""Fine-tuning can start from a grader bundle (``crag train --init default``), not only from the base model.

A few hundred labels of a new domain take a model that already grades relevance further than they take the
untrained all-MiniLM-L6-v2 (``bench/bench_train_from_default.py``). Bundles ship ONNX only (the default: int8
alone), so the cross-encoder is rebuilt in torch from its ONNX file: a float initialiser whose name is a torch
parameter's is copied; a weight matrix (``MatMul`` / ``MatMulInteger``, int8 ones dequantised) goes to the
parameter named by the node that reads it (``/encoder/encoder/layer.0/attention/self/query/MatMul`` ->
``encoder.encoder.layer.0.attention.self.query.weight``), the path the exporter takes from the torch module.
The rebuilt model is then checked against the bundle's own scores, so a graph this does not understand fails
loudly instead of training from wrong weights. A fused bundle's cosine is not part of the rebuilt model: the
result is a cross-encoder (``crag fuse`` can add a cosine again).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

from models.bundle import Bundle, read_bundle
from models.deps import require
from models.errors import BundleError, ConfigError
from models.registry import resolve_bundle

__all__ = ["REBUILD_MIN_CORRELATION", "dequantised", "model_from_bundle", "onnx_state"]

logger = logging.getLogger(__name__)
REBUILD_MIN_CORRELATION = 0.98  # rebuilt torch logits vs the bundle's own (int8 rounding alone keeps ~0.996)
_MATMUL_SUFFIXES = ("/MatMul_quant", "/MatMul")


def dequantised(raw: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every float initialiser as is and every quantised one as float32, under its name without ``_quantized``."""
    out: dict[str, np.ndarray] = {}
    for name, value in raw.items():
        if name.endswith("_quantized"):
            stem = name[: -len("_quantized")]
            scale = raw[stem + "_scale"].astype(np.float32)
            zero = raw[stem + "_zero_point"].astype(np.float32)
            out[stem] = (value.astype(np.float32) - zero) * scale  # per channel: broadcast over the last axis
        elif not name.endswith(("_scale", "_zero_point")) and value.dtype == np.float32:
            out[name] = value
    return out


def onnx_state(onnx_path: Path) -> dict[str, np.ndarray]:
    """Torch parameter name -> float32 array (torch layout) for every weight in an exported grader graph."""
    onnx = require("onnx", "train")
    from onnx import numpy_helper

    graph = onnx.load(str(onnx_path)).graph
    raw = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    values = dequantised(raw)
    state: dict[str, np.ndarray] = {}
    for node in graph.node:
        for name in node.input:
            stem = name[: -len("_quantized")] if name.endswith("_quantized") else name
            if stem not in values:
                continue
            if not stem.startswith("onnx::"):  # the exporter kept the torch name
                state[stem] = values[stem]
            elif node.op_type in ("MatMul", "MatMulInteger") and node.name.endswith(_MATMUL_SUFFIXES):
                module = node.name.rsplit("/", 1)[0].strip("/").replace("/", ".")
                state[module + ".weight"] = np.ascontiguousarray(values[stem].T)  # ONNX [in, out], torch [out, in]
    return state


def _source_file(bundle: Bundle) -> tuple[str, Path]:
    """The most exact ONNX file of the bundle: fp32 when shipped, else int8."""
    variants = bundle.manifest.model_files
    for variant in ("fp32", "int8"):
        if variant in variants:
            return bundle.model_file(variant)
    raise ConfigError(f"--init {bundle.path}: the bundle has no ONNX model (it has {sorted(variants)}); pass a "
                      "bundle written by `crag export` / `crag fuse`, or the folder of `crag train`")


def _layer_count(state: dict[str, np.ndarray]) -> int:
    layers = {int(k.split(".layer.")[1].split(".")[0]) for k in state if ".layer." in k}
    return max(layers) + 1 if layers else 0


def model_from_bundle(init: str | Path, base_dir: Path, check_pairs: list[tuple[str, str]], *,
                      bundle: Bundle | None = None) -> tuple[Any, dict]:
    """The cross-encoder of a grader bundle (a name such as ``default`` or a path) as a torch model on the
    architecture of ``base_dir``, and what to record about where it came from. ``check_pairs`` (a few
    training pairs) are scored by the bundle and the rebuilt model, which must agree. ``bundle``: ``init``
    already read and verified, so that its files are not hashed again."""
    torch = require("torch", "train")
    from grader.factory import load_grader
    from grader.torch_model import build_cross_encoder

    if bundle is None:
        bundle = read_bundle(resolve_bundle(init))
    variant, onnx_path = _source_file(bundle)
    weights = onnx_state(onnx_path)
    layers = _layer_count(weights)
    model = build_cross_encoder(base_dir, layers=layers)
    state = model.state_dict()
    missing = sorted(k for k in state if k not in weights and not k.startswith("encoder.pooler."))
    unknown = sorted(k for k in weights if k not in state)
    if missing or unknown or layers == 0:
        what = f"no weights for {missing[:3]}" if missing else (
            f"weights the grader does not have ({unknown[:3]})" if unknown else "no encoder layers")
        raise BundleError(f"--init {init}: {onnx_path.name} holds {what}; only graders written by `crag export` "
                          "can be trained further")
    for key, value in weights.items():
        if tuple(state[key].shape) != value.shape:
            raise ConfigError(f"--init {init}: weight {key} has shape {value.shape}, the base model "
                              f"{base_dir.name} expects {tuple(state[key].shape)}; pass the --base it was trained "
                              f"on (its manifest says {bundle.manifest.base_model!r})")
        state[key] = torch.from_numpy(value.copy())
    model.load_state_dict(state)
    # the bundle's own cross-encoder logits, one window (as the torch model reads them), run even where a fused
    # head gives it no weight
    own = load_grader(bundle, cache_pairs=0, threads=1, max_windows=1, cross_encoder=True)
    correlation = _check_rebuild(model, base_dir, own, check_pairs)
    if correlation < REBUILD_MIN_CORRELATION:
        raise BundleError(f"--init {init}: the cross-encoder rebuilt from {onnx_path.name} scores {len(check_pairs)} "
                          f"pairs with correlation {correlation:.3f} to the bundle's own scores (needs "
                          f">= {REBUILD_MIN_CORRELATION}); the bundle's graph is not one this version can rebuild")
    if bundle.manifest.fusion:
        logger.info("--init %s: training its cross-encoder; the fused cosine is not part of the new model "
                    "(`crag fuse` adds one to an exported grader)", init)
    digest = bundle.manifest.files[bundle.manifest.model_files[variant]].sha256  # verified when it was read
    record = {"bundle": str(init), "name": bundle.manifest.name, "file": onnx_path.name, "variant": variant,
              "sha256": digest, "layers": layers, "fused": bool(bundle.manifest.fusion),
              "rebuild_correlation": round(correlation, 4)}
    return model, record


def _check_rebuild(model: Any, base_dir: Path, bundle_grader: Any, pairs: list[tuple[str, str]]) -> float:
    """Pearson correlation of the rebuilt model's logits with the bundle's cross-encoder logits on ``pairs``."""
    from grader.encoding import PairEncoder
    from models.types import Verdict
    from training.data import LabelledPair
    from training.finetune import pair_logits

    if len(pairs) < 3:
        raise ConfigError("checking a rebuilt --init model needs at least 3 training pairs")
    scored = bundle_grader.score_pairs(pairs)
    expected = scored.fusion_inputs[0] if scored.fusion_inputs is not None else scored.logits
    encoder = PairEncoder(base_dir / "tokenizer.json", bundle_grader.bundle.manifest.max_length)
    unlabelled = [LabelledPair(query=q, text=t, label=Verdict.IRRELEVANT, query_id=q) for q, t in pairs]
    got = pair_logits(model, encoder, unlabelled, "cpu")
    model.train()
    if np.std(expected) == 0 or np.std(got) == 0:
        return 1.0 if np.allclose(expected, got, atol=1e-3) else 0.0
    return float(np.corrcoef(expected, got)[0, 1])
