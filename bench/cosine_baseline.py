"""AUROC of the untrained all-MiniLM-L6-v2 bi-encoder (cosine of mean-pooled embeddings) on labelled pairs.

The reference point the trained grader must beat. Run:
  python bench/cosine_baseline.py runs/default/wikiqa_test.jsonl runs/default/squad_test.jsonl
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    from sentence_transformers import SentenceTransformer
    from sklearn.metrics import roc_auc_score

    from training.base_models import resolve_base
    from training.data import load_pairs
    from training.metrics import binary_labels

    model = SentenceTransformer(str(resolve_base("default-base")), device="cpu")
    result = {"model": "all-MiniLM-L6-v2 (untrained for grading)", "auroc": {}}
    for path in sys.argv[1:]:
        pairs = load_pairs(path).pairs
        q = model.encode([p.query for p in pairs], normalize_embeddings=True, batch_size=64)
        t = model.encode([p.text for p in pairs], normalize_embeddings=True, batch_size=64)
        result["auroc"][Path(path).stem] = float(roc_auc_score(binary_labels(pairs), (q * t).sum(1)))
        print(Path(path).stem, round(result["auroc"][Path(path).stem], 4), flush=True)
    (ROOT / "bench" / "results_cosine_baseline.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
