"""What the three integration examples share: the demo corpus and golden questions, the grader (with an LLM
for the uncertain band when one is configured), and the count of LLM grading calls against the tutorials'
one call per retrieved chunk."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from grader import load_grader  # noqa: E402
from grader.cascade import CascadeGrader  # noqa: E402
from grader.llm_args import add_llm_arguments, llm_from_args  # noqa: E402
from pipeline.cli.ask_commands import DEMO_DIR, DEMO_TENANT, demo_index, read_golden  # noqa: E402
from pipeline.retrieval.documents import Principal  # noqa: E402
from pipeline.retrieval.index import LocalHybridIndex  # noqa: E402


def arguments(description: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--k", type=int, default=4, help="chunks retrieved per question (the tutorials use 4)")
    parser.add_argument("--json", help="write the counts here")
    add_llm_arguments(parser)
    return parser.parse_args()


@dataclass
class Demo:
    """The demo index, its golden questions and the grader; ``retrieve`` gives (id, text, source) triples."""

    args: argparse.Namespace
    index: LocalHybridIndex = field(init=False)
    questions: list[str] = field(init=False)
    grader: CascadeGrader = field(init=False)

    def __post_init__(self) -> None:
        self.index = LocalHybridIndex.open_existing(demo_index())
        self.questions = [item["query"] for item in read_golden(DEMO_DIR / "golden.jsonl")]
        self.llm = llm_from_args(self.args)
        self.grader = CascadeGrader(primary=load_grader("default"), escalate_to=self.llm)

    def retrieve(self, question: str) -> list[tuple[str, str, str]]:
        hits = self.index.search(question, Principal(tenant=DEMO_TENANT), k=self.args.k)
        return [(c.chunk_id, c.text, c.source) for c, _ in hits]

    def report(self, framework: str, chunks: int, escalated: int, decisions: dict[str, int]) -> dict:
        """LLM grading calls made (or, without an LLM, the chunks that would have gone to one) against the
        tutorial's one call per chunk."""
        calls = self.llm.stats.calls if self.llm is not None else escalated
        out = {"framework": framework, "questions": len(self.questions), "chunks_graded": chunks,
               "tutorial_llm_grading_calls": chunks, "llm_grading_calls": calls,
               "saved_share": round(1 - calls / chunks, 3) if chunks else None,
               "llm": self.llm.model if self.llm is not None else None, "decisions": decisions}
        print(json.dumps(out, indent=2))
        if self.args.json:
            Path(self.args.json).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
        return out
