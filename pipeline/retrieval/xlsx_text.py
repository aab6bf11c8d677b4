"""The readable text of an Excel workbook (``.xlsx``), read with openpyxl (the ``xlsx`` extra).

Each visible worksheet is read as a table file is (:mod:`pipeline.retrieval.table_text`): its first non-empty row
names the columns and every row after it is a record of ``column: value`` lines, a chunk of its own. In a workbook
of several sheets each record opens with its sheet's name (``sheet: Billing``), which often says what its rows
are about. A cell reads as Excel last showed its value: a formula by the result Excel stored (a workbook written
by a program and never opened in Excel has none, and the cell reads empty), a date as ``2024-03-01`` (with the time
when it has one), a whole number without ``.0``, at most 15 significant digits, TRUE / FALSE. Hidden sheets,
charts and pictures are left out.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from models.deps import require
from models.errors import DataError
from pipeline.retrieval.table_text import workbook_records

__all__ = ["cell_text", "xlsx_to_text"]


def xlsx_to_text(path: Path) -> tuple[str, str]:
    """(title, records): the workbook's Title property ('' without one) and the records of its visible sheets."""
    openpyxl = require("openpyxl", "xlsx")
    try:
        workbook = openpyxl.load_workbook(path, read_only=True, data_only=True)
    except Exception as exc:  # openpyxl raises zipfile, XML, KeyError and its own errors for damaged files
        raise DataError(f"{path}: not a readable .xlsx file ({type(exc).__name__}: {exc}); an encrypted workbook "
                        "must be saved without its password first, and an older binary one is read from a file named "
                        ".xls") from exc
    try:
        sheets = [sheet for sheet in workbook.worksheets if getattr(sheet, "sheet_state", "visible") == "visible"
                  and hasattr(sheet, "iter_rows")]  # chart sheets have no cells
        text = workbook_records([(sheet.title, _rows(sheet)) for sheet in sheets])
        title = str(workbook.properties.title or "").strip()
    except Exception as exc:
        raise DataError(f"{path}: a sheet of this workbook cannot be read ({type(exc).__name__}: {exc})") from exc
    finally:
        workbook.close()
    return title, text


def _rows(sheet: Any) -> Iterator[list[str]]:
    sheet.reset_dimensions()  # a file's stored sheet size may be wrong (read-only mode would trust it)
    for row in sheet.iter_rows(values_only=True):
        yield [cell_text(value) for value in row]


def cell_text(value: object) -> str:
    """A cell's value as Excel shows it by default."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, dt.datetime):
        return value.date().isoformat() if value.time() == dt.time() else value.isoformat(sep=" ", timespec="minutes")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, dt.time):
        return value.isoformat(timespec="minutes")
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 1e15 else format(value, ".15g")
    return str(value)
