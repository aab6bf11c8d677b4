"""Loading and validating labelled (query, text, label) pairs from JSONL, CSV or TSV.

Every problem is reported with file, line and value, all at once (up to a cap), never as a traceback.
Duplicate pairs are dropped with a warning that names their lines.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import logging
import os
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from grader.echo import rule_decided
from models.columns import columns_hint, missing_fields_hint, renamed
from models.columns import parse_columns as columns_of
from models.csv_format import delimiter_of
from models.errors import ConfigError, DataError
from models.types import Verdict
from training.labels import LabelMap, parse_label

__all__ = ["LabelledPair", "PairSet", "as_pairs", "group_by_query", "groups_of", "load_pairs", "model_decided",
           "parse_columns", "query_key", "write_pairs"]

logger = logging.getLogger(__name__)
REQUIRED = ("query", "text", "label")
OPTIONAL = ("query_id", "chunk_id", "source", "metadata")
MAX_REPORTED = 20


def query_key(query: str) -> str:
    """A stable id for a query text (case and whitespace folded), used when no query_id is given."""
    folded = " ".join(query.lower().split())
    return "q-" + hashlib.sha1(folded.encode("utf-8")).hexdigest()[:12]


@dataclass(frozen=True, kw_only=True)
class LabelledPair:
    """One human- or LLM-labelled (query, text) pair."""

    query: str
    text: str
    label: Verdict
    query_id: str
    chunk_id: str | None = None
    source: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["label"] = self.label.value
        return out

    @property
    def positive(self) -> bool:
        return self.label.is_positive


@dataclass
class PairSet:
    """Validated pairs with the warnings raised while loading them."""

    pairs: list[LabelledPair]
    warnings: list[str] = field(default_factory=list)
    path: str | None = None

    def __len__(self) -> int:
        return len(self.pairs)

    def summary(self) -> dict[str, Any]:
        """Counts for manifests and reports."""
        counts = {v.value: 0 for v in Verdict}
        for p in self.pairs:
            counts[p.label.value] += 1
        return {
            "path": self.path,
            "pairs": len(self.pairs),
            "queries": len({p.query_id for p in self.pairs}),
            "labels": counts,
        }


def _format_of(path: Path, fmt: str | None) -> str:
    fmt = (fmt or path.suffix.lstrip(".")).lower()
    if fmt in ("jsonl", "ndjson", "json"):
        return "jsonl"
    if fmt in ("csv", "tsv"):
        return fmt
    raise DataError(f"{path}: unknown data format {fmt!r}; use a .jsonl, .csv or .tsv file (or pass fmt=)")


def _decode(path: Path) -> str:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DataError(f"{path}: cannot read the file: {exc.strerror or exc}") from exc
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise DataError(
            f"{path}:{line}: not UTF-8 (byte {raw[exc.start]:#04x} at offset {exc.start}); "
            "re-save the file as UTF-8"
        ) from exc


def parse_columns(spec: str | None) -> dict[str, str] | None:
    """``--columns`` for labelled pairs: {our field: the file's field} (:func:`models.columns.parse_columns`)."""
    return columns_of(spec, REQUIRED + OPTIONAL)


def _records(path: Path, fmt: str, text: str, labelled: bool = True,
             columns: dict[str, str] | None = None) -> Iterator[tuple[int, Any]]:
    if fmt == "jsonl":
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                yield number, json.loads(line)
            except json.JSONDecodeError as exc:
                yield number, DataError(f"{path}:{number}: invalid JSON ({exc.msg}): {line[:80]!r}")
        return
    reader = csv.DictReader(io.StringIO(text, newline=""), delimiter=delimiter_of(text.split("\n", 1)[0], fmt))
    header = reader.fieldnames or []
    names = columns or {}
    missing = [names.get(c, c) for c in REQUIRED if names.get(c, c) not in header and (labelled or c != "label")]
    if missing:
        needed = [c for c in REQUIRED if labelled or c != "label"]
        how = f"--columns maps {names}" if names else f"map yours with {columns_hint(header, needed)}"
        raise DataError(
            f"{path}:1: header {header} lacks column(s) {missing}; the columns are "
            f"{list(REQUIRED)} plus optional {list(OPTIONAL)} ({how})"
        )
    for row in reader:
        yield reader.line_num, row


def _pair_from(record: Any, label_map: LabelMap | None, *, labelled: bool = True,
               columns: dict[str, str] | None = None) -> LabelledPair:
    if not isinstance(record, dict):
        raise ConfigError(f"each record must be a JSON object, got {type(record).__name__}")
    fields = list(record)
    if not labelled:
        record = {**record, "label": Verdict.IRRELEVANT.value}  # placeholder, replaced by the labeller
    missing = [k for k in REQUIRED if record.get(k) is None]
    if missing:
        raise ConfigError(f"missing field(s) {missing}{missing_fields_hint(fields, columns, REQUIRED)}")
    if record["label"] == "":
        raise ConfigError("label is empty")
    query, text = record["query"], record["text"]
    if not isinstance(query, str) or not query.strip():
        raise ConfigError(f"query must be non-empty text, got {query!r:.60}")
    if not isinstance(text, str) or not text.strip():
        raise ConfigError(f"text must be non-empty text, got {text!r:.60}")
    metadata = record.get("metadata") or {}
    if isinstance(metadata, str):
        try:
            metadata = json.loads(metadata)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"metadata must be a JSON object, got {metadata!r:.60}") from exc
    if not isinstance(metadata, dict):
        raise ConfigError(f"metadata must be a JSON object, got {metadata!r:.60}")
    extra = {k: v for k, v in record.items()  # other fields are kept, for --group-by (metadata's own win)
             if isinstance(k, str) and k not in REQUIRED + OPTIONAL and v is not None and v != ""}
    metadata = {**extra, **metadata}
    return LabelledPair(
        query=query.strip(),
        text=text.strip(),
        label=parse_label(record["label"], label_map),
        query_id=str(record.get("query_id") or query_key(query)),
        chunk_id=str(record["chunk_id"]) if record.get("chunk_id") not in (None, "") else None,
        source=str(record["source"]) if record.get("source") not in (None, "") else None,
        metadata=metadata,
    )


