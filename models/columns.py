"""A file's own field names mapped to ours (``--columns 'query=question,text=passage'``), for every command
that reads records of (query, text, ...) pairs."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from models.errors import ConfigError

__all__ = ["COLUMNS_HINT", "missing_fields_hint", "parse_columns", "renamed"]

COLUMNS_HINT = "--columns 'query=question,text=passage,label=relevance'"


def parse_columns(spec: str | None, fields: Sequence[str]) -> dict[str, str] | None:
    """``"query=question,text=passage"`` as {our field: the file's field}; ``fields`` are ours that may be mapped."""
    if spec is None or not spec.strip():
        return None
    columns: dict[str, str] = {}
    for part in spec.split(","):
        ours, sep, theirs = (x.strip() for x in part.partition("="))
        if not sep or not theirs or ours not in fields:
            raise ConfigError(f"bad --columns entry {part.strip()!r} in {spec!r}; write <field>=<your column> with "
                              f"field one of {list(fields)}, e.g. {COLUMNS_HINT}")
        if ours in columns or theirs in columns.values():
            raise ConfigError(f"--columns {spec!r} names {ours!r} or {theirs!r} twice")
        columns[ours] = theirs
    return columns


def renamed(record: Any, columns: dict[str, str] | None) -> Any:
    """``record`` with the file's own field names replaced by ours (fields not mapped are kept as they are)."""
    if not columns or not isinstance(record, dict):
        return record
    theirs = set(columns.values())
    out = {k: v for k, v in record.items() if k not in theirs and k not in columns}
    out.update({ours: record[name] for ours, name in columns.items() if name in record})
    return out


def missing_fields_hint(fields: Iterable[str], columns: dict[str, str] | None) -> str:
    """What to add to a "missing field" error: the fields the record has and how to map them."""
    if columns:
        return f"; --columns maps {columns} and the record has {sorted(fields)}"
    return f"; the record has {sorted(fields)}: map yours with {COLUMNS_HINT}"
