"""Pipeline-side CLI commands: ``crag grade`` and ``crag bench``."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from grader.cascade import CascadeGrader
from grader.factory import load_grader
from grader.llm_args import add_llm_arguments, llm_from_args
from grader.load_rewrites import rewrites_in_use
from grader.policy import decide
from grader.protocol import PolicyGrader
from grader.shift import not_monitored
from models.cli_args import int_at_least
from models.errors import ConfigError, DataError
from models.output import print_json, print_table, print_text
from models.registry import MODEL_OPTION_HELP
from models.types import Chunk

__all__ = ["read_chunks", "register_bench", "register_grade"]


def read_chunks(path: str | Path) -> list[Chunk]:
    """Chunks from JSONL (objects with ``text`` and optional ``chunk_id``/``source``/``metadata``) or text lines."""
    path = Path(path)
    try:
        content = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise DataError(f"{path}: no such file") from exc
    except IsADirectoryError as exc:
        raise DataError(f"{path} is a folder; pass one file of chunks (JSONL or one chunk per line)") from exc
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 ({exc.reason} at byte {exc.start})") from exc
    chunks = []
    for number, line in enumerate(content.splitlines(), start=1):
        if not line.strip():
            continue
        if path.suffix in (".jsonl", ".json", ".ndjson"):
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"{path}:{number}: invalid JSON ({exc.msg})") from exc
            if not isinstance(record, dict) or not isinstance(record.get("text"), str):
                raise DataError(f"{path}:{number}: each line needs an object with a 'text' string")
            given = record.get("chunk_id")  # a number in a file is its id as text, as a line number is
            chunk_id: Any = str(given) if isinstance(given, int) and not isinstance(given, bool) else given
            try:
                chunks.append(Chunk(text=record["text"], chunk_id=chunk_id, source=record.get("source"),
                                    metadata=record.get("metadata") or {}))
            except ConfigError as exc:
                raise DataError(f"{path}:{number}: {exc}") from exc
        else:
            chunks.append(Chunk(text=line, chunk_id=str(number)))
    if not chunks:
        raise DataError(f"{path}: no chunks found")
    return chunks


def _grade(args: argparse.Namespace) -> int:
    chunks = [Chunk(text=t, chunk_id=f"arg{i}") for i, t in enumerate(args.chunk or [], start=1)]
    if args.chunks:
        chunks += read_chunks(args.chunks)
    if not chunks:
        raise ConfigError("no chunks to grade: pass --chunks FILE or --chunk TEXT")
    llm = llm_from_args(args)  # checked before the bundle is loaded
    grader = load_grader(args.model, backend=args.backend, threads=args.threads)
    if llm is not None:  # the small model decides what it is sure of; only its uncertain band reaches the LLM
        if not isinstance(grader, PolicyGrader):
            raise ConfigError(f"--model {args.model} has no thresholds to escalate by; pass a calibrated bundle")
        grader = CascadeGrader(primary=grader, escalate_to=llm)
    grades = grader.grade(args.query, chunks)
    if args.json:
        print_json([{"chunk_id": c.chunk_id, **g.to_dict()} for c, g in zip(chunks, grades, strict=True)])
        return 0
    rows = [
        (c.chunk_id or i, g.verdict.value, f"{g.probability:.3f}", "yes" if g.uncertain else "",
         g.decided_by, "yes" if g.truncated else "", c.text[:60].replace("\n", " "), g.reason or "")
        for i, (c, g) in enumerate(zip(chunks, grades, strict=True), start=1)
    ]
    print_table(f"grades for: {args.query}", ["chunk", "verdict", "P(relevant)", "uncertain", "by", "truncated",
                                             "text", "why"], rows)
    escalated = sum(g.decided_by == "llm" for g in grades)
    failed = sum(g.escalation_failed for g in grades)
    print_text(f"decision: {decide(grades).value}" + (f" ({escalated} chunk(s) decided by the LLM, {failed} it "
                                                        "could not judge)" if llm is not None else ""))
    return 0


def register_grade(sub: argparse._SubParsersAction) -> None:
    """``crag grade``: grade chunks for one query."""
    p = sub.add_parser("grade", help="grade chunks for a query with a grader bundle")
    p.add_argument("--model", default="default", help=MODEL_OPTION_HELP)
    p.add_argument("--query", required=True)
    p.add_argument("--chunks", help="JSONL with a 'text' field per line, or a text file with one chunk per line")
    p.add_argument("--chunk", action="append", help="a chunk given inline (repeatable)")
    p.add_argument("--backend", default="onnx", choices=["onnx", "torch", "auto"])
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    add_llm_arguments(p)
    p.set_defaults(handler=_grade)


def _bench(args: argparse.Namespace) -> int:
    grader = load_grader(args.model, backend=args.backend, threads=args.threads)
    words = [
        "the", "grader", "reads", "a", "query", "and", "a", "retrieved", "passage", "and", "returns", "a",
        "calibrated", "probability", "that", "the", "passage", "answers", "the", "question"
    ]
    text = " ".join(words[i % len(words)] for i in range(args.tokens))

    def request(round_: int) -> tuple[str, list[str]]:
        """New texts every round, so that no grade and no embedding comes from a cache (what a stream of
        unseen chunks costs; the same chunks asked again cost almost nothing)."""
        return (f"what does the grader return for a passage? (round {round_})",
                [f"{text} (chunk {i}, round {round_})" for i in range(args.chunks)])

    times = []
    with not_monitored():  # synthetic text is not the data the bundle's shift monitor watches for
        grader.grade(*request(-1))  # warm-up: sessions, tokenizer
        for r in range(args.repeats):
            query, chunks = request(r)
            t0 = time.perf_counter()
            grader.grade(query, chunks)
            times.append(1000.0 * (time.perf_counter() - t0))
    result = {"model": args.model, "backend": args.backend, "threads": args.threads, "chunks": args.chunks,
              "words_per_chunk": args.tokens, "caches": "not used: new texts every repeat",
              "onnx_rewrites": rewrites_in_use().describe() if args.backend != "torch" else None,
              "p50_ms": float(np.percentile(times, 50)), "p95_ms": float(np.percentile(times, 95)),
              "per_chunk_ms": float(np.percentile(times, 50)) / args.chunks}
    print_json(result)
    return 0


def register_bench(sub: argparse._SubParsersAction) -> None:
    """``crag bench``: quick latency check of a bundle (the full comparison lives in bench/)."""
    p = sub.add_parser("bench", help="measure grading latency of a bundle on this machine")
    p.add_argument("--model", default="default", help=MODEL_OPTION_HELP)
    p.add_argument("--backend", default="onnx", choices=["onnx", "torch", "auto"])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--chunks", type=int_at_least(1), default=20)
    p.add_argument("--tokens", type=int_at_least(1), default=200, help="words per synthetic chunk")
    p.add_argument("--repeats", type=int_at_least(1), default=20)
    p.set_defaults(handler=_bench)
