"""The readable text of an OpenDocument presentation (``.odp``: LibreOffice Impress), read with the standard
library.

Read as a PowerPoint file is (:mod:`pipeline.retrieval.pptx_text`): slides in order, each opened by its title as a
``## `` heading ("## Slide 4" for a slide without one; an empty untitled slide is left out), then its other frames
in reading order (top to bottom, then left to right; a group's frames where the group stands): text boxes (frames,
and shapes that hold text, as a PowerPoint text box becomes) as an OpenDocument text's paragraphs are read
(:mod:`pipeline.retrieval.odt_text`: list items with their labels, tables as rows), charts as their title and series
(:mod:`pipeline.retrieval.odf_charts`), pictures by their alt text ("Image: ...", unless a program wrote it), then
the speaker notes ("Notes: ..."). Footers, dates and slide numbers are page furniture and are left out.
"""

from __future__ import annotations

import re
from pathlib import Path
from xml.etree import ElementTree

from pipeline.retrieval.odf_charts import chart_lines
from pipeline.retrieval.odt_text import (
    DRAW,
    SVG,
    TABLE,
    TextReader,
    document_title,
    frame_alt_text,
    holds_text,
    opendocument_body,
)

__all__ = ["odp_to_text"]

PRESENTATION = "urn:oasis:names:tc:opendocument:xmlns:presentation:1.0"
FURNITURE = frozenset({"footer", "date-time", "page-number", "header"})
LENGTH = re.compile(r"^\s*(-?[\d.]+)\s*(cm|mm|in|pt|pc|px)?\s*$")
TO_POINTS = {"cm": 72 / 2.54, "mm": 72 / 25.4, "in": 72.0, "pt": 1.0, "pc": 12.0, "px": 0.75, None: 1.0}


def odp_to_text(path: Path) -> tuple[str, str]:
    """(title, text): the presentation's title, else its first slide title ('' when neither), and the slides."""
    parts, body = opendocument_body(path, ".odp", "presentation", "presentation", "a text document")
    with TextReader.of(parts) as reader:
        blocks, first_title = _slides(reader, body)
    return document_title(parts) or first_title, "\n\n".join(blocks)


def _slides(reader: TextReader, body: ElementTree.Element) -> tuple[list[str], str]:
    """Each slide's heading (its title, else "Slide N") and blocks, and the first slide title ('' when none)."""
    blocks: list[str] = []
    first_title = ""
    for number, page in enumerate(body.findall(f"{{{DRAW}}}page"), start=1):
        title = ""
        content: list[str] = []
        for frame in _frames_in_reading_order(page):
            kind = frame.get(f"{{{PRESENTATION}}}class", "")
            if kind in FURNITURE:
                continue
            if kind == "title" and not title:
                title = " ".join(" ".join(reader.read(frame)).split())
                continue
            content += _frame_blocks(reader, frame)
        notes = page.find(f"{{{PRESENTATION}}}notes")
        if notes is not None:  # the notes' text, not the notes page's slide number
            text = "\n".join(block for frame in _frames_in_reading_order(notes)
                             if frame.get(f"{{{PRESENTATION}}}class", "") not in FURNITURE
                             for block in _frame_blocks(reader, frame))
            if text:
                content.append(f"Notes: {text}")
        first_title = first_title or title
        if title or content:  # an empty slide without a title is no section
            blocks += [f"## {title or f'Slide {number}'}", *content]
    return blocks, first_title


def _frames_in_reading_order(container: ElementTree.Element) -> list[ElementTree.Element]:
    """The frames of a slide, top to bottom and then left to right, a group's frames where the group stands."""
    placed: list[tuple[float, float, list[ElementTree.Element]]] = []
    for child in container:
        if child.tag == f"{{{DRAW}}}g":
            inner = _frames_in_reading_order(child)
            if inner:
                placed.append((*_position(inner[0]), inner))
        elif child.tag == f"{{{DRAW}}}frame" or (child.tag.startswith(f"{{{DRAW}}}") and holds_text(child)):
            placed.append((*_position(child), [child]))  # a frame, or a shape with text (a text box from PowerPoint)
    placed.sort(key=lambda item: (item[0], item[1]))
    return [frame for _, _, frames in placed for frame in frames]


def _position(frame: ElementTree.Element) -> tuple[float, float]:
    return _points(frame.get(f"{{{SVG}}}y")), _points(frame.get(f"{{{SVG}}}x"))


def _points(length: str | None) -> float:
    """An ODF length ("2.5cm", "1in") in points; 0 when absent or unreadable."""
    found = LENGTH.match(length or "")
    if not found:
        return 0.0
    try:
        return float(found.group(1)) * TO_POINTS[found.group(2)]
    except ValueError:
        return 0.0


def _frame_blocks(reader: TextReader, frame: ElementTree.Element) -> list[str]:
    """A frame's text, table rows, chart (:mod:`pipeline.retrieval.odf_charts`) or picture alt text; a shape's
    text."""
    if frame.tag != f"{{{DRAW}}}frame":
        return reader.read(frame)
    if frame.find(f"{{{DRAW}}}text-box") is not None or frame.find(f"{{{TABLE}}}table") is not None:
        return reader.read(frame)
    if chart := chart_lines(reader.package, frame):
        return ["\n".join(chart)]
    if frame.find(f"{{{DRAW}}}image") is not None or frame.find(f"{{{DRAW}}}object") is not None:
        alt = frame_alt_text(frame)
        return [f"Image: {alt}"] if alt else []
    return []