def load_pairs(
    path: str | Path, *, label_map: LabelMap | None = None, fmt: str | None = None, labelled: bool = True,
    columns: dict[str, str] | None = None,
) -> PairSet:
    """Load and validate a labelled pair file; raise one :class:`DataError` listing every bad line.

    With ``labelled=False`` (unlabelled pairs for ``crag label``) only query and text are required and
    any label in the file is ignored. ``columns`` maps our field names to the file's (:func:`parse_columns`).
    """
    if not isinstance(path, (str, os.PathLike)):
        raise ConfigError(f"load_pairs reads one file of pairs (a path), got {type(path).__name__}: {path!r:.80}")
    path = Path(path)
    if path.is_dir():
        raise DataError(f"{path} is a folder; pass one file of pairs (JSONL, CSV or TSV)")
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    kind = _format_of(path, fmt)
    text = _decode(path)
    if not text.strip():
        raise DataError(f"{path}: the file is empty; expected labelled pairs with fields {list(REQUIRED)}")
    pairs: list[LabelledPair] = []
    errors: list[str] = []
    warnings: list[str] = []
    seen: dict[tuple[str, str], tuple[int, Verdict]] = {}
    for number, record in _records(path, kind, text, labelled, columns):
        if isinstance(record, DataError):
            errors.append(str(record))
            continue
        try:
            pair = _pair_from(renamed(record, columns), label_map, labelled=labelled, columns=columns)
        except ConfigError as exc:
            errors.append(f"{path}:{number}: {exc}")
            continue
        key = (pair.query_id, pair.text)
        if key in seen:
            first_line, first_label = seen[key]
            clash = f" with a different label ({first_label.value} vs {pair.label.value})" \
                if first_label is not pair.label else ""
            warnings.append(f"{path}:{number}: duplicate of the pair on line {first_line}{clash}; kept the first")
            continue
        seen[key] = (number, pair.label)
        pairs.append(pair)
    if errors:
        more = f"\n... and {len(errors) - MAX_REPORTED} more" if len(errors) > MAX_REPORTED else ""
        raise DataError(f"{len(errors)} invalid record(s):\n" + "\n".join(errors[:MAX_REPORTED]) + more)
    if not pairs:
        raise DataError(f"{path}: no labelled pairs found")
    for message in warnings[:MAX_REPORTED]:
        logger.warning(message)
    return PairSet(pairs=pairs, warnings=warnings, path=str(path))


