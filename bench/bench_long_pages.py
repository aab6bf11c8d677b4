"""Long pages: is the answer found when it is not on the first screen?

Real long-page sets are not available here, so pages are assembled from held-out labelled pairs (the
recipe's test split, queries never trained on): a page is a block of site furniture (navigation, cookie
banner; ~110 tokens, written here) followed by four sections. The relevant page holds the query's relevant
text as section 2, 3 or 4 among three of its own irrelevant texts (same-query negatives: topical, lexical or
judged); the irrelevant page holds four of those negatives. Both pages are about the same thing, so only
reading past the first screen can tell them apart.

Contenders, on the same pages: the default's bi-encoder cosine (untrained all-MiniLM-L6-v2 until v3.2, since then
the fine-tuned one) on the first 256 tokens (how such pages are usually scored), the bi-encoder's best window, and
the default grader with the cross-encoder and the cosine each read over 1, 4 or 8 (the default) windows; plus the
fusion as shipped before (cross-encoder windows, cosine of the first window only). Reported: AUROC per domain
and grading time per page.

Run: python bench/bench_long_pages.py --data runs/v3/test.jsonl [--per-domain 150]
     [--json bench/results_long_pages.json]
(`crag recipe --data ../shared/data --work runs/v3` writes runs/v3/test.jsonl.)
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
from sklearn.metrics import roc_auc_score
from tokenizers import Tokenizer

from grader import load_grader

FURNITURE = (
    "Skip to main content. Home | Products | Solutions | Documentation | Pricing | Blog | Community | Support | "
    "Sign in | Create account. Search this site. We use cookies to improve your experience, analyse traffic and "
    "personalise content. By continuing to browse you agree to our use of cookies. Accept all | Manage "
    "preferences. You are here: Home > Resources > Articles. Share: Facebook Twitter LinkedIn Email Print. "
    "Table of contents. Last updated. Was this page helpful? Yes No. Related topics."
)
DOMAINS = ("biomedical", "consumer_health", "tech_faq", "web", "wikipedia_sentences")
SECTIONS = 4


def build_pages(rows: list[dict], per_domain: int, seed: int) -> list[tuple[str, str, int, str]]:
    """(query, page, label, domain): one relevant and one irrelevant page per query that has a relevant text
    and at least four irrelevant ones."""
    rng = random.Random(seed)
    groups: dict[tuple[str, str], dict[str, list[str]]] = defaultdict(lambda: {"relevant": [], "irrelevant": []})
    for row in rows:
        domain = row.get("metadata", {}).get("domain")
        if domain in DOMAINS and row["label"] in ("relevant", "irrelevant"):
            groups[(domain, row["query"])][row["label"]].append(row["text"])
    pages = []
    for domain in DOMAINS:
        keys = sorted(k for k in groups if k[0] == domain and groups[k]["relevant"]
                      and len(groups[k]["irrelevant"]) >= SECTIONS)
        for _, query in rng.sample(keys, min(per_domain, len(keys))):
            texts = groups[(domain, query)]
            negatives = rng.sample(texts["irrelevant"], SECTIONS)
            relevant = negatives[: SECTIONS - 1]
            relevant.insert(rng.randint(1, SECTIONS - 1), rng.choice(texts["relevant"]))
            for sections, label in ((relevant, 1), (negatives, 0)):
                pages.append((query, FURNITURE + "\n\n" + "\n\n".join(sections), label, domain))
    return pages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="labelled pairs with metadata.domain (JSONL)")
    parser.add_argument("--model", default="default")
    parser.add_argument("--per-domain", type=int, default=150)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = [json.loads(line) for line in args.data.open(encoding="utf-8")]
    pages = build_pages(rows, args.per_domain, args.seed)
    pairs = [(q, page) for q, page, _, _ in pages]
    labels = np.array([label for _, _, label, _ in pages])
    domains = np.array([domain for _, _, _, domain in pages])
    grader = load_grader(args.model)
    counter = Tokenizer.from_file(str(grader.bundle.file("tokenizer.json")))
    counter.no_truncation()
    tokens = [len(counter.encode(page).ids) for _, page, _, _ in pages]

    scores: dict[str, np.ndarray] = {}
    seconds: dict[str, float] = {}
    for windows in (1, 4, 8):  # fresh caches each time: every page is read anew
        grader = load_grader(args.model, max_windows=windows)
        grader.fusion_embedder.cache.clear()  # the process-wide vector cache, shared by every grader
        start = time.perf_counter()
        scored = grader.score_pairs(pairs)
        seconds[f"grader, {windows} windows"] = time.perf_counter() - start
        ce, cos = scored.fusion_inputs
        scores[f"bi-encoder cosine, best of {windows} windows"] = cos
        scores[f"cross-encoder alone, {windows} windows"] = ce
        scores[f"default grader, {windows} windows (cross-encoder and cosine)"] = scored.logits
        if windows > 1:
            first = scores["bi-encoder cosine, best of 1 windows"]
            scores[f"as shipped before: cross-encoder {windows} windows, cosine first window"] = (
                grader.fusion.combine(ce, first))

    report: dict = {
        "what": "long pages assembled from held-out labelled pairs (furniture + 4 sections; the relevant page has "
                "the relevant text as section 2-4); AUROC per domain, grading time per page",
        "command": f"python bench/bench_long_pages.py --data {args.data} --per-domain {args.per_domain} "
                   f"--seed {args.seed}",
        "pages": {d: int((domains == d).sum()) for d in DOMAINS},
        "tokens_per_page": {"median": float(np.median(tokens)), "p90": float(np.percentile(tokens, 90))},
        "ms_per_page": {k: round(1000 * v / len(pairs), 1) for k, v in seconds.items()},
        "auroc": {},
    }
    for name, values in scores.items():
        per = {d: round(float(roc_auc_score(labels[domains == d], values[domains == d])), 4)
               for d in DOMAINS if (domains == d).any()}
        per["mean"] = round(float(np.mean(list(per.values()))), 4)
        report["auroc"][name] = per
    text = json.dumps(report, indent=2)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
