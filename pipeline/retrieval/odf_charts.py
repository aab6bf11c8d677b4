"""The charts embedded in an OpenDocument file, read as a reader takes one in: its title, then each series with its
values by category ("Revenue: Q2 3.7, Q3 4.1"), as the PowerPoint reader writes a chart
(:mod:`pipeline.retrieval.pptx_text`).

A chart is an embedded object: a ``draw:object`` whose ``xlink:href`` names a folder of the package (``./Object
1``) holding the chart's own ``content.xml``, or, in a flat file, the chart's ``office:document`` inside the element.
Its data is the chart's local table: the header row names the series, each other row is a category with one value
per series. The package is opened once for all the charts of a file (:class:`EmbeddedObjects`): opened again for
each, a document of 2,000 charts took 8 s to read, most of it in re-reading the zip's directory.
"""

from __future__ import annotations

import math
import zipfile
from pathlib import Path
from types import TracebackType
from xml.etree import ElementTree

from models.errors import DataError
from pipeline.retrieval.zipped_xml import ZIP_ERRORS, part_xml

__all__ = ["CHART_POINTS", "MAX_SERIES", "EmbeddedObjects", "chart_lines", "series_line"]

OFFICE = "{urn:oasis:names:tc:opendocument:xmlns:office:1.0}"
DRAW = "{urn:oasis:names:tc:opendocument:xmlns:drawing:1.0}"
CHART = "{urn:oasis:names:tc:opendocument:xmlns:chart:1.0}"
TABLE = "{urn:oasis:names:tc:opendocument:xmlns:table:1.0}"
TEXT = "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}"
XLINK = "{http://www.w3.org/1999/xlink}"
CHART_POINTS = 50  # values read per series, as for PowerPoint charts
MAX_SERIES = 50


class EmbeddedObjects:
    """The zipped OpenDocument file at ``path`` as the source of its embedded objects' content: opened on the first
    one asked for and kept open until :meth:`close` (or the end of a ``with`` block)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._archive: zipfile.ZipFile | None = None
        self._members: frozenset[str] = frozenset()

    def content(self, href: str) -> ElementTree.Element | None:
        """The parsed ``content.xml`` of the object at ``href`` (``./Object 1``); None when the package has none."""
        member = f"{href.removeprefix('./').strip('/')}/content.xml"
        if member.startswith("/content.xml") or ".." in member.split("/"):
            return None
        try:
            if self._archive is None:
                self._archive = zipfile.ZipFile(self.path)
                self._members = frozenset(self._archive.namelist())
            return part_xml(self.path, self._archive, member) if member in self._members else None
        except ZIP_ERRORS as exc:  # a damaged deflate stream, an unknown compression
            raise DataError(f"{self.path}: not a readable OpenDocument file ({exc})") from exc

    def close(self) -> None:
        if self._archive is not None:
            self._archive.close()
            self._archive = None

    def __enter__(self) -> EmbeddedObjects:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()


def chart_lines(objects: EmbeddedObjects | None, frame: ElementTree.Element) -> list[str]:
    """The chart in ``frame`` (a ``draw:frame`` of the file whose embedded ``objects`` are given; None for a flat file,
    whose charts are inline) as lines: "Chart: title", then a line per series; [] when the frame holds no chart or
    its chart has nothing to say."""
    embedded = frame.find(f"{DRAW}object")
    if embedded is None:
        return []
    document = embedded.find(f"{OFFICE}document")
    if document is None and objects is not None:
        document = objects.content(embedded.get(f"{XLINK}href", ""))
    chart = document.find(f".//{OFFICE}chart/{CHART}chart") if document is not None else None
    if chart is None:
        return []
    title = _text(chart.find(f"{CHART}title"))
    lines = [f"Chart: {title}"] if title else []
    return lines + _series_lines(chart.find(f"{TABLE}table"))


def _series_lines(table: ElementTree.Element | None) -> list[str]:
    """Each series of a chart's local table: "name: category value, ...", at most ``CHART_POINTS`` values."""
    if table is None:
        return []
    header = [_text(cell) for cell in table.findall(f"{TABLE}table-header-rows/{TABLE}table-row/{TABLE}table-cell")]
    rows = [row.findall(f"{TABLE}table-cell") for row in table.findall(f"{TABLE}table-rows/{TABLE}table-row")]
    lines = []
    for column, name in enumerate(header[1:MAX_SERIES + 1], start=1):
        points = [f"{_text(row[0])} {_value(row[column])}" for row in rows if len(row) > column and _value(row[column])]
        if line := series_line(name, points):
            lines.append(line)
    return lines


def series_line(name: str, points: list[str]) -> str:
    """A chart series as one line, "name: category value, ..." (its first :data:`CHART_POINTS` points; "Series" for
    a series without a name), as every chart reader writes one; '' without points."""
    return f"{' '.join(name.split()) or 'Series'}: {', '.join(points[:CHART_POINTS])}" if points else ""


def _value(cell: ElementTree.Element) -> str:
    """A data cell's number (``office:value``, written as Python's ``g`` format), else its text; '' for an empty
    cell (LibreOffice writes ``NaN`` there)."""
    value = cell.get(f"{OFFICE}value")
    try:
        number = float(value) if value is not None else None
    except ValueError:
        number = None
    if number is None:
        return _text(cell)
    return "" if math.isnan(number) else f"{number:g}"


def _text(element: ElementTree.Element | None) -> str:
    return " ".join("".join(element.itertext()).split()) if element is not None else ""