def as_pairs(data: str | Path | PairSet, *, label_map: LabelMap | None = None, labelled: bool = True) -> PairSet:
    """``data`` as loaded pairs: a PairSet as it is, a path read with :func:`load_pairs`."""
    return data if isinstance(data, PairSet) else load_pairs(data, label_map=label_map, labelled=labelled)


def model_decided(data: PairSet) -> tuple[PairSet, np.ndarray]:
    """The pairs the grader's model decides, and the mask that chose them from ``data``.

    Echoes of the query and wordless or empty chunks are decided irrelevant by rule before any model
    (:mod:`grader.echo`); a calibration map, thresholds, a shift reference or metrics fitted on their scores
    would describe scores the grader never uses. A rule-decided pair labelled relevant is a rule error: it is
    counted in the warning, because no threshold can recover it."""
    ruled = rule_decided([(p.query, p.text) for p in data.pairs])
    if not ruled.any():
        return data, ~ruled
    wrong = sum(1 for p, r in zip(data.pairs, ruled, strict=True) if r and p.label is not Verdict.IRRELEVANT)
    log = logger.warning if wrong else logger.info  # a relevant pair lost to a rule is worth a warning
    log("%s: %d of %d pairs are decided by rule (query echoes, no words), not by the model; they are left out of "
        "calibration and thresholds%s", data.path or "data", int(ruled.sum()), len(data.pairs),
        f" ({wrong} of them labelled relevant or partial: the rule rejects them whatever the thresholds)"
        if wrong else "")
    kept = [p for p, r in zip(data.pairs, ruled, strict=True) if not r]
    return PairSet(kept, warnings=list(data.warnings), path=data.path), ~ruled


def group_by_query(pairs: Iterable[LabelledPair]) -> dict[str, list[LabelledPair]]:
    """Pairs grouped by query_id, in first-seen order."""
    groups: dict[str, list[LabelledPair]] = defaultdict(list)
    for pair in pairs:
        groups[pair.query_id].append(pair)
    return dict(groups)


def groups_of(pairs: Sequence[LabelledPair], key: str | None) -> list[str] | None:
    """Each pair's group for ``--group-by``: a metadata field, or a pair attribute such as ``source``; a field no
    pair has (a typo, or data without domains) is an error naming the fields there are."""
    if not key:
        return None
    groups = [str(p.metadata.get(key) or getattr(p, key, None) or "") for p in pairs]
    if pairs and not any(groups):
        fields = sorted({k for p in pairs for k in p.metadata})
        raise ConfigError(f"--group-by {key!r}: no pair has that field; fields in the metadata: "
                          f"{', '.join(fields) or 'none'} (or 'source')")
    return groups


def write_pairs(pairs: Iterable[LabelledPair], path: str | Path) -> int:
    """Write pairs as JSONL (atomically); returns how many were written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    count = 0
    with tmp.open("w", encoding="utf-8") as handle:
        for pair in pairs:
            handle.write(json.dumps(pair.to_dict(), ensure_ascii=False) + "\n")
            count += 1
    tmp.replace(path)
    return count
