"""How should a row of a table inside a document (a page's, a Word file's) read, for the grader?

A document's table is read a row a line. Read alone (the row a chunk or an answer's quote holds), ``EU | 3-5 days``
does not say what 3-5 days is. Four forms of the same rows are graded for questions about one cell each: the
bare row, the header row above it, the row with each cell led by its column's name (``Zone: EU | Delivery time:
3-5 days``, what crag writes below a header row), and ``name: value`` lines (how table files' records read).
Small tables of plans, shipping zones, laptop models and opening hours, written for this check (13 questions,
each with one right row; the negatives are the table's other rows and rows of the other tables). Reports AUROC,
how often the right row is the table's best, and mean probability over right and wrong rows.

Run: python bench/bench_table_rows.py [--bundle default] [--json bench/results_table_rows.json]
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.output import emit  # noqa: E402
from pipeline.retrieval.table_text import record_lines, row_line  # noqa: E402

TABLES = {
    "plans": (["Plan", "Monthly price", "Seats", "Support"],
              [["Free", "0 €", "1", "Community forum"], ["Team", "12 €", "10", "E-mail"],
               ["Business", "30 €", "50", "Phone, 24/7"],
               ["Enterprise", "On request", "Unlimited", "Dedicated manager"]]),
    "shipping": (["Zone", "Delivery time", "Cost"],
                 [["Germany", "1-2 days", "Free"], ["EU", "3-5 days", "4.90 €"], ["UK", "5-7 days", "9.90 €"],
                  ["USA", "7-10 days", "14.90 €"]]),
    "models": (["Model", "Battery life", "Weight", "Screen"],
               [["X1", "10 hours", "1.1 kg", "13 inch"], ["X2", "14 hours", "1.3 kg", "14 inch"],
                ["X3 Pro", "18 hours", "1.6 kg", "16 inch"]]),
    "hours": (["Day", "Opening hours"], [["Monday", "9:00-18:00"], ["Saturday", "10:00-14:00"], ["Sunday", "Closed"]]),
}
QUESTIONS = [
    ("plans", 1, "How much does the Team plan cost per month?"),
    ("plans", 2, "How many seats does the Business plan include?"),
    ("plans", 3, "What support do Enterprise customers get?"),
    ("plans", 0, "Is there a free plan and how many users can it have?"),
    ("shipping", 1, "How long does delivery to the EU take?"),
    ("shipping", 2, "What does shipping to the UK cost?"),
    ("shipping", 3, "How long does shipping to the USA take?"),
    ("shipping", 0, "Is delivery within Germany free?"),
    ("models", 0, "How long does the X1 battery last?"),
    ("models", 2, "How heavy is the X3 Pro?"),
    ("models", 1, "What screen size does the X2 have?"),
    ("hours", 1, "When are you open on Saturday?"),
    ("hours", 2, "Are you open on Sunday?"),
]
Form = Callable[[Sequence[str], Sequence[str]], str]
FORMS: dict[str, Form] = {
    "bare row (EU | 3-5 days)": lambda header, row: " | ".join(row),
    "header row above it": lambda header, row: " | ".join(header) + "\n\n" + " | ".join(row),
    "cells led by column names (crag: row_line)": lambda header, row: row_line(row, header),
    "name: value lines (a table file's record)": lambda header, row: record_lines(zip(header, row, strict=True)),
}


def measure(grader, form: Form) -> dict[str, float]:
    from sklearn.metrics import roc_auc_score

    labels, scores, best = [], [], []
    for table, right, question in QUESTIONS:
        for name, (header, rows) in TABLES.items():
            own = name == table
            probabilities = [g.probability for g in grader.grade(question, [form(header, row) for row in rows])]
            labels += [int(own and i == right) for i in range(len(rows))]
            scores += probabilities
            if own:
                best.append(int(int(np.argmax(probabilities)) == right))
    y, p = np.array(labels), np.array(scores)
    return {"auroc": round(float(roc_auc_score(y, p)), 4),
            "right_row_best_in_its_table": round(float(np.mean(best)), 3),
            "mean_p_right": round(float(p[y == 1].mean()), 3), "mean_p_wrong": round(float(p[y == 0].mean()), 3),
            "pairs": len(y)}


def main() -> None:
    warnings.filterwarnings("ignore")
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bundle", default="default")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    from grader import load_grader

    grader = load_grader(args.bundle)
    emit({"bundle": args.bundle, "questions": len(QUESTIONS),
          "forms": {name: measure(grader, form) for name, form in FORMS.items()}}, args.json)


if __name__ == "__main__":
    main()
