"""``crag grade-file --ray``: the same grading as a Ray Data job, over a pool of actors that each load the
bundle once.

Input: JSONL or Parquet (local paths or any filesystem Ray and pyarrow accept, such as s3:// or gs://; a
folder means every file in it). JSONL files are split into their lines inside the cluster; Parquet files are
read row group by row group, numbered from the files' metadata on the driver; so a pair's ``id`` defaults to
its line (row) number exactly as in the local command. Pairs are graded one per model call, so every output
row equals the local command's, pair by pair. The driver only streams the graded rows, in input order, into
the output (JSONL, or Parquet when it ends in .parquet; a local path, written atomically, or a remote URI
through pyarrow). Bad lines stop the job with the line named, or with ``skip_errors`` are
reported in the summary; nothing is dropped silently. Imported only when ``--ray`` is given.
"""

from __future__ import annotations

import json
import time
from typing import Any

import numpy as np

from grader.factory import load_cross_encoder
from models.columns import renamed
from models.deps import require
from models.errors import ConfigError, DataError
from pipeline.cli.batch_grade import graded_lines, kept_fields, pair_problem, warn_if_empty
from pipeline.cli.parquet_pairs import is_parquet, open_graded_output, parquet_pieces, read_piece

__all__ = ["grade_with_ray"]

BYTES_PER_LINE = 256


def _lines_of_file(row: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per non-blank line of a JSONL file, numbered as the local reader numbers them (universal
    newlines: \\n, \\r\\n and \\r all end a line)."""
    text = row["bytes"].decode("utf-8", errors="replace")
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return [{"source": str(row["path"]), "line": n, "raw": line} for n, line in enumerate(lines, 1) if line.strip()]


class GradingActor:
    """Loads the grader once; grades a batch of raw lines into output lines (or reported errors)."""

    def __init__(self, model: str, threads: int, max_line_chars: int, columns: dict[str, str] | None = None) -> None:
        self.grader = load_cross_encoder(model, threads=threads)
        self.max_line_chars = max_line_chars
        self.columns = columns

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, list[Any]]:
        out: list[tuple[int, str, str]] = []  # (position, kind "ok"/"error", text)
        pairs, kept, positions = [], [], []
        for i, (source, line, raw) in enumerate(zip(batch["source"], batch["line"], batch["raw"], strict=True)):
            problem, record = self._parse(str(raw))
            if problem is not None:  # the driver stops at it, or reports it with --skip-errors
                out.append((i, "error", json.dumps({"line": int(line), "source": str(source), "reason": problem})))
                continue
            pairs.append((record["query"], record["text"]))
            kept.append(kept_fields(int(line), record))
            positions.append(i)
        for i, (text, band) in zip(positions, graded_lines(self.grader, pairs, kept), strict=True):
            out.append((i, "uncertain" if band else "ok", text))
        out.sort()
        return {"kind": [k for _, k, _ in out], "text": [t for _, _, t in out]}

    def _parse(self, raw: str) -> tuple[str | None, dict[str, Any]]:
        if len(raw) > self.max_line_chars:
            return f"line longer than {self.max_line_chars:,} characters", {}
        try:
            record = json.loads(raw)
        except json.JSONDecodeError as exc:
            return f"invalid JSON ({exc.msg})", {}
        record = renamed(record, self.columns)
        return pair_problem(record, self.columns), record


def _read(ray: Any, source: str) -> Any:
    """Rows of (source, line, raw) from JSONL or Parquet files. Reading and splitting reserve no CPU: they
    are light, and the grading actors hold every core they asked for (with all cores given to actors, a
    reading task needing a CPU would wait for ever; Ray's own Parquet reader lists files in such a task,
    hence row groups listed here and read by zero-CPU tasks)."""
    if is_parquet(source):
        pieces = parquet_pieces(source)
        if not pieces:
            raise DataError(f"{source}: no Parquet row groups to grade")
        return ray.data.from_items(pieces, override_num_blocks=len(pieces)).flat_map(
            read_piece, fn_args=(source,), num_cpus=0)
    return ray.data.read_binary_files(source, include_paths=True, num_cpus=0).flat_map(_lines_of_file, num_cpus=0)


def grade_with_ray(source: str, out: str, *, address: str | None, model: str = "default", actors: int = 2,
                   threads: int = 1, block: int = 256, skip_errors: bool = False,
                   max_line_chars: int = 1_000_000, columns: dict[str, str] | None = None) -> dict[str, Any]:
    """Grade ``source`` into ``out`` on Ray (``address`` None starts a local runtime); returns the summary."""
    if actors < 1 or threads < 1 or block < 1:
        raise ConfigError(f"--ray-actors, --threads and --block must be >= 1, got {actors}, {threads}, {block}")
    ray = require("ray", "ray")
    started = time.perf_counter()
    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    context = ray.data.DataContext.get_current()
    context.execution_options.preserve_order = True  # output in input order
    # small blocks (about ``block`` lines of a few hundred bytes), so that every actor gets work: a block goes
    # to one actor, and a whole file would otherwise be one block
    context.target_max_block_size = max(BYTES_PER_LINE * block, 16 * 1024)
    graded = _read(ray, source).map_batches(
        GradingActor, fn_constructor_kwargs={"model": model, "threads": threads, "max_line_chars": max_line_chars,
                                             "columns": columns},
        batch_size=block, batch_format="numpy", concurrency=actors, num_cpus=threads)
    count = uncertain = 0
    skipped: list[dict[str, Any]] = []
    handle, publish = open_graded_output(out)
    with handle:
        for batch in graded.iter_batches(batch_format="numpy", batch_size=block):
            for kind, text in zip(batch["kind"], batch["text"], strict=True):
                if kind == "error":
                    bad = json.loads(str(text))
                    if not skip_errors:  # rows come in input order: everything before it is written
                        raise DataError(f"{bad['source']}:{bad['line']}: {bad['reason']}; fix the line or pass "
                                        f"--skip-errors. The pairs graded before it are in {out}.partial")
                    skipped.append(bad)
                    continue
                handle.write(str(text) + "\n")
                count += 1
                uncertain += kind == "uncertain"
    publish()
    warn_if_empty(source, count, skipped)
    seconds = time.perf_counter() - started
    summary: dict[str, Any] = {"pairs": count, "uncertain": uncertain, "seconds": round(seconds, 3),
                               "pairs_per_second": round(count / seconds, 1) if seconds else None,
                               "ray": {"actors": actors, "threads_per_actor": threads,
                                       "address": address or "local"}}
    if skip_errors:
        summary["skipped"] = len(skipped)
        summary["skipped_lines"] = skipped[:50]
    return summary
