"""The readable text of JSON data files (``.jsonl`` and ``.json``): one record per object, as table rows are read.

Knowledge-base exports, FAQ dumps and ticket archives often come as JSON Lines (one object a line) or as a JSON
array of objects. Each object is a record of ``key: value`` lines (:mod:`pipeline.retrieval.table_text`: a chunk of
its own, graded and quoted whole): a nested object's keys joined by dots (``author.name: Ada``), a list of plain
values on one line (``tags: billing, refunds``), a list of objects numbered (``steps.2.text: ...``), null and empty
values left out. A ``.jsonl`` file's records are its lines. A ``.json`` file's records are the objects of its top
level when it is an array, or of the arrays of objects its top-level object holds (``{"faqs": [...]}``; its other
plain values, when it has any, make one more record); a ``.json`` file without such objects (a ``package.json``, a
``tsconfig.json``) is configuration, not data, and reads as no text (``crag index add`` reports it so).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from models.errors import DataError
from pipeline.retrieval.table_text import join_records, record_lines

__all__ = ["json_to_text", "jsonl_to_text"]

LIST_ITEMS = 50  # plain values of one list shown, then how many more


NESTED_TOO_DEEP = "values nested too deeply to read (a crafted or damaged file)"


def jsonl_to_text(raw: str) -> tuple[str, str]:
    """('', records) of JSON Lines: one value a line (blank lines allowed)."""
    try:
        return _jsonl_records(raw)
    except RecursionError as exc:  # json and the flattening below recurse once per level of nesting
        raise DataError(NESTED_TOO_DEEP) from exc


def json_to_text(raw: str) -> tuple[str, str]:
    """('', records) of a JSON document: its top-level array's items, or its top-level object's arrays of
    objects (see the module's docstring)."""
    try:
        return _json_records(raw)
    except RecursionError as exc:
        raise DataError(NESTED_TOO_DEEP) from exc


def _jsonl_records(raw: str) -> tuple[str, str]:
    records = []
    for number, line in enumerate(raw.split("\n"), start=1):
        if line.strip():
            try:
                value = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"line {number} is not JSON ({exc.msg} at column {exc.colno}); a .jsonl file holds "
                                "one JSON value a line") from exc
            records.append(_record(value))
    return "", join_records(records)


def _json_records(raw: str) -> tuple[str, str]:
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise DataError(f"not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from exc
    if isinstance(value, list):
        return "", join_records(_record(item) for item in value)
    if not isinstance(value, dict):
        return "", ""
    tables = {key: v for key, v in value.items() if _objects(v)}
    if not tables:
        return "", ""  # configuration, not records
    rest = {key: v for key, v in value.items() if key not in tables}
    records = [_record(rest)] if rest else []
    for items in tables.values():
        records += [_record(item) for item in items]
    return "", join_records(records)


def _objects(value: object) -> bool:
    """Whether ``value`` is a non-empty array of objects."""
    return isinstance(value, list) and bool(value) and all(isinstance(item, dict) for item in value)


def _record(value: object) -> str:
    return record_lines(_lines(value, "")) if isinstance(value, dict) else _plain(value)


def _lines(value: dict[str, Any], prefix: str) -> Iterator[tuple[str, str]]:
    """(dotted key, text) of an object's values, depth first, in the object's order."""
    for key, item in value.items():
        name = f"{prefix}{key}"
        if isinstance(item, dict):
            yield from _lines(item, f"{name}.")
        elif isinstance(item, list) and any(isinstance(x, (dict, list)) for x in item):
            for number, element in enumerate(item, start=1):
                if isinstance(element, dict):
                    yield from _lines(element, f"{name}.{number}.")
                elif (text := _plain(element)):
                    yield f"{name}.{number}", text
        elif (text := _plain(item)):
            yield name, text


def _plain(value: object) -> str:
    """A value as one line of text ('' for null and empty): lists of plain values joined by commas."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        shown = [text for text in map(_plain, value[:LIST_ITEMS]) if text]
        more = len(value) - LIST_ITEMS
        return ", ".join(shown) + (f" (and {more} more)" if more > 0 else "")
    if isinstance(value, str):
        return value.strip()
    return json.dumps(value)
