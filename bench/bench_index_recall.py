"""Retrieval quality of the local index: recall@k and MRR@k of the gold paragraph on SQuAD 1.1 questions.

Every paragraph of the SQuAD 1.1 train articles is a document of one tenant; a sample of questions is
asked, and a hit is the question's own paragraph in the top k. The real embedder (the shipped
all-MiniLM-L6-v2 ONNX bundle) is used; its vectors are cached in ``--cache`` so that two index
implementations are compared on identical vectors. Works against any tree whose ``LocalHybridIndex`` has
``add`` and ``search``: run it once as is and once with PYTHONPATH set to an older checkout.

Run: python bench/bench_index_recall.py --squad ../shared/data/squad1/train-v1.1.json \
         --cache /tmp/squad_vectors.npz [--questions 2000] [--json bench/results_index_recall.json]

``--story-words MIN MAX`` makes every question a long message: MIN-MAX words of other articles' paragraphs (seeded,
ended with a period) told before it, after it, or after it and followed by a closing question of no content such
as "Can anyone help?" (``--form``), and searches each one seven ways on the same index, interleaved: the message
embedded as it is (the first 254 tokens) and by its two ends (what the index does since 2026-12-07), the corrective
loop's keyword rewrite of it, made of the whole message's words (before 2026-12-07) or of its question's (since),
the loop's first search (``first_search``: the question as written, with the identifiers told around it; the
whole message until 2026-12-07), the question alone (nothing told around it: the ceiling), and the first search
and the whole message's with their hits taken in turn (tried, not adopted).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path and not os.environ.get("PYTHONPATH"):
    sys.path.insert(0, str(ROOT))


def interleaved_hits(ranked_lists, k):
    """The first ``k`` distinct chunks of several searches' hits taken in turn (tried for the first search of a long
    message: its question and the message as written; lower recall than the question alone, so not adopted)."""
    out = {}
    for rank in range(max((len(r) for r in ranked_lists), default=0)):
        for ranked in ranked_lists:
            if rank < len(ranked) and len(out) < k:
                out.setdefault(ranked[rank].chunk_id, ranked[rank])
    return list(out.values())


CLOSINGS = ("Can anyone help?", "Any ideas?", "Is that right?", "What am I missing?", "Does anyone know?",
            "Could you help me with this?")


class CachedEmbedder:
    """The real embedder, memoised by text in an .npz file shared between runs."""

    name = "all-MiniLM-L6-v2"

    def __init__(self, cache: Path) -> None:
        self.cache = cache
        self.fit_queries = True
        self.vectors: dict[str, np.ndarray] = {}
        if cache.is_file():
            data = np.load(cache, allow_pickle=False)
            self.vectors = dict(zip(data["texts"].tolist(), data["vectors"], strict=True))
        self._model = None

    def fit_query(self, query):
        """As crag's embedder fits a long query (by its two ends), or the query as it is when ``fit_queries`` is off."""
        if not self.fit_queries:
            return query, False
        return self._real().fit_query(query)

    def _real(self):
        if self._model is None:
            from pipeline.retrieval.embedding import default_embedder

            self._model = default_embedder()
        return self._model

    def embed(self, texts):
        missing = [t for t in dict.fromkeys(texts) if t not in self.vectors]
        if missing:
            for start in range(0, len(missing), 256):
                batch = missing[start:start + 256]
                self.vectors.update(zip(batch, self._real().embed(batch), strict=True))
        return np.stack([self.vectors[t] for t in texts])

    def save(self) -> None:
        texts = list(self.vectors)
        np.savez(self.cache, texts=np.array(texts), vectors=np.stack([self.vectors[t] for t in texts]))


