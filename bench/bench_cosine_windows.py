"""Does the frozen bi-encoder read better in 128-token windows than in the 256 tokens the default gives it?

all-MiniLM-L6-v2 was trained on inputs of at most 128 tokens, while the shipped embedder reads 256 (and a fused
grader takes the best of up to 8 overlapping 256-token windows). This measures, per held-out domain, the cosine's
AUROC (torch fp32, sentence-transformers) when a text is read as: its first 256 / 128 tokens; the best of its
overlapping windows of 256 / 128 tokens (stride a quarter); the mean of those windows' vectors.

Run: python bench/bench_cosine_windows.py --data runs/v3/heldout.jsonl [--per-domain 400]
     [--json bench/results_cosine_windows.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from training.base_models import resolve_base  # noqa: E402


def windows(tokenizer, text: str, length: int, max_windows: int = 16) -> list[str]:
    """Overlapping windows of ``length`` tokens (special tokens included), stride a quarter, as text."""
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    body, overlap = length - 2, length // 4
    out = []
    for start in range(0, max(1, len(ids)), body - overlap):
        out.append(tokenizer.decode(ids[start:start + body]))
        if start + body >= len(ids) or len(out) == max_windows:
            break
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="labelled JSONL, metadata.domain")
    parser.add_argument("--per-domain", type=int, default=400, help="first N pairs of each domain")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args()

    import torch
    from sentence_transformers import SentenceTransformer
    from sklearn.metrics import roc_auc_score

    torch.set_num_threads(args.threads)
    by_domain: dict[str, list[dict]] = defaultdict(list)
    for line in args.data.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        by_domain[row.get("metadata", {}).get("domain") or row.get("source", "")].append(row)
    model = SentenceTransformer(str(resolve_base("default-base")), device="cpu")
    tokenizer = model.tokenizer
    results = {}
    for domain, rows in sorted(by_domain.items()):
        rows = rows[:args.per_domain]
        labels = np.array([row["label"] in ("relevant", "partial") for row in rows], dtype=int)
        if labels.min() == labels.max():
            continue
        queries = model.encode([row["query"] for row in rows], normalize_embeddings=True, batch_size=32)
        out: dict[str, float] = {}
        for length in (256, 128):
            model.max_seq_length = length
            first = model.encode([row["text"] for row in rows], normalize_embeddings=True, batch_size=32)
            out[f"first_{length}"] = roc_auc_score(labels, (queries * first).sum(1))
            pieces = [windows(tokenizer, row["text"], length) for row in rows]
            owner = np.repeat(np.arange(len(rows)), [len(p) for p in pieces])
            vectors = model.encode([w for p in pieces for w in p], normalize_embeddings=True, batch_size=32)
            best = np.full(len(rows), -np.inf)
            np.maximum.at(best, owner, (queries[owner] * vectors).sum(1))
            mean = np.zeros((len(rows), vectors.shape[1]))
            np.add.at(mean, owner, vectors)
            mean /= np.linalg.norm(mean, axis=1, keepdims=True)
            out[f"best_window_{length}"] = roc_auc_score(labels, best)
            out[f"mean_vector_{length}"] = roc_auc_score(labels, (queries * mean).sum(1))
        out["median_tokens"] = float(np.median([len(tokenizer(row["text"])["input_ids"]) for row in rows]))
        out["pairs"] = len(rows)
        results[domain] = out
        print(domain, {k: round(v, 3) for k, v in out.items()}, flush=True)
    if args.json:
        args.json.write_text(json.dumps({"command": " ".join(sys.argv), "per_domain": results}, indent=1) + "\n",
                             encoding="utf-8")


if __name__ == "__main__":
    main()
