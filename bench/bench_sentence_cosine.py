"""Would the best sentence's cosine help the fused score? The frozen bi-encoder's cosine of the whole chunk
(best window, as the fused grader reads it) against the cosine of the chunk's best sentence strip and two
standardised mixes of both, AUROC per domain of labelled pairs (the pairs the model decides; rule-decided
echoes left out, as everywhere else).

Run: python bench/bench_sentence_cosine.py --data runs/v3/heldout.jsonl --json bench/results_sentence_cosine.json
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

from grader.embedder import EMBEDDER_DIR, OnnxMiniLMEmbedder  # noqa: E402
from grader.fusion import cosines  # noqa: E402
from pipeline.retrieval.strips import sentence_strips  # noqa: E402
from training.metrics import auroc, binary_labels  # noqa: E402
from training.recipe import model_decided_by_domain  # noqa: E402


def standardised(values: np.ndarray) -> np.ndarray:
    return (values - values.mean()) / (values.std() + 1e-9)


def domain_report(embedder: OnnxMiniLMEmbedder, pairs: list[tuple[str, str]], y: np.ndarray) -> dict:
    chunk = cosines(embedder, pairs, max_windows=8)
    strips = [sentence_strips(text) or [text] for _, text in pairs]
    distinct = sorted({s for ss in strips for s in ss})
    vectors = dict(zip(distinct, embedder.embed(distinct), strict=True))
    queries = sorted({q for q, _ in pairs})
    q_vectors = dict(zip(queries, embedder.embed(queries), strict=True))
    best = np.array([max(float(vectors[s] @ q_vectors[q]) for s in ss)
                     for (q, _), ss in zip(pairs, strips, strict=True)])
    report = {"pairs": len(pairs), "strips_per_chunk": round(float(np.mean([len(ss) for ss in strips])), 1),
              "chunk_cosine": auroc(y, chunk), "best_sentence_cosine": auroc(y, best)}
    for share in (0.25, 0.5):
        report[f"mix_{share}_best_sentence"] = auroc(y, (1 - share) * standardised(chunk) + share * standardised(best))
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="labelled pairs with a domain in their metadata (JSONL)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    by_domain: dict[str, list] = defaultdict(list)
    for domain, pair in model_decided_by_domain(Path(args.data)):
        by_domain[domain].append(pair)
    embedder = OnnxMiniLMEmbedder(EMBEDDER_DIR, batch_size=1, threads=args.threads)
    report: dict = {"data": args.data, "domains": {}}
    for domain, pairs in sorted(by_domain.items()):
        row = domain_report(embedder, [(p.query, p.text) for p in pairs], binary_labels(pairs))
        report["domains"][domain] = row
        print(domain, json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
