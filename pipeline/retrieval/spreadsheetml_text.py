"""The readable text of an XML Spreadsheet 2003 file (SpreadsheetML: one XML document, ``<Workbook
xmlns="urn:schemas-microsoft-com:office:spreadsheet">``), read with the standard library.

Excel 2002-2003 saved workbooks this way, and report tools and web apps still export them, usually under an ``.xls``
name so that Excel opens them (:mod:`pipeline.retrieval.file_kinds` finds them by their content). Read as any
workbook is (:mod:`pipeline.retrieval.xls_text`): each visible worksheet as a table whose first non-empty row names
the columns and whose other rows are records, each cell's ``<Data>`` as shown (a date as ``2024-03-01``, or with its
time); a cell's ``ss:Index`` places it in its column, and merged cells leave the columns they cover empty. The
document properties' Title names the file.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from xml.etree import ElementTree

from pipeline.retrieval.table_text import workbook_records
from pipeline.retrieval.zipped_xml import xml_file

__all__ = ["is_spreadsheetml", "spreadsheetml_to_text"]

SS = "{urn:schemas-microsoft-com:office:spreadsheet}"
OFFICE = "{urn:schemas-microsoft-com:office:office}"
EXCEL = "{urn:schemas-microsoft-com:office:excel}"
MAX_COLUMNS = 16_384  # Excel's: an ss:Index past it is a crafted file's


def is_spreadsheetml(head: bytes) -> bool:
    """Whether a file's first bytes are those of an XML Spreadsheet 2003 workbook."""
    return head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"<?xml") and (
        b'progid="Excel.Sheet"' in head or b"urn:schemas-microsoft-com:office:spreadsheet" in head)


def spreadsheetml_to_text(path: Path) -> tuple[str, str]:
    """(title, records) of the visible worksheets of the XML Spreadsheet 2003 workbook in ``path``."""
    root = xml_file(path, f"{SS}Workbook", "an XML Spreadsheet 2003 workbook")
    sheets = [(sheet.get(f"{SS}Name", ""), _rows(sheet)) for sheet in root.findall(f"{SS}Worksheet")
              if not _hidden(sheet)]
    title = " ".join(root.findtext(f"{OFFICE}DocumentProperties/{OFFICE}Title", "").split())
    return title, workbook_records(sheets)


def _hidden(sheet: ElementTree.Element) -> bool:
    visible = sheet.findtext(f"{EXCEL}WorksheetOptions/{EXCEL}Visible", "")
    return visible.strip() in ("SheetHidden", "SheetVeryHidden")


def _rows(sheet: ElementTree.Element) -> Iterator[list[str]]:
    for row in sheet.iterfind(f"{SS}Table/{SS}Row"):
        cells: list[str] = []
        for cell in row.iterfind(f"{SS}Cell"):
            column = _count(cell.get(f"{SS}Index"))  # 1-based; skips the empty cells before it
            if column > len(cells) + 1:
                cells += [""] * (min(column, MAX_COLUMNS) - 1 - len(cells))
            cells.append(_cell_text(cell))
            cells += [""] * min(_count(cell.get(f"{SS}MergeAcross")), MAX_COLUMNS - len(cells))
        while cells and not cells[-1]:
            cells.pop()
        if cells:
            yield cells


def _cell_text(cell: ElementTree.Element) -> str:
    """What the cell shows: its data's text (formatted runs joined), a date as its ISO day (and time, if any)."""
    data = cell.find(f"{SS}Data")
    if data is None:
        return ""
    text = " ".join("".join(data.itertext()).split())
    if data.get(f"{SS}Type") == "DateTime" and "T" in text:
        day, _, time = text.partition("T")
        return day if time.strip("0:.") == "" else f"{day} {time[:5]}"
    if data.get(f"{SS}Type") == "Number" and text.endswith(".0"):
        return text[:-2]
    return text


def _count(value: str | None) -> int:
    """A non-negative whole-number attribute (0 when absent or not one)."""
    return int(value) if value is not None and value.strip().isdigit() and len(value.strip()) <= 9 else 0
