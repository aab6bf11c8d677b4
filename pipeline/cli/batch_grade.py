"""Offline batch grading that streams: pairs are read, scored and written block by block.

Memory stays flat however large the file is: only one block of pairs (``block`` lines) is held at a
time, and output is flushed as it goes. Input is JSONL with ``query`` and ``text`` (``id`` optional);
output is JSONL with the id (or line number), probability, verdict and whether it is uncertain.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from grader.cross_encoder import CrossEncoderGrader
from grader.factory import load_cross_encoder
from models.cli_args import int_at_least
from models.columns import missing_fields_hint, parse_columns, renamed
from models.errors import ConfigError, DataError
from models.output import check_output_path, print_json
from models.registry import MODEL_OPTION_HELP
from pipeline.cli.csv_pairs import is_delimited, iter_csv_rows
from pipeline.cli.jsonl import iter_json_lines
from pipeline.cli.parquet_pairs import KEPT_COLUMNS, is_parquet, iter_parquet_rows, open_graded_output

__all__ = ["PAIR_FIELDS", "grade_stream", "graded_lines", "kept_fields", "pair_problem", "register_grade_file",
           "warn_if_empty"]

logger = logging.getLogger(__name__)
MAX_LINE_CHARS = 1_000_000
PAIR_FIELDS = ("query", "text", *KEPT_COLUMNS)  # what --columns may map


def pair_problem(record: Any, columns: dict[str, str] | None = None) -> str | None:
    """What is wrong with a pair record already in our field names (None when nothing); ``columns`` is the
    mapping it went through, for the hint."""
    if not isinstance(record, dict):
        return "each line needs a non-empty string 'query' and a string 'text'"
    if not isinstance(record.get("query"), str) or not isinstance(record.get("text"), str) \
            or not record["query"].strip():
        hint = missing_fields_hint(record, columns) if "query" not in record or "text" not in record else ""
        return "each line needs a non-empty string 'query' and a string 'text'" + hint
    return None


def kept_fields(number: int, record: dict[str, Any]) -> dict[str, Any]:
    """What an output line carries over from its input line ('id' defaults to the line number)."""
    return {"id": number, **{k: record[k] for k in KEPT_COLUMNS if k in record}}


def graded_lines(grader: CrossEncoderGrader, pairs: list[tuple[str, str]],
                 kept: list[dict[str, Any]]) -> list[tuple[str, bool]]:
    """The output line of each graded pair and whether it is uncertain (the local and the Ray path write
    exactly these lines). Pairs that ``grade`` decides by rule (query echoes, wordless chunks) get its verdict,
    irrelevant at probability 0, without the model."""
    graded = grader.scores_as_graded(pairs)
    probs, truncated_flags = graded.probabilities, graded.truncated
    out = []
    for fields, p, truncated, windows, withheld in zip(kept, probs, truncated_flags, graded.windows, graded.withheld,
                                                      strict=True):
        verdict, band = grader.policy.verdict(float(p), withheld=bool(withheld))
        out.append((json.dumps({**fields, "probability": round(float(p), 6), "verdict": verdict.value,
                                "uncertain": band, "truncated": bool(truncated), "windows": int(windows)}), band))
    return out


def _pairs(path: Path, skipped: list[tuple[int, str]] | None, max_line_chars: int,
           columns: dict[str, str] | None = None) -> Iterator[tuple[int, str, str, dict[str, Any]]]:
    def problem(record: Any) -> str | None:
        return pair_problem(renamed(record, columns), columns)

    rows: Iterator[tuple[int, Any]]
    if is_parquet(str(path)):
        rows = iter_parquet_rows(str(path), errors=skipped, check=problem)
    elif is_delimited(str(path)):
        rows = iter_csv_rows(path, max_line_chars=max_line_chars, errors=skipped, check=problem)
    else:
        rows = iter_json_lines(path, what="pair file", max_line_chars=max_line_chars, errors=skipped, check=problem)
    for number, raw in rows:
        record = renamed(raw, columns)
        yield number, record["query"], record["text"], kept_fields(number, record)


def warn_if_empty(source: object, graded: int, skipped: list[Any] | None) -> None:
    """Say when a pair file gave nothing to grade (the wrong file, or an export that wrote nothing), rather than
    report a silent success with ``pairs: 0``."""
    if not graded and not skipped:
        logger.warning("%s holds no pairs: nothing was graded", source)


def grade_stream(grader: CrossEncoderGrader, source: Path, out: IO[str], *, block: int = 256,
                 skip_errors: bool = False, max_line_chars: int = MAX_LINE_CHARS,
                 columns: dict[str, str] | None = None) -> dict[str, Any]:
    """Grade every pair of ``source`` into ``out``; returns counts and timing. A bad line stops the run after
    the pairs read before it are graded and written (or, with ``skip_errors``, is reported and skipped).
    ``columns`` maps our field names to the file's."""
    if block < 1:
        raise ConfigError(f"block must be >= 1, got {block}")
    started, count, uncertain = time.perf_counter(), 0, 0
    pending: list[tuple[int, str, str, dict[str, Any]]] = []
    skipped: list[tuple[int, str]] | None = [] if skip_errors else None

    def flush() -> None:
        nonlocal count, uncertain
        for line, band in graded_lines(grader, [(q, t) for _, q, t, _ in pending], [kept for *_, kept in pending]):
            uncertain += band
            out.write(line + "\n")
        out.flush()
        count += len(pending)
        pending.clear()

    try:
        for item in _pairs(source, skipped, max_line_chars, columns):
            pending.append(item)
            if len(pending) >= block:
                flush()
    except DataError:
        if pending:
            flush()  # every pair read before the bad line is graded and kept
        raise
    if pending:
        flush()
    warn_if_empty(source, count, skipped)
    seconds = time.perf_counter() - started
    summary: dict[str, Any] = {"pairs": count, "uncertain": uncertain, "seconds": round(seconds, 3),
                               "pairs_per_second": round(count / seconds, 1) if seconds else None}
    if skipped is not None:
        summary["skipped"] = len(skipped)
        summary["skipped_lines"] = [{"line": n, "reason": why} for n, why in skipped[:50]]
    return summary


