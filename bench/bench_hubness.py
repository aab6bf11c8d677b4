"""Hubness correction of the frozen cosine (CSLS, Conneau et al. 2018): does it rank held-out pairs better?

Some queries sit close to every passage and some passages close to every query ("hubs"), so a raw cosine is high
for them whatever the pair. Cross-domain similarity local scaling subtracts each side's mean cosine to its k
nearest neighbours in a fixed background set: ``2 cos(q, c) - r(q) - r(c)``, where ``r(q)`` is the query's mean
cosine to its k nearest background passages and ``r(c)`` the passage's to its k nearest background queries. Both
backgrounds come from the training split, so a pair's score still depends on nothing but the pair (and a fixed
set that would ship with a bundle). Scored with the shipped bundle's int8 embedder, the AUROC of the raw cosine,
of each one-sided correction and of CSLS on every held-out domain:

    python bench/bench_hubness.py --work runs/v3 --json bench/results_hubness.json

(``runs/v3``: the recipe's splits, made by ``crag recipe`` or ``training.recipe.prepare_default_data`` and
``fusion_splits``.)
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.metrics import roc_auc_score

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from grader.embedder import OnnxMiniLMEmbedder
from training.data import load_pairs


def embed(embedder: OnnxMiniLMEmbedder, texts: list[str]) -> dict[str, np.ndarray]:
    vectors = embedder.embed(texts)
    vectors = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    return dict(zip(texts, vectors, strict=True))


def neighbourhood(vectors: np.ndarray, background: np.ndarray, k: int) -> np.ndarray:
    """Each row's mean cosine to its k most similar background rows."""
    sims = vectors @ background.T
    return np.sort(sims, axis=1)[:, -k:].mean(axis=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=Path("runs/v3"))
    parser.add_argument("--embedder", type=Path, default=Path("models/bundles/default/embedder"))
    parser.add_argument("--background", type=int, default=2000, help="background queries and passages, each")
    parser.add_argument("--k", type=int, nargs="+", default=[5, 10, 50])
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    rng = random.Random(args.seed)
    train = load_pairs(args.work / "train.jsonl").pairs
    heldout = load_pairs(args.work / "heldout.jsonl").pairs
    queries = sorted({p.query for p in train})
    passages = sorted({p.text for p in train})
    background_queries = rng.sample(queries, min(args.background, len(queries)))
    background_passages = rng.sample(passages, min(args.background, len(passages)))
    embedder = OnnxMiniLMEmbedder(args.embedder, threads=2)
    start = time.perf_counter()
    needed = sorted({p.query for p in heldout} | {p.text for p in heldout} | set(background_queries)
                    | set(background_passages))
    vectors = embed(embedder, needed)
    seconds = time.perf_counter() - start
    bq = np.stack([vectors[t] for t in background_queries])
    bp = np.stack([vectors[t] for t in background_passages])
    q = np.stack([vectors[p.query] for p in heldout])
    c = np.stack([vectors[p.text] for p in heldout])
    cosine = (q * c).sum(axis=1)
    labels = np.array([p.positive for p in heldout])
    domains = np.array([p.metadata.get("domain", "unknown") for p in heldout])
    variants: dict[str, np.ndarray] = {"cosine": cosine}
    for k in args.k:
        r_q, r_c = neighbourhood(q, bp, k), neighbourhood(c, bq, k)
        variants[f"minus_query_hub_k{k}"] = cosine - r_q
        variants[f"minus_passage_hub_k{k}"] = cosine - r_c
        variants[f"csls_k{k}"] = 2 * cosine - r_q - r_c
    results: dict[str, dict[str, float]] = {}
    for name, score in variants.items():
        results[name] = {d: round(float(roc_auc_score(labels[domains == d], score[domains == d])), 4)
                         for d in sorted(set(domains))}
    width = max(len(n) for n in results)
    header = "".join(f"{d[:14]:>16}" for d in sorted(set(domains)))
    print(f"{'variant':<{width}}{header}")
    for name, row in results.items():
        print(f"{name:<{width}}" + "".join(f"{row[d]:>16.4f}" for d in sorted(row)))
    if args.json:
        args.json.write_text(json.dumps({
            "command": "python bench/bench_hubness.py " + " ".join(sys.argv[1:]),
            "embedder": str(args.embedder), "background_queries": len(bq), "background_passages": len(bp),
            "heldout_pairs": len(heldout), "embedding_seconds": round(seconds, 1), "auroc": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
