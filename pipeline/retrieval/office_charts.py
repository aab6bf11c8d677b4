"""The charts of Word and PowerPoint files, read as a reader takes one in: its title, then each series with its values
by category ("Revenue: Q2 3.7, Q3 4.1"), as the OpenDocument readers write theirs (:mod:`.odf_charts`).

A chart is a DrawingML chart part ([ISO/IEC 29500] ``c:chartSpace``, ``/word/charts/chart1.xml``) that a frame names
by its ``c:chart r:id`` relationship. Its series keep a cache of the values and category names they plot
(``c:numCache``, ``c:strCache``), written by Office with the chart; the embedded workbook they came from is not
needed. python-docx does not open charts at all, so their numbers, often found nowhere else in a report, could not be
found.
"""

from __future__ import annotations

import math
from typing import Any
from xml.etree import ElementTree

from pipeline.retrieval.odf_charts import CHART_POINTS, MAX_SERIES, series_line
from pipeline.retrieval.office_parts import R_ID, drawing_text, related_xml

__all__ = ["CHART_URI", "chart_part_lines"]

CHART_URI = "http://schemas.openxmlformats.org/drawingml/2006/chart"
C = f"{{{CHART_URI}}}"


def chart_part_lines(graphic_data: Any, part: Any, what: str) -> list[str]:
    """The chart that ``graphic_data`` (an lxml ``a:graphicData`` of a chart; ``part``: the python-docx or python-pptx
    part it is in) names, as lines: "Chart: title", then a line per series; [] when the chart part is missing or says
    nothing. ``what`` names the file in errors."""
    reference = graphic_data.find(f"{C}chart")
    space = related_xml(part, reference.get(R_ID) if reference is not None else None, what, "a chart part")
    chart = space.find(f"{C}chart") if space is not None else None
    if chart is None:
        return []
    title = _title(chart.find(f"{C}title"))
    lines = [f"Chart: {title}"] if title else []
    plot = chart.find(f"{C}plotArea")
    for series in (plot.iter(f"{C}ser") if plot is not None else ()):
        if len(lines) > MAX_SERIES:
            break
        if line := _series_line(series):
            lines.append(line)
    return lines


def _series_line(series: ElementTree.Element) -> str:
    """"name: category value, ..." of one series, at most :data:`CHART_POINTS` points; '' without values."""
    name = _cached_points(series.find(f"{C}tx"))
    categories = _cached_points(_first(series, "cat", "xVal"))  # a scatter chart's x and y values
    values = _cached_points(_first(series, "val", "yVal"))
    points = []
    for index in sorted(values):
        number = _number(values[index])
        if number is None:
            continue
        category = categories.get(index, str(index + 1))
        points.append(f"{category} {number:g}")
        if len(points) == CHART_POINTS:
            break
    return series_line(name.get(0, ""), points)


def _first(series: ElementTree.Element, *tags: str) -> ElementTree.Element | None:
    return next((found for tag in tags if (found := series.find(f"{C}{tag}")) is not None), None)


def _cached_points(holder: ElementTree.Element | None) -> dict[int, str]:
    """Index -> text of the cached points under ``holder`` (a series' ``c:tx``, ``c:cat`` or ``c:val``; a category
    of several levels reads its innermost level); a literal ``c:v`` name as point 0."""
    if holder is None:
        return {}
    cache = next((found for tag in ("strCache", "numCache", "strLit", "numLit", "lvl")
                  if (found := holder.find(f".//{C}{tag}")) is not None), None)
    if cache is None:
        literal = holder.find(f"{C}v")
        return {0: literal.text or ""} if literal is not None else {}
    points = {}
    for point in cache.findall(f"{C}pt"):
        try:
            index = int(point.get("idx", ""))
        except ValueError:
            continue
        points[index] = " ".join((point.findtext(f"{C}v") or "").split())
    return points


def _number(text: str) -> float | None:
    try:
        number = float(text)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _title(title: ElementTree.Element | None) -> str:
    """A chart title's text, its paragraphs joined by spaces, or the cell it is taken from ('' without a title or
    with one Office makes up)."""
    if title is None:
        return ""
    return drawing_text(title) or _cached_points(title.find(f"{C}tx")).get(0, "")  # a title taken from a cell
