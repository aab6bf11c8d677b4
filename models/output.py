"""Writing command results: rich tables for people, JSON for machines."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from models.errors import ConfigError

__all__ = ["check_output_path", "check_replaceable_dir", "make_output_dir", "print_json", "print_table",
           "print_text"]


def check_output_path(out: str | Path, *inputs: str | Path, keep_existing: str | None = None,
                      option: str = "--out") -> None:
    """A command's ``--out`` must not be one of its inputs (the input would be replaced by the output); with
    ``keep_existing`` (what the file would hold, e.g. "labels an LLM was paid for") it must not exist at all.
    Its folder is made now and must be writable, so a bad path is said before the slow work, not after it."""
    target = Path(out).resolve()
    for given in inputs:
        if Path(given).resolve() == target:
            raise ConfigError(f"{option} {out} is the input file {given}; write the output elsewhere so the input "
                              "is kept")
    if keep_existing and target.exists():
        raise ConfigError(f"{option} {out} exists; it may hold {keep_existing}: choose a new file (or move it away "
                          "first)")
    if target.is_dir():
        raise ConfigError(f"{option} {out} is a folder; name a file in it")
    for ancestor in target.parents:
        if ancestor.exists():
            if not ancestor.is_dir():
                raise ConfigError(f"{option} {out}: {ancestor} is a file, not a folder")
            break
    _make_writable(target.parent, f"{option} {out}", f"its folder {target.parent}")


def check_replaceable_dir(out: str | Path, *, key: str, value: str, what: str) -> None:
    """A directory ``--out`` may be new, empty, or an earlier output of the same command (its ``manifest.json``
    has ``key == value``), which a passing run replaces; anything else there is refused before any work, so a
    command never overwrites or deletes what it did not write."""
    target = Path(out)
    if not target.exists() or (target.is_dir() and not any(target.iterdir())):
        return
    try:
        found = json.loads((target / "manifest.json").read_text(encoding="utf-8")).get(key)
    except (OSError, ValueError, AttributeError):
        found = None
    if found != value:
        raise ConfigError(f"--out {out} exists and is not {what} (only one of those is replaced); choose a new "
                          "directory so nothing stored there is lost")


def make_output_dir(out: str | Path, *, option: str = "--out") -> None:
    """Make a command's output folder before its slow work (training), so a path that cannot be written is said
    then, not after the work is done and lost."""
    _make_writable(Path(out), f"{option} {out}", "this folder", fix="; choose another path")


def _make_writable(folder: Path, said: str, what: str, fix: str = "") -> None:
    """Make ``folder`` (and its parents) and check that it can be written, or a ConfigError beginning with ``said``
    that names it as ``what``."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"{said}: cannot make {what} ({exc.strerror or exc}){fix}") from None
    if not os.access(folder, os.W_OK):
        raise ConfigError(f"{said}: {what} is not writable{fix}")


def print_json(data: Any) -> None:
    """JSON on stdout."""
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


def print_text(text: str) -> None:
    """Plain text on stdout (the table and JSON helpers cover structured output)."""
    sys.stdout.write(text + "\n")


def print_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """A rich table when rich is installed, else tab-separated text."""
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        sys.stdout.write(title + "\n" + "\t".join(columns) + "\n")
        for row in rows:
            sys.stdout.write("\t".join(str(v) for v in row) + "\n")
        return
    table = Table(title=title)
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*[str(v) for v in row])
    Console(width=None if sys.stdout.isatty() else 160).print(table)
