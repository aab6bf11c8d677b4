"""Streaming JSON-lines reading with errors that name the file and line (golden sets, pair files)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from models.errors import DataError

__all__ = ["iter_json_lines"]


def iter_json_lines(path: Path, *, what: str = "file") -> Iterator[tuple[int, Any]]:
    """(line number, parsed value) for every non-blank line, read lazily; bad JSON is a DataError."""
    try:
        handle = path.open(encoding="utf-8")
    except OSError as exc:
        raise DataError(f"{path}: cannot read the {what} ({exc.strerror})") from exc
    with handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                yield number, json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"{path}:{number}: invalid JSON ({exc.msg})") from exc
            except UnicodeDecodeError as exc:
                raise DataError(f"{path}:{number}: not UTF-8 ({exc.reason})") from exc
