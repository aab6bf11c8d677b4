"""Streaming JSON-lines reading with errors that name the file and line (golden sets, pair files)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from models.errors import DataError

__all__ = ["iter_json_lines"]


def iter_json_lines(path: Path, *, what: str = "file", max_line_chars: int | None = None,
                    errors: list[tuple[int, str]] | None = None,
                    check: Callable[[Any], str | None] | None = None) -> Iterator[tuple[int, Any]]:
    """(line number, parsed value) for every non-blank line, read lazily; bad JSON is a DataError.

    ``max_line_chars`` bounds memory: a longer line is never held whole (it is read past in pieces) and is an
    error. ``check`` returns what is wrong with a parsed value (None when it is fine): also an error for that
    line. With an ``errors`` list, bad lines are appended to it as (line, reason) and skipped instead."""
    try:
        handle = path.open(encoding="utf-8")
    except OSError as exc:
        raise DataError(f"{path}: cannot read the {what} ({exc.strerror})") from exc
    with handle:
        number = 0
        while True:
            number += 1
            try:
                line = handle.readline(max_line_chars + 1) if max_line_chars else handle.readline()
                if not line:
                    return
                if max_line_chars and len(line) > max_line_chars and not line.endswith("\n"):
                    while (rest := handle.readline(1 << 20)) and not rest.endswith("\n"):
                        pass
                    raise DataError(f"{path}:{number}: line longer than {max_line_chars:,} characters")
                if not line.strip():
                    continue
                try:
                    value = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise DataError(f"{path}:{number}: invalid JSON ({exc.msg})") from exc
                problem = check(value) if check is not None else None
                if problem:
                    raise DataError(f"{path}:{number}: {problem}")
            except UnicodeDecodeError as exc:
                undecodable = DataError(f"{path}:{number}: not UTF-8 ({exc.reason})")
                if errors is None:
                    raise undecodable from exc
                errors.append((number, str(undecodable)))
                return  # the decoder cannot resynchronise reliably: stop at the first undecodable byte
            except DataError as exc:
                if errors is None:
                    raise
                errors.append((number, str(exc)))
                continue
            yield number, value
