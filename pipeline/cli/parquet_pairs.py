"""Parquet pair files for ``crag grade-file`` (local and ``--ray``): rows in, graded rows out.

A pair file is Parquet when its name ends in ``.parquet`` (a folder: when every file in it does, leaving out
the marker files Spark and Hadoop write, such as ``_SUCCESS`` and ``.crc`` files). Rows need
string ``query`` and ``text`` columns; ``id``, ``query_id`` and ``chunk_id`` are copied to the output, and a
row's ``id`` defaults to its row number (1-based, across the files in name order), so results join back to
the input exactly as JSONL line numbers do. pyarrow is imported lazily (``crag-grader[parquet]`` or ``[ray]``).
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from models.deps import require
from models.errors import DataError

__all__ = ["KEPT_COLUMNS", "PARQUET_COLUMNS", "ParquetSink", "is_parquet", "iter_parquet_rows", "open_graded_output",
           "parquet_pieces", "read_piece"]

#: Columns read from a Parquet pair file (others are left on disk).
PARQUET_COLUMNS = ("query", "text", "id", "query_id", "chunk_id")
#: Fields of an input pair copied to its graded row, so results join back to the user's data.
KEPT_COLUMNS = ("id", "query_id", "chunk_id")

ROWS_PER_READ = 4096


def is_parquet(location: str) -> bool:
    """Whether ``location`` (a file, a folder or a URI) names Parquet pairs."""
    if location.rstrip("/").endswith(".parquet"):
        return True
    if "://" in location:
        return False
    folder = Path(location)
    files = [p for p in folder.iterdir() if p.is_file() and not _is_marker(p.name)] if folder.is_dir() else []
    return bool(files) and all(p.suffix == ".parquet" for p in files)


def _is_marker(name: str) -> bool:
    """Files Spark and Hadoop write beside the data (_SUCCESS, .part-0.parquet.crc): never data."""
    return name.startswith(("_", "."))


def _filesystem(location: str) -> tuple[Any, str]:
    fs = require("pyarrow.fs", "parquet")
    if "://" in location:
        return fs.FileSystem.from_uri(location)
    return fs.LocalFileSystem(), str(Path(location).resolve())


def _parquet_files(location: str) -> tuple[Any, list[tuple[str, Any]]]:
    """The filesystem and each data file of the Parquet file or folder at ``location`` (name order), opened."""
    pq = require("pyarrow.parquet", "parquet")
    fs = require("pyarrow.fs", "parquet")
    filesystem, path = _filesystem(location)
    info = filesystem.get_file_info(path)
    if info.type == fs.FileType.NotFound:
        raise DataError(f"{location}: no such Parquet file or folder")
    if info.type == fs.FileType.Directory:
        names = sorted(f.path for f in filesystem.get_file_info(fs.FileSelector(path, recursive=True))
                       if f.type == fs.FileType.File and f.path.endswith(".parquet") and not _is_marker(f.base_name))
    else:
        names = [path]
    files = []
    for name in names:
        try:
            files.append((name, pq.ParquetFile(name, filesystem=filesystem)))
        except Exception as exc:  # pyarrow raises ArrowInvalid, OSError...: all mean an unreadable file
            raise DataError(f"{name}: not a readable Parquet file ({exc})") from exc
    return filesystem, files


def parquet_pieces(location: str) -> list[dict[str, Any]]:
    """Every row group of the Parquet file or folder at ``location``, with the row number its first row
    has: the units a distributed job reads, numbered as the local reader numbers rows."""
    pieces, first = [], 1
    for file, handle in _parquet_files(location)[1]:
        metadata = handle.metadata
        for group in range(metadata.num_row_groups):
            pieces.append({"uri": file, "group": group, "first": first})
            first += metadata.row_group(group).num_rows
    return pieces


def _columns(parquet_file: Any, where: str) -> list[str]:
    names = set(parquet_file.schema_arrow.names)
    missing = [c for c in ("query", "text") if c not in names]
    if missing:
        raise DataError(f"{where}: Parquet pairs need columns 'query' and 'text'; missing {missing} "
                        f"(has {sorted(names)[:10]})")
    return [c for c in PARQUET_COLUMNS if c in names]


def read_piece(piece: dict[str, Any], location: str) -> list[dict[str, Any]]:
    """The rows of one row group as (source, line, raw JSON) records, the shape the Ray job grades."""
    pq = require("pyarrow.parquet", "parquet")
    filesystem, _ = _filesystem(location)
    handle = pq.ParquetFile(piece["uri"], filesystem=filesystem)
    table = handle.read_row_group(piece["group"], columns=_columns(handle, piece["uri"]))
    return [{"source": piece["uri"], "line": piece["first"] + i, "raw": json.dumps(_present(record))}
            for i, record in enumerate(table.to_pylist())]


def _present(record: dict[str, Any]) -> dict[str, Any]:
    """A row without its null optional fields (as a JSONL line without those keys)."""
    return {k: v for k, v in record.items() if v is not None or k in ("query", "text")}


def iter_parquet_rows(location: str, *, errors: list[tuple[int, str]] | None = None,
                      check: Callable[[Any], str | None] | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """(row number, row) for every row, read in batches; a bad row is a DataError naming the file and row
    (or, with an ``errors`` list, is appended there as (row, reason) and skipped)."""
    number = 0
    for piece_file, handle in _parquet_files(location)[1]:
        for batch in handle.iter_batches(batch_size=ROWS_PER_READ, columns=_columns(handle, piece_file)):
            for record in batch.to_pylist():
                number += 1
                record = _present(record)
                problem = check(record) if check is not None else None
                if problem:
                    if errors is None:
                        raise DataError(f"{piece_file}:{number}: {problem}")
                    errors.append((number, f"{piece_file}:{number}: {problem}"))
                    continue
                yield number, record


def open_graded_output(out: str) -> tuple[Any, Callable[[], Any]]:
    """Where graded lines go, and the function that publishes them once all are written: JSONL, or Parquet
    rows when ``out`` ends in .parquet; a local path is written to ``out``.partial and renamed by publish (so
    nothing truncated ever has the final name), a URI (s3://, gs://, file://) is written through pyarrow."""
    parquet = out.endswith(".parquet")
    if "://" not in out:
        final = Path(out)
        tmp = final.with_name(final.name + ".partial")
        sink = ParquetSink(tmp.open("wb"), str(tmp)) if parquet else tmp.open("w", encoding="utf-8")
        return sink, lambda: tmp.replace(final)
    filesystem, path = _filesystem(out)
    stream = filesystem.open_output_stream(path)
    sink = ParquetSink(stream, out) if parquet else io.TextIOWrapper(stream, encoding="utf-8")
    return sink, lambda: None


class ParquetSink:
    """A text sink for graded JSON lines that writes them as Parquet rows (one row group per flush).

    Every output has the same columns: ``id``, ``query_id``, ``chunk_id`` (null where a pair had none), then
    the grade. A kept column is int64 when its first values are all integers and string otherwise (later
    integers are written as strings); a string in an int64 column is a DataError naming the fix. ``close``
    finishes the file, also after an error, so the rows graded before it stay readable."""

    def __init__(self, stream: IO[bytes] | Any, where: str) -> None:
        self._pa = require("pyarrow", "parquet")
        self._pq = require("pyarrow.parquet", "parquet")
        self._stream, self._where = stream, where
        self._rows: list[dict[str, Any]] = []
        self._writer: Any = None
        self._text = ""

    def write(self, text: str) -> int:
        self._text += text
        *lines, self._text = self._text.split("\n")
        self._rows.extend(json.loads(line) for line in lines if line)
        return len(text)

    def _schema(self) -> Any:
        pa = self._pa
        kept = []
        for name in KEPT_COLUMNS:
            values = [r[name] for r in self._rows if r.get(name) is not None]
            whole = bool(values) and all(isinstance(v, int) and not isinstance(v, bool) for v in values)
            kept.append((name, pa.int64() if whole else pa.string()))
        return pa.schema([*kept, ("probability", pa.float64()), ("verdict", pa.string()),
                          ("uncertain", pa.bool_()), ("truncated", pa.bool_()), ("windows", pa.int64())])

    def flush(self) -> None:
        if not self._rows:
            return
        schema = self._writer.schema if self._writer is not None else self._schema()
        columns = {}
        for field in schema:
            values = [r.get(field.name) for r in self._rows]
            if field.type == self._pa.string():
                values = [v if v is None or isinstance(v, str) else str(v) for v in values]
            elif field.name in KEPT_COLUMNS and any(isinstance(v, str) for v in values):
                raise DataError(f"{self._where}: '{field.name}' was a whole number in the first rows and is a "
                                f"string later; give every pair an '{field.name}' of one type")
            columns[field.name] = values
        table = self._pa.Table.from_pydict(columns, schema=schema)
        if self._writer is None:
            self._writer = self._pq.ParquetWriter(self._stream, schema)
        self._writer.write_table(table)
        self._rows.clear()

    def close(self) -> None:
        self.flush()
        if self._writer is None:  # no rows: still a valid file, with the columns a graded row has
            self._writer = self._pq.ParquetWriter(self._stream, self._schema())
        self._writer.close()
        self._stream.close()

    def __enter__(self) -> ParquetSink:
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()  # also after an error: the rows graded before it stay a readable file
