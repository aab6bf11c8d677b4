"""The shipped all-MiniLM-L6-v2 bi-encoder in int8 ONNX (numpy, tokenizers, onnxruntime; no torch).

Used by the retrieval index for dense vectors. It lives in ``grader`` (not ``pipeline``) so that a grader
may also use the base model's cosine, which the next training round plans as a feature of the final score.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

import models
from grader.onnx_backend import default_threads
from models.bundle import sha256_file
from models.deps import require
from models.errors import BundleError

__all__ = ["EMBEDDER_DIR", "OnnxMiniLMEmbedder"]

EMBEDDER_DIR = Path(models.__file__).resolve().parent / "embedders" / "minilm-l6"


class OnnxMiniLMEmbedder:
    """all-MiniLM-L6-v2 through onnxruntime: (n, 384) float32, unit-normalised rows."""

    def __init__(self, bundle: str | Path = EMBEDDER_DIR, *, threads: int | None = None, batch_size: int = 1,
                 verify: bool = True) -> None:
        root = Path(bundle)
        try:
            manifest = json.loads((root / "manifest.json").read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise BundleError(f"embedder bundle {root} has no readable manifest.json ({exc}); re-export it with "
                              "`crag export-embedder --out DIR`") from exc
        if verify:
            for name, entry in manifest.get("files", {}).items():
                if not (root / name).is_file() or sha256_file(root / name) != entry.get("sha256"):
                    raise BundleError(f"embedder bundle {root}: {name} is missing or does not match its sha256")
        ort = require("onnxruntime", "onnx")
        tokenizers = require("tokenizers", "onnx")
        self.name = str(manifest.get("name", "all-MiniLM-L6-v2"))
        self.dim = int(manifest.get("dim", 384))
        self.batch_size = max(1, batch_size)
        self.tokenizer = tokenizers.Tokenizer.from_file(str(root / "tokenizer.json"))
        self.tokenizer.enable_truncation(int(manifest.get("max_length", 256)))
        self.tokenizer.no_padding()  # the shipped tokenizer.json pads to a fixed length; we pad per batch
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or default_threads()
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        self.session = ort.InferenceSession(str(root / manifest["model_file"]), options,
                                            providers=["CPUExecutionProvider"])
        self._inputs = [i.name for i in self.session.get_inputs()]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), self.batch_size):
            rows = order[start : start + self.batch_size]
            encoded = self.tokenizer.encode_batch([texts[i] or " " for i in rows])
            width = max(len(e.ids) for e in encoded)
            ids = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros_like(ids)
            for r, e in enumerate(encoded):
                ids[r, : len(e.ids)] = e.ids
                mask[r, : len(e.ids)] = 1
            feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            (hidden,) = self.session.run(None, {k: feeds[k] for k in self._inputs})
            weights = mask[:, :, None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
            out[rows] = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return out
