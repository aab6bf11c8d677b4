"""The yardstick every grader must beat: the untrained all-MiniLM-L6-v2 bi-encoder's cosine (needs torch)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from models.deps import require
from training.base_models import resolve_base
from training.data import LabelledPair
from training.metrics import binary_labels

__all__ = ["biencoder_auroc", "biencoder_scores"]

_MODELS: dict[str, object] = {}


def biencoder_scores(pairs: Sequence[LabelledPair], base: str = "default-base", device: str = "cpu") -> np.ndarray:
    """Cosine of the base sentence-transformers model between each query and its text."""
    st = require("sentence_transformers", "train")
    path = str(resolve_base(base))
    model = _MODELS.get(f"{path}@{device}")
    if model is None:
        model = _MODELS[f"{path}@{device}"] = st.SentenceTransformer(path, device=device, local_files_only=True)
    queries = sorted({p.query for p in pairs})
    texts = sorted({p.text for p in pairs})
    q = model.encode(queries, normalize_embeddings=True, batch_size=64, show_progress_bar=False)  # type: ignore[attr-defined]
    t = model.encode(texts, normalize_embeddings=True, batch_size=64, show_progress_bar=False)  # type: ignore[attr-defined]
    qi = {s: i for i, s in enumerate(queries)}
    ti = {s: i for i, s in enumerate(texts)}
    return np.array([float(q[qi[p.query]] @ t[ti[p.text]]) for p in pairs])


def biencoder_auroc(pairs: Sequence[LabelledPair], base: str = "default-base") -> float | None:
    """AUROC (relevant + partial vs irrelevant) of the bi-encoder cosine; None with one class only."""
    metrics = require("sklearn.metrics", "train")
    y = binary_labels(pairs)
    if y.min() == y.max():
        return None
    return float(metrics.roc_auc_score(y, biencoder_scores(pairs, base)))
