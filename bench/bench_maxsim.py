"""Late interaction from the frozen bi-encoder: does a ColBERT-style MaxSim help where the default generalises least?

The shipped cosine compares two mean-pooled vectors; the cross-encoder reads the pair jointly but is fine-tuned on
the training domains. MaxSim (Khattab and Zaharia 2020; BERTScore recall, Zhang et al. 2020) sits between: every
query token's contextual vector from the *frozen* all-MiniLM-L6-v2 (the shipped int8 embedder, no training) is
matched to its most similar token of the text, and the similarities averaged over the query (``maxsim``), or
weighted by each query token's IDF in the training passages (``maxsim_idf``, so that "what", "is" and "the" count
little). Being frozen, it might generalise as the cosine does while seeing which words match. Each is judged as
``bench/feature_mix.py`` judges a feature (weight chosen on the fusion data by its worst domain, and again with
each domain left out; held-out AUROC reported):

    python bench/bench_maxsim.py --work runs/v3 --json bench/results_maxsim.json

(``runs/v3``: the recipe's splits, made by ``crag recipe`` or ``training.recipe.prepare_default_data`` and
``fusion_splits``.)
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.feature_mix import judge, scored_sets
from bench.output import emit
from grader.embedder import EMBEDDER_DIR, OnnxMiniLMEmbedder
from training.data import load_pairs

FEATURES = ("maxsim", "maxsim_idf")


class TokenStates:
    """Each text's unit-normalised contextual token vectors ([CLS] and [SEP] dropped) and token ids, memoised."""

    def __init__(self, embedder: OnnxMiniLMEmbedder) -> None:
        self.embedder = embedder
        self.memo: dict[str, tuple[np.ndarray, list[int]]] = {}

    def __call__(self, text: str) -> tuple[np.ndarray, list[int]]:
        if text not in self.memo:
            ids = self.embedder.tokenizer.encode(text or " ").ids
            array = np.array([ids], dtype=np.int64)
            hidden = self.embedder.sessions.run({"input_ids": array, "attention_mask": np.ones_like(array),
                                                 "token_type_ids": np.zeros_like(array)})[0][1:-1]
            hidden = hidden / np.maximum(np.linalg.norm(hidden, axis=1, keepdims=True), 1e-12)
            self.memo[text] = (hidden.astype(np.float32), ids[1:-1])
        return self.memo[text]


def idf_table(embedder: OnnxMiniLMEmbedder, passages: list[str]) -> tuple[dict[int, float], float]:
    """Smoothed IDF of each token id over ``passages``, and the value of a token never seen."""
    df: Counter[int] = Counter()
    for encoding in embedder.tokenizer.encode_batch(passages):
        df.update(set(encoding.ids))
    n = len(passages)
    return {t: math.log((n + 1) / (c + 1)) + 1 for t, c in df.items()}, math.log(n + 1) + 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, default=Path("runs/v3"))
    ap.add_argument("--idf-passages", type=int, default=20000, help="training passages the IDF is counted on")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    embedder = OnnxMiniLMEmbedder(EMBEDDER_DIR, threads=2)
    states = TokenStates(embedder)
    passages = sorted({p.text for p in load_pairs(args.work / "train.jsonl").pairs})[: args.idf_passages]
    idf, unseen = idf_table(embedder, passages)

    def features(pairs: list[tuple[str, str]]) -> dict[str, np.ndarray]:
        plain, weighted = [], []
        for query, text in pairs:
            q, q_ids = states(query)
            t, _ = states(text)
            best = (q @ t.T).max(axis=1) if len(q) and len(t) else np.zeros(max(len(q), 1), dtype=np.float32)
            w = np.array([idf.get(i, unseen) for i in q_ids] or [1.0])
            plain.append(float(best.mean()))
            weighted.append(float((best * w).sum() / w.sum()))
        return {"maxsim": np.array(plain), "maxsim_idf": np.array(weighted)}

    sets = scored_sets(args.work, features)
    report = {name: judge(sets, name) for name in FEATURES}
    report["seconds"] = {k: v["seconds"] for k, v in sets.items()}
    report["idf_passages"] = len(passages)
    emit(report, args.json)


if __name__ == "__main__":
    main()
