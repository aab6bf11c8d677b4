"""The readable text of an Excel 97-2003 workbook (``.xls``, the BIFF8 format that older Excel versions, and many
exports, still write), read with xlrd (the ``xlsx`` extra).

Read as an ``.xlsx`` workbook is (:mod:`pipeline.retrieval.xlsx_text`): each visible sheet as a table whose first
non-empty row names the columns and whose other rows are records (``sheet: Billing`` first in a workbook of several
sheets), each cell as Excel last showed its value (a formula by its stored result, a date as ``2024-03-01``, a time
as ``09:30``, a whole number without ``.0``, TRUE / FALSE, an error as Excel writes it: ``#DIV/0!``). Hidden sheets,
charts and pictures are left out. An encrypted workbook, or a file that is not one, is an error naming it.
"""

from __future__ import annotations

import datetime as dt
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from models.deps import require
from models.errors import DataError
from pipeline.retrieval.file_kinds import HEAD_BYTES
from pipeline.retrieval.spreadsheetml_text import is_spreadsheetml, spreadsheetml_to_text
from pipeline.retrieval.table_text import workbook_records
from pipeline.retrieval.xlsx_text import cell_text

__all__ = ["xls_to_text"]

EMPTY, TEXT, NUMBER, DATE, BOOLEAN, ERROR, BLANK = range(7)  # xlrd's cell types (xlrd.XL_CELL_*)


def xls_to_text(path: Path) -> tuple[str, str]:
    """("", records) of the visible sheets of the workbook in ``path`` (xlrd does not read its Title property); an XML
    Spreadsheet 2003 file under this name is read as one (:mod:`pipeline.retrieval.spreadsheetml_text`)."""
    with path.open("rb") as handle:
        if is_spreadsheetml(handle.read(HEAD_BYTES)):
            return spreadsheetml_to_text(path)
    xlrd = require("xlrd", "xlsx")
    try:
        book = xlrd.open_workbook(str(path), on_demand=True, logfile=io.StringIO())  # xlrd writes its warnings
        # about damaged files to the log file it is given, sys.stdout by default
    except Exception as exc:  # xlrd raises XLRDError, CompoundDocError, struct and index errors for damaged files
        raise DataError(f"{path}: not a readable .xls workbook ({type(exc).__name__}: {exc}); an encrypted one must "
                        "be saved without its password first") from exc
    try:
        sheets = [book.sheet_by_index(index) for index in range(book.nsheets)]
        text = workbook_records([(sheet.name, _rows(xlrd, book, sheet)) for sheet in sheets
                                 if sheet.visibility == 0])  # 1: hidden, 2: very hidden
    except Exception as exc:
        raise DataError(f"{path}: a sheet of this workbook cannot be read ({type(exc).__name__}: {exc})") from exc
    finally:
        book.release_resources()
    return "", text


def _rows(xlrd: Any, book: Any, sheet: Any) -> Iterator[list[str]]:
    for row in sheet.get_rows():
        yield [_cell(xlrd, book.datemode, cell.ctype, cell.value) for cell in row]


def _cell(xlrd: Any, datemode: int, kind: int, value: Any) -> str:
    """A cell's value as Excel shows it by default (:func:`cell_text` once it is a Python value)."""
    if kind == DATE:
        if 0 <= value < 1:  # a time of day alone
            seconds = round(value * 86400)
            return cell_text(dt.time(seconds // 3600 % 24, seconds // 60 % 60, seconds % 60))
        try:
            return cell_text(xlrd.xldate_as_datetime(value, datemode))
        except (ValueError, OverflowError):  # not a date Excel can show (it shows ####)
            return cell_text(value)
    if kind == BOOLEAN:
        return cell_text(bool(value))
    if kind == ERROR:
        return xlrd.error_text_from_code.get(value, "#N/A")
    if kind in (EMPTY, BLANK):
        return ""
    return cell_text(value)