def load_squad(path: Path, questions: int, seed: int):
    from pipeline.retrieval.documents import StoredChunk

    data = json.loads(path.read_text(encoding="utf-8"))["data"]
    chunks, asked = [], []
    for a, article in enumerate(data):
        for p, paragraph in enumerate(article["paragraphs"]):
            cid = f"a{a}p{p}"
            chunks.append(StoredChunk(chunk_id=cid, text=paragraph["context"], tenant="squad",
                                      source=f"{article['title']}.md", title=article["title"].replace("_", " "),
                                      position=p))
            asked += [(qa["question"], cid) for qa in paragraph["qas"]]
    random.Random(seed).shuffle(asked)
    return chunks, asked[:questions]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--squad", required=True, help="SQuAD 1.1 train JSON")
    parser.add_argument("--cache", required=True, help=".npz of cached vectors (created if missing)")
    parser.add_argument("--questions", type=int, default=2000)
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--story-words", type=int, nargs=2, metavar=("MIN", "MAX"),
                        help="make each question a long message: this many words of other paragraphs before it")
    parser.add_argument("--form", choices=["before", "after", "after_closing"], default="before",
                        help="with --story-words: the words told before the question, after it, or after it "
                             "and followed by a closing question of no content ('Can anyone help?')")
    args = parser.parse_args()
    from pipeline.retrieval.documents import Principal
    from pipeline.retrieval.index import LocalHybridIndex

    chunks, asked = load_squad(Path(args.squad), args.questions, args.seed)
    if args.story_words:
        return _long_questions(args, chunks, asked)
    embedder = CachedEmbedder(Path(args.cache))
    embedder.embed([c.text for c in chunks] + [q for q, _ in asked])
    embedder.save()
    principal = Principal(tenant="squad")
    with tempfile.TemporaryDirectory() as tmp:
        index = LocalHybridIndex(Path(tmp) / "idx", embedder=embedder)
        start = time.perf_counter()
        index.add(chunks)
        build_s = time.perf_counter() - start
        hits, reciprocal, ms = 0, 0.0, []
        for question, gold in asked:
            t0 = time.perf_counter()
            ranked = [c.chunk_id for c, _ in index.search(question, principal, k=args.k)]
            ms.append((time.perf_counter() - t0) * 1000)
            if gold in ranked:
                hits += 1
                reciprocal += 1.0 / (ranked.index(gold) + 1)
    result = {"index_module": sys.modules["pipeline.retrieval.index"].__file__, "paragraphs": len(chunks),
              "questions": len(asked), "k": args.k, f"recall_at_{args.k}": round(hits / len(asked), 4),
              f"mrr_at_{args.k}": round(reciprocal / len(asked), 4), "build_s": round(build_s, 1),
              "search_ms_p50": round(float(np.median(ms)), 1)}
    print(json.dumps(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


def _long_questions(args, chunks, asked) -> None:
    from pipeline.retrieval.documents import Principal
    from pipeline.retrieval.index import LocalHybridIndex

    rng = random.Random(args.seed)
    article_of = {c.chunk_id: c.chunk_id.split("p")[0] for c in chunks}
    long_asked = []
    for question, gold in asked:
        story: list[str] = []
        words = rng.randint(*args.story_words)
        while len(story) < words:
            other = rng.choice(chunks)
            if article_of[other.chunk_id] != article_of[gold]:
                story += other.text.split()[:60]
        told = " ".join(story[:words]).rstrip(".,;:") + "."  # cut at a word, ended as a writer ends a sentence
        closing = rng.choice(CLOSINGS)
        long_asked.append(({"before": f"{told} {question}", "after": f"{question} {told}",
                            "after_closing": f"{question} {told} {closing}"}[args.form], gold))
    embedder = CachedEmbedder(Path(args.cache))
    embedder.embed([c.text for c in chunks])
    embedder.save()
    principal = Principal(tenant="squad")
    from pipeline.corrective.context_quality import question_of
    from pipeline.corrective.correction import first_search, rewrite_query
    from pipeline.retrieval.words import content_words

    def rewrite_whole(message: str) -> str:  # the loop's keyword rewrite before 2026-12-07: every word of the message
        return " ".join(dict.fromkeys(w for w in content_words(message.replace(",", " ").split()) if len(w) > 2))

    ways = {"as_is": lambda q: q, "two_ends": lambda q: q, "rewrite_whole_message": rewrite_whole,
            "rewrite_its_question": rewrite_query, "first_search": first_search, "question_alone": question_of,
            "first_search_and_message": None}
    found = {way: [0, 0.0] for way in ways}
    with tempfile.TemporaryDirectory() as tmp:
        index = LocalHybridIndex(Path(tmp) / "idx", embedder=embedder)
        index.add(chunks)
        for question, gold in long_asked:
            for way, searched in ways.items():  # interleaved, same index
                embedder.fit_queries = way != "as_is"
                if searched is None:  # both searches, their hits taken in turn (what the loop's first round does)
                    ranked = [c.chunk_id for c in interleaved_hits(
                        [[c for c, _ in index.search(q, principal, k=args.k)] for q in (first_search(question),
                                                                                         question)], args.k)]
                else:
                    ranked = [c.chunk_id for c, _ in index.search(searched(question), principal, k=args.k)]
                if gold in ranked:
                    found[way][0] += 1
                    found[way][1] += 1.0 / (ranked.index(gold) + 1)
    result = {"paragraphs": len(chunks), "questions": len(long_asked), "k": args.k,
              "story_words": args.story_words, "form": args.form,
              **{f"{way}_recall_at_{args.k}": round(hits / len(long_asked), 4) for way, (hits, _) in found.items()},
              **{f"{way}_mrr_at_{args.k}": round(rr / len(long_asked), 4) for way, (_, rr) in found.items()}}
    print(json.dumps(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
