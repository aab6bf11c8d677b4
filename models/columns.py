"""A file's own field names mapped to ours (``--columns 'query=question,text=passage'``), for every command
that reads records of (query, text, ...) pairs."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from models.errors import ConfigError

__all__ = ["COLUMNS_HINT", "columns_hint", "missing_fields_hint", "parse_columns", "renamed"]

COLUMNS_HINT = "--columns 'query=question,text=passage,label=relevance'"

# names datasets commonly give our fields, most likely first (matched ignoring case, spaces and punctuation)
_SYNONYMS: dict[str, tuple[str, ...]] = {
    "query": ("question", "query_text", "question_text", "q", "prompt", "search_query", "user_query", "queries"),
    "text": ("passage", "chunk", "document", "doc", "context", "content", "paragraph", "sentence", "answer",
             "body", "snippet", "passage_text", "chunk_text", "doc_text"),
    "label": ("relevance", "rel", "relevant", "is_relevant", "judgement", "judgment", "grade", "score", "qrel",
              "gold", "target", "class", "y"),
}


def _folded(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum())


def columns_hint(present: Iterable[str], needed: Sequence[str]) -> str:
    """A ``--columns`` option for a file whose fields are ``present`` and lack some of ``needed``: the file's
    own names when each missing field has exactly one plausible column (``question`` for query, ``passage``
    for text, ``rel`` for label...), else the generic example."""
    names = [str(n) for n in present]
    by_fold = {_folded(n): n for n in names}
    mapping: dict[str, str] = {}  # our field -> the file's column
    for field in needed:
        if field in names:
            continue
        found = [by_fold[_folded(s)] for s in (field, *_SYNONYMS.get(field, ())) if _folded(s) in by_fold]
        if not found or found[0] in mapping.values():
            return COLUMNS_HINT
        mapping[field] = found[0]
    return f"--columns '{','.join(f'{ours}={theirs}' for ours, theirs in mapping.items())}'" if mapping \
        else COLUMNS_HINT


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


def missing_fields_hint(fields: Iterable[str], columns: dict[str, str] | None,
                        needed: Sequence[str] = ("query", "text")) -> str:
    """What to add to a "missing field" error: the fields the record has and how to map them."""
    fields = sorted(str(f) for f in fields)
    if columns:
        return f"; --columns maps {columns} and the record has {fields}"
    return f"; the record has {fields}: map yours with {columns_hint(fields, needed)}"
