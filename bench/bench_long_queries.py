"""Long queries: the default grader reading a long query by its two ends (within half the window for the
cross-encoder, within one window for the fused cosine) against reading it as it is (what crag did before
2026-12-07: the cross-encoder truncated the pair, the cosine kept the query's first 254 tokens), on the recipe's
held-out pairs made long.

A query of more than about 190 tokens left the text no window of its own: the pair fell back to one window
truncated longest-first, so the text was read as its first ~128 tokens (an answer further on never read), and
a question at the end of a long message lost the end of its query. Real long queries are rare in the shared data,
so each held-out query is made long the way users make them: a story told before the question (``before``) or
details pasted after it (``after``), ~150-250 tokens of text from other domains' held-out passages, chosen by a
seeded generator. The same pairs with their own short query are scored too (``short``, where nothing changes).
The "whole" way's pairs whose query leaves the text under a stride of room make ``tokenizers`` panic (caught: the
pair falls back to one window, as before; set RUST_BACKTRACE=0 to keep the panic's backtrace off the terminal).
Run:
  python bench/bench_long_queries.py --work runs/v3 --per-domain 150 --json bench/results_long_queries.json
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _filler(rng: random.Random, passages: list[str], words: int) -> str:
    """About ``words`` words of passage text, whole sentences where the passages have them."""
    out: list[str] = []
    while len(out) < words:
        out += rng.choice(passages).split()[:80]
    return " ".join(out[:words]).rstrip(".,;:") + "."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("runs/v3"), help="the recipe's work directory")
    parser.add_argument("--model", default="default")
    parser.add_argument("--per-domain", type=int, default=150, help="pairs per domain (a seeded sample)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    from sklearn.metrics import roc_auc_score

    from grader import load_grader
    from pipeline.corrective.correction import first_search
    from training.recipe import domain_sets

    rng = random.Random(args.seed)
    sets = domain_sets(args.work / "heldout.jsonl")
    chosen: dict[str, list] = {}
    for domain, pairs in sets.items():
        items = list(pairs.pairs)
        rng.shuffle(items)
        chosen[domain] = items[: args.per_domain]
    passages = {d: [p.text for p in items] for d, items in chosen.items()}

    grader = load_grader(args.model, cache_pairs=0)
    readers = [type(grader.encoder)] + ([type(grader.fusion_embedder)] if grader.fusion_embedder is not None else [])
    ends = {reader: reader.fit_query for reader in readers}  # the cross-encoder's and the cosine's

    def read_whole(self, query):  # what the encoder did before: the query as it is
        return query, False

    results: dict[str, dict] = {}
    for domain, items in chosen.items():
        others = [t for d, texts in passages.items() if d != domain for t in texts]
        labels = [int(p.label.value != "irrelevant") for p in items]
        long_queries = {}
        for p in items:
            story = _filler(rng, others, rng.randint(120, 190))
            details = _filler(rng, others, rng.randint(120, 190))
            long_queries[p.query] = (f"{story} {p.query}", f"{p.query} {details}")
        row: dict[str, dict] = {}
        for form in ("short", "before", "after"):
            pairs = [(p.query if form == "short" else long_queries[p.query][0 if form == "before" else 1], p.text)
                     for p in items]
            for way in ("whole", "ends", "question"):  # interleaved: same machine state
                for reader in readers:
                    reader.fit_query = read_whole if way == "whole" else ends[reader]
                read = [(first_search(q), t) for q, t in pairs] if way == "question" else pairs
                probs = grader.scores_as_graded(read).probabilities  # no timing: the cosine's cache is shared
                row[f"{form}/{way}"] = round(float(roc_auc_score(labels, probs)), 4)
            for reader in readers:
                reader.fit_query = ends[reader]
        results[domain] = {"pairs": len(items), **row}
        print(domain, json.dumps(row), flush=True)
    if args.json:
        args.json.write_text(json.dumps({"model": args.model, "per_domain": args.per_domain, "seed": args.seed,
                                         "results": results}, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
