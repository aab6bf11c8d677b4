"""Exported embedders as retrievers: does the fine-tuned bi-encoder find the relevant chunks as well as the frozen one?

The grader's cosine and the index's dense search share one embedder (so a search's vectors are reused by the grader).
Before the fine-tuned embedder (``crag train-embedder``) replaces the frozen all-MiniLM-L6-v2 for both, its search
must not be worse. Corpus: every distinct chunk of the given pair files (all domains together, so each query meets
the mined negatives of its own domain and everything else); a query with a relevant chunk ranks the whole corpus by
cosine. Reported per domain and embedder: recall@5, recall@10 (share of the query's relevant chunks in the top k)
and MRR of its first relevant chunk; the embedders are run interleaved in batches on the same texts.

    python bench/bench_retrieval_embedders.py --work runs/v3 --embedders models/embedders/minilm-l6 runs/ftbi/embedder \
        --json bench/results_retrieval_embedders.json
"""

from __future__ import annotations

import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.output import emit, work_parser
from grader.embedder import OnnxMiniLMEmbedder, query_text
from training.data import load_pairs

KS = (5, 10)
BATCH = 64


def embed_interleaved(embedders: list[Any], texts: list[str]) -> list[np.ndarray]:
    """Each embedder's vectors of ``texts``, batch by batch in turn (the machine's noise falls on all alike)."""
    parts: list[list[np.ndarray]] = [[] for _ in embedders]
    for start in range(0, len(texts), BATCH):
        for part, embedder in zip(parts, embedders, strict=True):
            part.append(embedder.embed(texts[start:start + BATCH]))
    return [np.concatenate(p) for p in parts]


def ranking_metrics(queries: np.ndarray, corpus: np.ndarray, relevant: list[set[int]]) -> dict[str, np.ndarray]:
    """Per query: recall@k for each k and the reciprocal rank of its first relevant chunk."""
    scores = queries @ corpus.T
    order = np.argsort(-scores, axis=1, kind="stable")
    out: dict[str, list[float]] = defaultdict(list)
    for row, rel in zip(order, relevant, strict=True):
        hits = np.isin(row, list(rel))
        for k in KS:
            out[f"recall@{k}"].append(float(hits[:k].sum()) / len(rel))
        out["mrr"].append(1.0 / (int(np.argmax(hits)) + 1))
    return {k: np.array(v) for k, v in out.items()}


def main() -> None:
    parser = work_parser(__doc__)
    parser.add_argument("--embedders", nargs="+", type=Path, required=True, help="exported embedder folders")
    parser.add_argument("--files", nargs="+", default=["heldout.jsonl", "fuse.jsonl"],
                        help="pair files under --work that make the corpus and the queries")
    args = parser.parse_args()
    pairs = [p for name in args.files for p in load_pairs(args.work / name).pairs]
    chunks = sorted({p.text for p in pairs})
    position = {t: i for i, t in enumerate(chunks)}
    relevant: dict[str, set[int]] = defaultdict(set)
    domain: dict[str, str] = {}
    for p in pairs:
        domain.setdefault(p.query, str(p.metadata.get("domain", "all")))
        if p.label == "relevant":
            relevant[p.query].add(position[p.text])
    queries = sorted(relevant)
    embedders = [OnnxMiniLMEmbedder(path) for path in args.embedders]
    started = time.perf_counter()
    corpora = embed_interleaved(embedders, chunks)
    results: dict[str, Any] = {"corpus_chunks": len(chunks), "queries": len(queries), "embedders": {}}
    for path, embedder, corpus in zip(args.embedders, embedders, corpora, strict=True):
        vectors = embedder.embed([query_text(embedder, q) for q in queries])
        metrics = ranking_metrics(vectors, corpus, [relevant[q] for q in queries])
        by_domain: dict[str, dict[str, float]] = {}
        for name in sorted(set(domain[q] for q in queries)):
            rows = np.array([domain[q] == name for q in queries])
            by_domain[name] = {"queries": int(rows.sum()), **{k: round(float(v[rows].mean()), 4)
                                                              for k, v in metrics.items()}}
        by_domain["all"] = {"queries": len(queries), **{k: round(float(v.mean()), 4) for k, v in metrics.items()}}
        results["embedders"][str(path)] = {"name": embedder.name, "domains": by_domain}
    results["seconds"] = round(time.perf_counter() - started, 1)
    emit(results, args.json)


if __name__ == "__main__":
    main()
