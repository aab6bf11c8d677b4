"""The multi-domain training mix of the default grader: one builder per source, each with varied negatives.

Every pair carries ``metadata["domain"]`` (what kind of text it is) and ``metadata["kind"]`` (positive or the
kind of negative: ``random``, ``topical`` (same article/thread), ``lexical`` (BM25-mined), ``answer_level``
(unanswerable on the same passage), ``degenerate`` (echoes of the query, near-empty text, boilerplate)), so
the manifest can record exactly how many pairs of each went in (:func:`mix_summary`).

Sources are read from ``shared/data`` as documented in its README; nothing is fetched.
"""

from __future__ import annotations

import json
import random
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from models.errors import DataError
from models.types import Verdict
from training.convert import squad_pairs, wikiqa_pairs
from training.data import LabelledPair, group_by_query, load_pairs
from training.negatives import mine_hard_negatives

__all__ = [
    "degenerate_negatives",
    "graded_pairs",
    "mix_summary",
    "negatives_per_query",
    "squad_v1_pairs",
    "squad_v2_pairs",
    "tag",
    "wikiqa_sampled",
]

# Text that answers nothing: echoes and paraphrases of a question, near-empty chunks, page furniture.
ECHO_TEMPLATES = (
    "{q}",
    "{q}?",
    "I have the same question: {q}",
    "Same problem here. {q} Any ideas?",
    "Re: {q}",
    "Does anyone know? {q}",
    "{q} I was wondering about this too.",
    "Question: {q}",
    "Can someone tell me {q_lower}",
    "Thanks, I have the same problem too.",
)
NEAR_EMPTY = (".", " .", "ok", "thanks!", "n/a", "x", "y", "???", "-", "see above", "bump", "+1", "hello", "test")
BOILERPLATE = (
    "Home | About us | Contact | Privacy policy | Terms of use | Sitemap",
    "Skip to main content. Menu. Search. Sign in. Register.",
    "Copyright (c) 2024. All rights reserved. Powered by WordPress.",
    "This website uses cookies to improve your experience. Accept all cookies. Cookie settings.",
    "Share this: Facebook Twitter LinkedIn Email Print",
    "Previous article | Next article | Back to top",
    "Subscribe to our newsletter to get the latest updates delivered to your inbox.",
    "Page 1 of 3. Next page. Jump to: navigation, search.",
    "Loading... Please enable JavaScript to view this page.",
    "Posted by admin | 3 comments | Filed under Uncategorized",
)


def tag(pairs: Iterable[LabelledPair], domain: str, kind: str | None = None) -> list[LabelledPair]:
    """Copies of ``pairs`` with ``domain`` (and ``kind`` when given) in their metadata."""
    out = []
    for p in pairs:
        meta = {**p.metadata, "domain": domain}
        if kind is not None:
            meta["kind"] = kind
        elif "kind" not in meta:
            meta["kind"] = "positive" if p.positive else "negative"
        out.append(replace(p, metadata=meta, source=p.source or domain))
    return out


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        raise DataError(f"the training mix needs {path}; pass --data pointing at shared/data")
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def graded_pairs(path: Path, domain: str, *, label_of: dict[Any, Verdict] | None = None) -> list[LabelledPair]:
    """Pairs of a shared JSONL file (trec_dl, noveleval, pubmedqa, stackfaq, covidfaq format)."""
    out = []
    for row in _read_jsonl(path):
        if label_of is not None and row.get("grade") in label_of:
            label = label_of[row["grade"]]
        else:
            label = Verdict(row["label"])
        kind = "positive" if label.is_positive else {"tfidf_top3": "lexical", "random": "random"}.get(
            row.get("neg_kind") or "", "judged_negative")
        out.append(LabelledPair(query=row["query"], text=row["text"], label=label, query_id=row["query_id"],
                                chunk_id=row.get("chunk_id"), source=domain,
                                metadata={"domain": domain, "kind": kind, "grade": row.get("grade")}))
    return out


def negatives_per_query(pairs: list[LabelledPair], per_kind: dict[str, int], seed: int,
                        max_positives: int = 2) -> list[LabelledPair]:
    """Keep up to ``max_positives`` positives and ``per_kind[kind]`` negatives of each kind per query."""
    rng = random.Random(seed)
    kept = []
    for group in group_by_query(pairs).values():
        positives = [p for p in group if p.positive]
        kept += rng.sample(positives, min(max_positives, len(positives)))
        by_kind: dict[str, list[LabelledPair]] = defaultdict(list)
        for p in group:
            if not p.positive:
                by_kind[p.metadata.get("kind", "negative")].append(p)
        for kind, items in by_kind.items():
            kept += rng.sample(items, min(per_kind.get(kind, 0), len(items)))
    return kept


