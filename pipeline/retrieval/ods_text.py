"""The readable text of an OpenDocument spreadsheet (``.ods``: LibreOffice Calc, Google Sheets' ODF export), read
with the standard library.

Read as an Excel workbook is (:mod:`pipeline.retrieval.xlsx_text`): each visible sheet as a table file
(:mod:`pipeline.retrieval.table_text`), its first non-empty row naming the columns and every row after it a record
of ``column: value`` lines, led by ``sheet: <name>`` when the file has several sheets. A cell reads as the
spreadsheet shows it (the text it stores for display: formula results, currencies, percentages), except a date,
which reads as ``2024-03-01`` (with the time when it has one) whatever the file's date format. Repeated rows and
columns are expanded (a run of empty ones, such as the million rows a sheet ends with, is not); merged-away cells
read empty; hidden sheets, comments, charts and pictures are left out.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from xml.etree import ElementTree

from pipeline.retrieval.odt_text import OFFICE, STYLE, TABLE, TEXT, count_attribute, document_title, opendocument_body
from pipeline.retrieval.table_text import workbook_records

__all__ = ["ods_to_text"]

MAX_REPEAT = 1000  # a repeated row or cell expands at most this far (a sheet's styled tail repeats 16,384 columns)
CELL_TAGS = (f"{{{TABLE}}}table-cell", f"{{{TABLE}}}covered-table-cell")


def ods_to_text(path: Path) -> tuple[str, str]:
    """(title, records): the spreadsheet's title ('' without one) and the records of its visible sheets."""
    parts, body = opendocument_body(path, ".ods", "spreadsheet", "spreadsheet", "a text document")
    hidden = _hidden_table_styles(parts.content)
    sheets = [sheet for sheet in body.iter(f"{{{TABLE}}}table")
              if sheet.get(f"{{{TABLE}}}style-name", "") not in hidden]
    text = workbook_records([(sheet.get(f"{{{TABLE}}}name", ""), _rows(sheet)) for sheet in sheets])
    return document_title(parts), text


def _rows(sheet: ElementTree.Element) -> Iterator[list[str]]:
    for row in sheet.iter(f"{{{TABLE}}}table-row"):
        cells: list[str] = []
        for cell in row:
            if cell.tag not in CELL_TAGS:
                continue
            value = _cell_text(cell)
            repeat = _repeat(cell.get(f"{{{TABLE}}}number-columns-repeated"))
            cells += [value] * repeat
        while cells and not cells[-1]:
            cells.pop()
        if not cells:
            continue  # an empty row, however often repeated, is no record
        yield from [cells] * _repeat(row.get(f"{{{TABLE}}}number-rows-repeated"))


def _cell_text(cell: ElementTree.Element) -> str:
    """What the cell shows; a date as its ISO value."""
    if cell.get(f"{{{OFFICE}}}value-type") == "date":
        value = cell.get(f"{{{OFFICE}}}date-value", "")
        if value:
            day, _, time = value.partition("T")
            return day if time.strip("0:.") == "" else f"{day} {time[:5]}"
    lines = ["".join(paragraph.itertext()).strip() for paragraph in cell.findall(f"{{{TEXT}}}p")]  # no comments
    return "\n".join(line for line in lines if line)


def _repeat(value: str | None) -> int:
    return min(count_attribute(value, digits=9), MAX_REPEAT)


def _hidden_table_styles(content: ElementTree.Element) -> set[str]:
    """The table styles that hide a sheet (``table:display="false"``)."""
    return {style.get(f"{{{STYLE}}}name", "") for style in content.iter(f"{{{STYLE}}}style")
            if style.get(f"{{{STYLE}}}family") == "table"
            and any(props.get(f"{{{TABLE}}}display") == "false"
                    for props in style.iter(f"{{{STYLE}}}table-properties"))}
