"""How should a row of a FAQ table read, for the grader? Measured on the two FAQ sets of ../shared/data.

A support FAQ kept as a table has a question column and an answer column. The table reader could write a row as
``question: ... / answer: ...`` lines (each value named by its column), as its values alone (the question, then
the answer), or the grader could see the answer alone (how the sets' chunks are). Each form is graded by a bundle
for the sets' own user queries against their FAQ entries (the sets' labels: an entry's own answer relevant, the
mined other entries not), and reported as AUROC and mean probability over relevant and irrelevant pairs. The named
form is also graded packed, as a chunker that fills its chunks would leave it: the entry among other entries of its
set (drawn at random, in random order), as many as fit in 900 characters (the index's default chunk size).

- JHU COVID FAQ (``covidfaq``): an entry is an answer and the FAQ's own question (the pair whose ``grade`` names
  "faq"); queries are the user queries (``grade`` "user_query" only).
- StackFAQ (``stackfaq``): an entry is an answer of a thread and the thread's first paraphrase of the first set
  (``p0-0``) as its question; queries are the paraphrases of the thread's other set (``p1``), so no query is the
  entry's own question.

Run: python bench/bench_table_records.py [--data ../shared/data] [--per-set 500] [--bundle default]
     [--json bench/results_table_records.json]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.output import emit  # noqa: E402

FORMS = {
    "named values (question: / answer:)": lambda q, a: f"question: {q}\nanswer: {a}",
    "values alone (question, then answer)": lambda q, a: f"{q}\n{a}",
    "answer alone": lambda q, a: a,
}
PACKED = "named values, packed with other entries into one chunk of <= 900 characters"


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def covid_faq(data: Path) -> list[tuple[str, str, str, int]]:
    """(query, entry question, entry answer, label) for the user queries."""
    rows = _rows(data / "covidfaq" / "pairs.jsonl")
    own_question = {r["chunk_id"]: r["query"] for r in rows
                    if r["label"] == "relevant" and "faq" in r["grade"].split("+")}
    return [(r["query"], own_question[r["chunk_id"]], r["text"], int(r["label"] == "relevant")) for r in rows
            if r["chunk_id"] in own_question and (r["grade"] or "user_query") == "user_query"]


def stack_faq(data: Path) -> list[tuple[str, str, str, int]]:
    """(query, entry question, entry answer, label) for the second paraphrase set's queries."""
    rows = _rows(data / "stackfaq" / "pairs.jsonl")
    thread_question: dict[str, str] = {}
    for r in rows:
        if r["query_id"].endswith("-p0-0"):
            thread_question.setdefault(r["query_id"].split("-")[1], r["query"])
    out = []
    for r in rows:
        thread_of_entry = r["chunk_id"].split("-")[1]
        if "-p1-" in r["query_id"] and thread_of_entry in thread_question:
            out.append((r["query"], thread_question[thread_of_entry], r["text"], int(r["label"] == "relevant")))
    return out


def sample(pairs: list, n: int, seed: int = 13) -> list:
    """``n`` pairs, half relevant where there are enough (so both classes carry weight)."""
    by_label = defaultdict(list)
    for p in pairs:
        by_label[p[3]].append(p)
    rng = random.Random(seed)
    positives = rng.sample(by_label[1], min(n // 2, len(by_label[1])))
    negatives = rng.sample(by_label[0], min(n - len(positives), len(by_label[0])))
    return positives + negatives


def _packed(question: str, answer: str, entries: list, rng: random.Random, max_chars: int = 900) -> str:
    """The entry's record among other entries' records, in random order, as many as fit in ``max_chars``."""
    named = FORMS["named values (question: / answer:)"]
    records = [named(question, answer)]
    for other in rng.sample(entries, min(len(entries), 12)):
        record = named(*other)
        if other != (question, answer) and len("\n\n".join([*records, record])) <= max_chars:
            records.append(record)
    rng.shuffle(records)
    return "\n\n".join(records)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--per-set", type=int, default=500)
    parser.add_argument("--bundle", default="default")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    from sklearn.metrics import roc_auc_score

    from grader import load_grader

    grader = load_grader(args.bundle)
    results: dict[str, object] = {"bundle": args.bundle, "per_set": args.per_set, "sets": {}}
    for name, build in (("covid FAQ (consumer health)", covid_faq), ("StackFAQ (tech support)", stack_faq)):
        pairs = sample(build(args.data), args.per_set)
        labels = np.array([p[3] for p in pairs])
        entries = sorted({(fq, a) for _, fq, a, _ in pairs})
        rng = random.Random(7)
        texts = {form: [write(fq, a) for _, fq, a, _ in pairs] for form, write in FORMS.items()}
        texts[PACKED] = [_packed(fq, a, entries, rng) for _, fq, a, _ in pairs]
        by_form = {}
        for form, chunks in texts.items():
            scored = grader.score_pairs([(query, chunk) for (query, *_), chunk in zip(pairs, chunks, strict=True)])
            p = np.array(grader.probabilities(scored.logits))
            by_form[form] = {"auroc": float(roc_auc_score(labels, p)), "mean_p_relevant": float(p[labels == 1].mean()),
                             "mean_p_irrelevant": float(p[labels == 0].mean()),
                             "decided_relevant_share_of_relevant": float((p[labels == 1] >= 0.5).mean())}
        by_form[PACKED]["entries_per_chunk"] = float(np.mean([t.count("\n\nquestion: ") + 1 for t in texts[PACKED]]))
        results["sets"][name] = {"pairs": len(pairs), "relevant": int(labels.sum()), "forms": by_form}  # type: ignore[index]
    emit(results, args.json)


if __name__ == "__main__":
    main()
