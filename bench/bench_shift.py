"""The shift alarm on real data: silent on the calibration domain, quick on a real domain change.

Streams are retrieval results: each query's chunks in pieces of ``--per-query`` (10), a query's piece
together. For each calibration domain (a real set), a reference is made from the default grader's scores of
``--reference-pairs`` pairs from half of its queries, exactly what `crag calibrate` stores. Then, with the
grader's own monitor settings (window 200, a check every 50 chunks, alpha 1e-4):
- false alarms: ``--stream`` chunks of the *other* half of the domain's queries are streamed and every
  check that fires is counted (the monitor is restarted after each alarm, so every check counts);
- detection: ``--orders`` times, 1,000 chunks of the calibration domain then the chunks of another real
  domain, in a random query order; the delay is the number of new-domain chunks graded when the alarm fires.

The grader's own monitor compares scores censored at its lower threshold's score (the corrective loop does not
score the chunks it settles below it on the cosine; :func:`grader.shift.ks_two_sample`): ``--censored`` adds that
test, with the design effect, beside the two others.

Run: python bench/bench_shift.py [--data-dir ../shared/data] [--censored] [--json bench/results_shift.json]
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections import OrderedDict
from pathlib import Path

import numpy as np

from grader import load_grader
from grader.shift import DEFAULT_ALPHA, DEFAULT_WINDOW, ShiftMonitor, make_reference

DOMAINS = {  # name: JSONL files of (query, text[, query_id]); labels are not needed to detect a shift
    "tech FAQ (StackFAQ)": ["stackfaq/pairs.jsonl"],
    "web passages (TREC DL)": ["trec_dl/dl2020.jsonl", "trec_dl/dl2021.jsonl", "trec_dl/dl2020_unjudged.jsonl",
                               "trec_dl/dl2021_unjudged.jsonl"],
    "consumer health (COVID FAQ)": ["covidfaq/pairs.jsonl"],
    "biomedical (PubMedQA)": ["pubmedqa/pairs.jsonl"],
    "web, LLM-judged (NovelEval)": ["noveleval/pairs.jsonl"],
}
CALIBRATION_DOMAINS = ("tech FAQ (StackFAQ)", "web passages (TREC DL)")
WARM_CHUNKS = 1000


Piece = list[tuple[str, str]]


def query_pieces(data_dir: Path, files: list[str], per_query: int, seed: int) -> tuple[list[Piece], list[Piece]]:
    """Retrieval results: each query's chunks cut into pieces of ``per_query`` (as a retriever returns its
    top k), for two disjoint halves of the queries (reference, stream), each in a seeded random order."""
    rng = random.Random(seed)
    groups: OrderedDict[str, Piece] = OrderedDict()
    for name in files:
        with (data_dir / name).open(encoding="utf-8") as handle:
            for line in handle:
                record = json.loads(line)
                groups.setdefault(record["query"], []).append((record["query"], record["text"]))
    queries = list(groups)
    rng.shuffle(queries)
    halves = []
    for half in (queries[: len(queries) // 2], queries[len(queries) // 2:]):
        pieces = []
        for query in half:
            chunks = rng.sample(groups[query], len(groups[query]))
            pieces += [chunks[i:i + per_query] for i in range(0, len(chunks), per_query)]
        rng.shuffle(pieces)
        halves.append(pieces)
    return halves[0], halves[1]


def take(groups: list, chunks: int) -> tuple[list, list]:
    """Whole query groups up to ``chunks`` pairs, and the groups left."""
    taken, count = [], 0
    for i, group in enumerate(groups):
        if count >= chunks:
            return taken, groups[i:]
        taken.append(group)
        count += len(group)
    return taken, []


class Scorer:
    """Logits of the default grader, remembered per pair (a pair is scored once however often streamed)."""

    def __init__(self) -> None:
        self.grader = load_grader("default")
        self.memo: dict[tuple[str, str], float] = {}

    def logits(self, group: list[tuple[str, str]]) -> np.ndarray:
        fresh = [p for p in group if p not in self.memo]
        if fresh:
            for pair, logit in zip(fresh, self.grader.score_pairs(fresh).logits, strict=True):
                self.memo[pair] = float(logit)
        return np.array([self.memo[p] for p in group])


def false_alarms(scorer: Scorer, reference: dict, stream: list, floor: float | None = None) -> dict:
    monitor, checks, alarms = ShiftMonitor(reference, floor=floor), 0, 0
    streamed = 0
    for group in stream:
        before = monitor.status().checks
        status = monitor.observe(scorer.logits(group), [len(t) for _, t in group])
        streamed += len(group)
        checks += status.checks - before
        if status.shifted:
            alarms += 1
            monitor = ShiftMonitor(reference, floor=floor)
    return {"chunks": streamed, "checks": checks, "false_alarms": alarms,
            "false_alarm_rate_per_check": round(alarms / checks, 5) if checks else None}


def detection(scorer: Scorer, reference: dict, warm: list, other: list, orders: int, seed: int,
              floor: float | None = None) -> dict:
    delays, missed, early = [], 0, 0
    for k in range(orders):
        rng = random.Random(seed + k)
        monitor = ShiftMonitor(reference, floor=floor)
        warm_groups = rng.sample(warm, len(warm))
        fired_early = False
        for group in take(warm_groups, WARM_CHUNKS)[0]:
            fired_early |= monitor.observe(scorer.logits(group), [len(t) for _, t in group]).shifted
        if fired_early:  # a false alarm before the change: counted, not a detection
            early += 1
            continue
        new, graded = rng.sample(other, len(other)), 0
        for group in new:
            status = monitor.observe(scorer.logits(group), [len(t) for _, t in group])
            graded += len(group)
            if status.shifted:
                delays.append(graded)
                break
        else:
            missed += 1
    return {"orders": orders, "false_alarm_before_change": early, "fired": len(delays), "missed": missed,
            "within_200": sum(d <= 200 for d in delays),
            "delay_median": float(np.median(delays)) if delays else None,
            "delay_max": max(delays) if delays else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default="../shared/data")
    parser.add_argument("--reference-pairs", type=int, default=2000)
    parser.add_argument("--stream", type=int, default=10_000)
    parser.add_argument("--orders", type=int, default=20)
    parser.add_argument("--other-chunks", type=int, default=1500, help="chunks of each other domain available")
    parser.add_argument("--per-query", type=int, default=10, help="chunks retrieved per query")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--censored", action="store_true",
                        help="also test censored at the default grader's lower threshold, as its own monitor does "
                             "since 2026-12-08 (chunks the corrective loop settles on the cosine are not scored)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    data_dir, started = Path(args.data_dir), time.perf_counter()
    scorer = Scorer()
    halves = {name: query_pieces(data_dir, files, args.per_query, args.seed) for name, files in DOMAINS.items()}
    report: dict = {"window": DEFAULT_WINDOW, "alpha": DEFAULT_ALPHA, "reference_pairs": args.reference_pairs,
                    "calibration_domains": {}}
    for home in CALIBRATION_DOMAINS:
        ref_pieces = take(halves[home][0], args.reference_pairs)[0]
        pairs = [p for piece in ref_pieces for p in piece]
        logits = np.concatenate([scorer.logits(g) for g in ref_pieces])
        lengths, queries = [len(t) for _, t in pairs], [q for q, _ in pairs]
        stream = take(halves[home][1], args.stream)[0]
        row = {"reference": {"pairs": len(pairs), "queries": len(set(queries))}}
        with_design = make_reference(logits, lengths, queries)
        tests = [("plain KS", make_reference(logits, lengths), None), ("KS with design effect", with_design, None),
                 ("KS with design effect, censored at the lower threshold", with_design, scorer.grader.settle_floor)]
        for test, reference, floor in tests if args.censored else tests[:2]:
            result = {"design_effect": reference.get("design_effect"), "floor": floor,
                      "same_domain": false_alarms(scorer, reference, stream, floor), "changes": {}}
            for other, (first, second) in halves.items():
                if other != home:
                    result["changes"][other] = detection(scorer, reference, stream,
                                                         take(first + second, args.other_chunks)[0], args.orders,
                                                         args.seed, floor)
            row[test] = result
        report["calibration_domains"][home] = row
        print(json.dumps({home: row}), flush=True)
    report["seconds"] = round(time.perf_counter() - started, 1)
    print(json.dumps(report, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