def _grade_file(args: argparse.Namespace) -> int:
    columns = parse_columns(args.columns, PAIR_FIELDS)
    if "://" not in args.pairs and not Path(args.pairs).exists():  # before any output file is opened
        raise DataError(f"{args.pairs}: no such file or folder of pairs")
    if args.out != "-":
        check_output_path(args.out, args.pairs)
    if args.ray is not None:
        if is_delimited(args.pairs):
            raise ConfigError(f"{args.pairs}: --ray reads JSONL or Parquet; grade a CSV or TSV file without --ray, "
                              "or convert it first")
        from pipeline.cli.ray_grading import grade_with_ray  # Ray is imported only on this path

        if args.batch_size and args.batch_size > 1:
            raise ConfigError("--batch-size is not used with --ray: pairs are graded one per call there")
        print_json(grade_with_ray(args.pairs, args.out, address=None if args.ray == "local" else args.ray,
                                  model=args.model, actors=args.ray_actors, threads=args.threads or 1,
                                  block=args.block, skip_errors=args.skip_errors, max_line_chars=args.max_line_chars,
                                  columns=columns))
        return 0
    options = {"batch_size": args.batch_size} if args.batch_size else {}
    grader = load_cross_encoder(args.model, threads=args.threads, **options)
    options = {"block": args.block, "skip_errors": args.skip_errors, "max_line_chars": args.max_line_chars,
               "columns": columns}
    if args.out == "-":  # pairs on stdout, the summary on stderr
        summary = grade_stream(grader, Path(args.pairs), sys.stdout, **options)
        sys.stderr.write(json.dumps(summary) + "\n")
        return 0
    handle, publish = open_graded_output(args.out)
    try:
        with handle:
            summary = grade_stream(grader, Path(args.pairs), handle, **options)
    except DataError as exc:  # never a truncated output under the final name; the graded part is kept
        raise DataError(f"{exc}. The pairs graded before it are in {args.out}.partial; fix the line or pass "
                        "--skip-errors") from exc
    publish()
    print_json(summary)
    return 0


def register_grade_file(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("grade-file", help="grade a large JSONL, CSV or Parquet file of (query, text) pairs with "
                                                  "bounded memory")
    p.add_argument("pairs", help="JSONL with 'query', 'text' and optional 'id', 'query_id', 'chunk_id' per line "
                                 "(copied to the output; 'id' defaults to the line number), or Parquet with "
                                 "those columns (a .parquet file or a folder of them; 'id' defaults to the row "
                                 "number; needs crag-grader[parquet]), or a .csv / .tsv file with a header row "
                                 "(comma- or semicolon-separated; 'id' defaults to the row number, the header "
                                 "being row 1)")
    p.add_argument("--out", required=True, help="output JSONL, or Parquet when it ends in .parquet (written "
                                                "atomically), or - for JSONL on stdout")
    p.add_argument("--columns", help="your file's own field names, e.g. 'query=question,text=passage,id=pair_id' "
                                     f"(fields: {', '.join(PAIR_FIELDS)})")
    p.add_argument("--model", default="default", help=MODEL_OPTION_HELP)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--block", type=int_at_least(1), default=256, help="pairs held in memory at a time")
    p.add_argument("--batch-size", type=int_at_least(1), default=None,
                   help="pairs per model call (int8 default 1 keeps each score independent of its batch mates)")
    p.add_argument("--skip-errors", action="store_true",
                   help="skip bad lines (reported in the summary) instead of stopping at the first one")
    p.add_argument("--max-line-chars", type=int_at_least(1), default=MAX_LINE_CHARS,
                   help="longer lines are an error (memory stays bounded whatever the file holds)")
    p.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                   help="run as a Ray Data job: a local runtime, or the cluster at ADDRESS ('auto', "
                        "'ray://host:10001'); PAIRS and --out may then be s3:// or gs:// URIs "
                        "(needs crag-grader[ray])")
    p.add_argument("--ray-actors", type=int_at_least(1), default=2, help="grading actors (each loads the bundle once)")
    p.set_defaults(handler=_grade_file)