def squad_v1_pairs(path: Path, *, questions: int, seed: int) -> list[LabelledPair]:
    """SQuAD 1.1: positive, topical (same article, BM25-nearest: lexical too) and random negatives."""
    data = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise DataError(f"{path}: expected the SQuAD 1.1 JSON of shared/data/squad1")
    rng = random.Random(seed)
    items = [(a["title"], p_index, p["context"], qa) for a in data["data"]
             for p_index, p in enumerate(a["paragraphs"]) for qa in p["qas"]]
    chosen = rng.sample(items, min(questions, len(items)))
    contexts = {a["title"]: [p["context"] for p in a["paragraphs"]] for a in data["data"]}
    titles = sorted(contexts)
    out: list[LabelledPair] = []
    positives_by_title: dict[str, list[LabelledPair]] = defaultdict(list)
    for title, p_index, context, qa in chosen:
        question = qa["question"].strip()
        if not question:
            continue
        base = {"query": question, "query_id": qa.get("id") or f"sq11-{title}-{p_index}-{len(out)}",
                "source": title}
        positive = LabelledPair(**base, text=context, label=Verdict.RELEVANT, chunk_id=f"{title}#{p_index}",
                                metadata={"kind": "positive"})
        out.append(positive)
        positives_by_title[title].append(positive)
        other = rng.choice([t for t in titles if t != title])
        o_index = rng.randrange(len(contexts[other]))
        out.append(LabelledPair(**base, text=contexts[other][o_index], label=Verdict.IRRELEVANT,
                                chunk_id=f"{other}#{o_index}", metadata={"kind": "random"}))
    for title, positives in positives_by_title.items():
        mined = mine_hard_negatives(positives, corpus=contexts[title], per_query=1, margin=0.95)
        out += [replace(p, metadata={"kind": "topical"}) for p in mined]
    return tag(out, "wikipedia_paragraphs")


def squad_v2_pairs(paths: list[Path], *, exclude_articles: set[str], questions: int, seed: int) -> list[LabelledPair]:
    """SQuAD 2.0 dev: answerable vs adversarially unanswerable on the same paragraph (answer-level negatives)."""
    pairs = []
    for path in paths:
        pairs += squad_pairs(path, same_article_negatives=1, other_article_negatives=0, seed=seed)
    pairs = [p for p in pairs if p.source not in exclude_articles]
    groups = group_by_query(pairs)
    keep = set(random.Random(seed).sample(sorted(groups), min(questions, len(groups))))
    kinds = {"unanswerable": "answer_level", "answerable": "positive", "same_article": "topical"}
    out = [replace(p, metadata={"kind": kinds.get(p.metadata.get("kind", ""), "negative")})
           for p in pairs if p.query_id in keep]
    return tag(out, "wikipedia_adversarial")


def wikiqa_sampled(path: Path, *, negatives: int, seed: int) -> list[LabelledPair]:
    """WikiQA: every answer sentence and a few non-answer sentences of the same summary (topical)."""
    rng = random.Random(seed)
    kept = []
    for group in group_by_query(wikiqa_pairs(path)).values():
        positives = [p for p in group if p.positive]
        if not positives:
            continue
        kept += tag(positives, "wikipedia_sentences", "positive")
        pool = [p for p in group if not p.positive]
        kept += tag(rng.sample(pool, min(negatives, len(pool))), "wikipedia_sentences", "topical")
    return kept


def degenerate_negatives(pairs: list[LabelledPair], *, count: int, seed: int) -> list[LabelledPair]:
    """Echoes of the query, near-empty chunks and boilerplate for queries drawn from ``pairs``."""
    rng = random.Random(seed)
    queries = list({p.query_id: p for p in pairs}.values())
    out = []
    for i in range(count):
        p = rng.choice(queries)
        q = p.query.strip().rstrip("?")
        family = i % 3
        if family == 0:
            text = rng.choice(ECHO_TEMPLATES).format(q=q, q_lower=q[:1].lower() + q[1:] + "?")
        elif family == 1:
            text = rng.choice(NEAR_EMPTY)
        else:
            text = rng.choice(BOILERPLATE)
        query = p.query if rng.random() > 0.15 else rng.choice(("hello", "x", "test", "help", q.split()[0]))
        if family == 0 and query != p.query:
            text = query  # a bare echo of a one-word query ("hello" / "hello")
        out.append(LabelledPair(query=query, text=text, label=Verdict.IRRELEVANT, query_id=p.query_id,
                                source="degenerate", chunk_id=f"degenerate-{i}",
                                metadata={"domain": p.metadata.get("domain", "mixed"), "kind": "degenerate"}))
    return out


def mix_summary(pairs: list[LabelledPair]) -> dict[str, Any]:
    """Pairs per domain, per kind of pair, and per label: what the manifest records about the mix."""
    by_domain: dict[str, Counter[str]] = defaultdict(Counter)
    for p in pairs:
        by_domain[p.metadata.get("domain", "unknown")][p.metadata.get("kind", "unknown")] += 1
    labels = Counter(p.label.value for p in pairs)
    return {
        "pairs": len(pairs),
        "queries": len({p.query_id for p in pairs}),
        "labels": dict(sorted(labels.items())),
        "by_domain": {d: dict(sorted(c.items())) for d, c in sorted(by_domain.items())},
    }


def load_split(path: Path) -> list[LabelledPair]:
    """Read a split written by the recipe (metadata kept)."""
    return load_pairs(path).pairs
