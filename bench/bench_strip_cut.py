"""How short can a grader-only answer be before it loses the answer? ``strip_relative_floor`` measured.

Two measurements, one run, the shipped default grader:
- SQuAD 2.0 dev (answerable questions; ``--data``): the chunks are the question's own paragraph and three
  other paragraphs of its article, shuffled; refinement keeps strips as the corrective loop does (token
  budget 120); for each floor, whether a gold answer string is in the kept strips and how many words they
  have.
- The demo golden set through ``CorrectiveRAG`` (grader-only), per floor: gold answer in the answer,
  outcomes, mean answer length.

    python bench/bench_strip_cut.py --data ../shared/data/squad2/dev-v2.0.json --questions 400 \
        --json bench/results_strip_cut.json
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from grader import load_grader
from pipeline.cli.ask_commands import DEMO_DIR, DEMO_TENANT, demo_index, read_golden
from pipeline.corrective.assembly import PipelineSettings, build_rag
from pipeline.corrective.correction import refine
from pipeline.corrective.state import RAGConfig
from pipeline.retrieval.documents import Principal, StoredChunk
from pipeline.retrieval.index import LocalHybridIndex

FLOORS = (0.0, 0.3, 0.5, 0.7)


def squad_items(path: Path, count: int, seed: int) -> list[tuple[list[str], int, str, list[str]]]:
    """(paragraphs of the article, index of the question's paragraph, question, gold answers)."""
    items = []
    for article in json.loads(path.read_text(encoding="utf-8"))["data"]:
        paragraphs = [p["context"] for p in article["paragraphs"]]
        for index, paragraph in enumerate(article["paragraphs"]):
            for qa in paragraph["qas"]:
                if not qa.get("is_impossible") and qa["answers"]:
                    items.append((paragraphs, index, qa["question"], [a["text"] for a in qa["answers"]]))
    random.Random(seed).shuffle(items)
    return items[:count]


def squad(path: Path, count: int, seed: int) -> dict[str, dict[str, float]]:
    grader, rng = load_grader("default"), random.Random(seed)
    totals = {floor: [0, 0] for floor in FLOORS}
    items = squad_items(path, count, seed)
    for paragraphs, own, question, answers in items:
        others = [i for i in range(len(paragraphs)) if i != own]
        chosen = [own, *rng.sample(others, min(3, len(others)))]
        rng.shuffle(chosen)
        chunks = [StoredChunk(chunk_id=str(i), text=paragraphs[i], tenant="t", source="squad") for i in chosen]
        strips = refine(question, chunks, grader, token_budget=RAGConfig().strip_token_budget)
        best = max((s.grade.probability for s in strips if not s.grade.withheld), default=0.0)
        for floor in FLOORS:
            text = " ".join(s.text for s in strips if s.grade.probability >= floor * best).lower()
            totals[floor][0] += any(a.lower() in text for a in answers)
            totals[floor][1] += len(text.split())
    return {str(floor): {"gold_in_answer": hits / len(items), "mean_words": words / len(items)}
            for floor, (hits, words) in totals.items()}


def demo() -> dict[str, dict[str, float]]:
    index, golden, out = LocalHybridIndex.open_existing(demo_index()), read_golden(DEMO_DIR / "golden.jsonl"), {}
    for floor in FLOORS:
        rag = build_rag(index, PipelineSettings(rag=RAGConfig(strip_relative_floor=floor)))
        hits = answered = words = 0
        outcomes = []
        for item in golden:
            result = rag.run(item["query"], Principal(tenant=DEMO_TENANT))
            outcomes.append(result.outcome.value)
            if item["must_abstain"] or not result.answer:
                continue
            answered += 1
            hits += any(a.lower() in result.answer.lower() for a in item.get("answers", []))
            words += len(result.answer.split())
        out[str(floor)] = {"gold_in_answer": hits / answered, "answered": answered, "mean_words": words / answered,
                           "outcomes": outcomes}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="SQuAD 2.0 dev JSON")
    parser.add_argument("--questions", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # the demo's shift warning is not this benchmark's subject
    result = {"squad2_dev": squad(args.data, args.questions, args.seed), "demo_golden": demo(),
              "command": " ".join(sys.argv)}
    demo_same = len({json.dumps(v["outcomes"]) for v in result["demo_golden"].values()}) == 1
    result["demo_outcomes_identical_across_floors"] = demo_same
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
