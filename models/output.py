"""Writing command results: rich tables for people, JSON for machines."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["print_json", "print_table"]


def print_json(data: Any) -> None:
    """JSON on stdout."""
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


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
