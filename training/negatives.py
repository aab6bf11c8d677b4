"""Hard-negative mining for queries that only have positives.

Candidates are the corpus texts nearest to the query (BM25 via ``bm25s``, or cosine of a bi-encoder).
A margin protects against false negatives: a candidate scoring at least ``margin`` times the query's
best known positive is probably relevant too, so it is skipped rather than labelled irrelevant.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from models.deps import require
from models.errors import ConfigError
from models.text_batches import text_list
from models.types import Verdict
from training.data import LabelledPair, group_by_query

__all__ = ["MINING_METHODS", "mine_hard_negatives"]

MINING_METHODS = ("bm25", "biencoder")


def _bm25_scores(queries: list[str], corpus: list[str]) -> np.ndarray:
    bm25s = require("bm25s", "train")
    indexed = bm25s.tokenize(corpus, stopwords="en", show_progress=False)
    if not indexed.vocab:  # a corpus of stop words only: no text can score (bm25s would fail on it)
        return np.zeros((len(queries), len(corpus)))
    retriever = bm25s.BM25()
    retriever.index(indexed, show_progress=False)
    tokenized = bm25s.tokenize(queries, stopwords="en", show_progress=False, return_ids=False)
    # a query of stop words only has no tokens: it matches nothing (bm25s would fail on it)
    return np.vstack([retriever.get_scores(tokens) if tokens else np.zeros(len(corpus)) for tokens in tokenized])


def _biencoder_scores(queries: list[str], corpus: list[str], model_dir: str) -> np.ndarray:
    st = require("sentence_transformers", "train")
    model = st.SentenceTransformer(model_dir, device="cpu", local_files_only=True)
    q = model.encode(queries, normalize_embeddings=True, show_progress_bar=False, batch_size=64)
    c = model.encode(corpus, normalize_embeddings=True, show_progress_bar=False, batch_size=64)
    return np.asarray(q @ c.T)


def mine_hard_negatives(
    pairs: Sequence[LabelledPair],
    *,
    corpus: Sequence[str] | None = None,
    per_query: int = 2,
    margin: float = 0.9,
    method: str = "bm25",
    only_positive_queries: bool = True,
    model_dir: str | None = None,
) -> list[LabelledPair]:
    """Return new irrelevant pairs mined for the queries of ``pairs`` (the inputs are not changed)."""
    if method not in MINING_METHODS:
        raise ConfigError(f"unknown mining method {method!r}; choose one of {list(MINING_METHODS)}")
    if not 0.0 < margin <= 1.0:
        raise ConfigError(f"margin must be in (0, 1], got {margin}")
    if per_query < 1:
        raise ConfigError(f"per_query must be >= 1, got {per_query}")
    if corpus is not None:
        corpus = [text for text in text_list(corpus, "corpus") if text.strip()]
        if not corpus:
            raise ConfigError("the corpus to mine from holds no text: give passages (one per line in --corpus), "
                              "or leave it out to mine from the texts of the pairs")
    by_query = group_by_query(pairs)
    targets = [
        qid for qid, group in by_query.items()
        if any(p.positive for p in group) and (not only_positive_queries or all(p.positive for p in group))
    ]
    if not targets:
        return []
    texts = list(dict.fromkeys(corpus if corpus is not None else [p.text for p in pairs]))
    position = {text: i for i, text in enumerate(texts)}
    queries = [by_query[qid][0].query for qid in targets]
    if method == "bm25":
        scores = _bm25_scores(queries, texts)
    else:
        if model_dir is None:
            raise ConfigError("biencoder mining needs model_dir (a local sentence-transformers model)")
        scores = _biencoder_scores(queries, texts, model_dir)
    mined = []
    for row, qid in enumerate(targets):
        group = by_query[qid]
        known = {p.text for p in group}
        positive_scores = [scores[row, position[p.text]] for p in group if p.positive and p.text in position]
        ceiling = margin * max(positive_scores) if positive_scores else np.inf
        taken = 0
        for index in np.argsort(-scores[row]):
            if taken >= per_query:
                break
            text = texts[index]
            if text in known or scores[row, index] <= 0 or scores[row, index] >= ceiling:
                continue
            first = group[0]
            mined.append(
                LabelledPair(
                    query=first.query,
                    text=text,
                    label=Verdict.IRRELEVANT,
                    query_id=qid,
                    source=first.source,
                    metadata={"mined": method, "score": float(scores[row, index])},
                )
            )
            taken += 1
    return mined
