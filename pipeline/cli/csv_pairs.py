"""(query, text) pairs from a CSV or TSV file, read a row at a time for `crag grade-file` (bounded memory)."""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from models.csv_format import delimiter_of
from models.errors import DataError

__all__ = ["is_delimited", "iter_csv_rows"]

FORMATS = {".csv": "csv", ".tsv": "tsv"}


def is_delimited(path: str) -> bool:
    """Whether ``path`` names a CSV or TSV file (by its extension, as `crag train` reads them)."""
    return Path(path).suffix.lower() in FORMATS


def iter_csv_rows(path: Path, *, max_line_chars: int, errors: list[tuple[int, str]] | None = None,
                  check: Callable[[Any], str | None] | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """(row number, the row as a dict by header) for every data row; the header is row 1, as a spreadsheet numbers
    it. A field longer than ``max_line_chars`` is an error without being held whole; ``check`` and ``errors``
    work as in :func:`pipeline.cli.jsonl.iter_json_lines` (a bad row is an error, or reported and skipped)."""
    try:
        handle = path.open(encoding="utf-8", newline="")
    except OSError as exc:
        raise DataError(f"{path}: cannot read the pair file ({exc.strerror})") from exc
    with handle:
        try:
            header = handle.readline(max_line_chars + 1)
        except UnicodeDecodeError as exc:
            raise DataError(f"{path}:1: not UTF-8 ({exc.reason})") from exc
        delimiter = delimiter_of(header, FORMATS[path.suffix.lower()])
        handle.seek(0)
        previous_limit = csv.field_size_limit(max_line_chars)
        try:
            reader = csv.DictReader(handle, delimiter=delimiter)
            number = 1
            while True:
                try:
                    row = next(reader, None)
                    if row is None:
                        return
                    number += 1
                    problem = check(row) if check is not None else None
                    if None in row:  # more fields than the header names
                        problem = f"{len(row[None]) + len(reader.fieldnames or ())} fields where the header has " \
                                  f"{len(reader.fieldnames or ())}; quote texts that hold a {delimiter!r}"
                    if problem:
                        raise DataError(f"{path}:{number}: {problem}")
                except csv.Error as exc:
                    raise DataError(f"{path}:{number + 1}: {exc} (--max-line-chars is {max_line_chars:,})") \
                        from exc
                except UnicodeDecodeError as exc:
                    raise DataError(f"{path}:{number + 1}: not UTF-8 ({exc.reason})") from exc
                except DataError as exc:
                    if errors is None:
                        raise
                    errors.append((number, str(exc)))
                    continue
                yield number, {k: v for k, v in row.items() if k is not None}
        finally:
            csv.field_size_limit(previous_limit)
