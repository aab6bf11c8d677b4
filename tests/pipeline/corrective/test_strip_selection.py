"""Refinement reads strips in the order of their bounds and stops when the rest cannot be kept: same choice."""

import json
from dataclasses import replace

import pytest

from grader import load_grader
from pipeline.corrective.correction import refine
from tests.pipeline.conftest import make_chunk


@pytest.fixture(scope="module")
def graders():
    bounded = load_grader("default", threads=1, cache_pairs=0)  # every read counted
    unbounded = load_grader("default", threads=1, cache_pairs=0)
    unbounded.fusion = replace(unbounded.fusion, ce_range=None)  # no bound: every strip read, as before
    return bounded, unbounded


def _questions(squad_pairs_file, count=6):
    rows = [json.loads(line) for line in squad_pairs_file.read_text(encoding="utf-8").splitlines()]
    by_query: dict[str, list[str]] = {}
    for row in rows:
        by_query.setdefault(row["query"], []).append(row["text"])
    return list(by_query.items())[:count]


@pytest.mark.parametrize(("budget", "relative_floor"), [(12, 0.0), (40, 0.0), (120, 0.0), (120, 0.5), (400, 0.0)])
def test_the_strips_kept_are_those_that_reading_every_strip_keeps(graders, squad_pairs_file, budget, relative_floor):
    bounded, unbounded = graders
    read = every = 0
    for query, texts in _questions(squad_pairs_file):
        chunks = [make_chunk(f"c{i}", text) for i, text in enumerate(texts)]
        before, before_all = bounded.pairs_scored, unbounded.pairs_scored
        got = refine(query, chunks, bounded, token_budget=budget, relative_floor=relative_floor)
        want = refine(query, chunks, unbounded, token_budget=budget, relative_floor=relative_floor)
        assert [(s.chunk_id, s.order, s.text, s.grade.probability, s.completes) for s in got] == \
            [(s.chunk_id, s.order, s.text, s.grade.probability, s.completes) for s in want]
        read += bounded.pairs_scored - before
        every += unbounded.pairs_scored - before_all
    if budget <= 40:
        assert read < every / 2  # a small budget is filled by the first strips read


class _Counting:
    """A grader of your own without bounds: every strip is read, in one call."""

    def __init__(self, inner):
        self.inner, self.calls = inner, []

    def grade(self, query, chunks):
        self.calls.append(len(chunks))
        return self.inner.grade(query, chunks)


def test_a_grader_without_bounds_reads_every_strip_at_once(graders):
    bounded, _ = graders
    chunk = make_chunk("ship", "Orders ship within 2 business days. International shipping to the US takes 5-7 "
                       "business days. Our office dog is called Rex.")
    counting = _Counting(bounded)
    strips = refine("How long does international shipping take?", [chunk], counting, token_budget=10)
    assert counting.calls == [3] and len(strips) == 1 and "5-7" in strips[0].text
