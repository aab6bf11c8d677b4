"""The readable text of a PowerPoint (.pptx) file, read with python-pptx (the ``pptx`` extra).

Slides come in order, each opened by its title as a ``## `` heading ("## Q3 revenue"; "## Slide 4" for a slide
without one; an empty untitled slide is left out), so that every chunk of a slide knows which slide it is from and
strips are named by it. Then the text of the slide's other shapes in reading order (top to bottom, then left to
right; grouped shapes read in their place): a body placeholder's paragraphs as list items indented by their outline
level, a text box's as lines, a table as rows (``a | b``; below a header row ``Region: North | Revenue: 2.3 M``), a
chart as its title and its series' values by category, a SmartArt diagram as an outline of its nodes
(:mod:`pipeline.retrieval.smartart`), a picture as its alt text ("Image: ..."; not a caption
PowerPoint wrote itself, nor a file name). The speaker notes follow the slide ("Notes: ..."), since presenters write
there what a slide only hints at. Footers, slide numbers and dates are page furniture and are left out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from models.deps import require
from models.errors import DataError
from pipeline.retrieval.alt_text import authored
from pipeline.retrieval.office_charts import chart_part_lines
from pipeline.retrieval.office_parts import GRAPHIC_DATA, stored_title
from pipeline.retrieval.office_variants import plain_package
from pipeline.retrieval.smartart import diagram_lines
from pipeline.retrieval.table_text import row_line

__all__ = ["pptx_to_text"]

FURNITURE = ("FOOTER", "SLIDE_NUMBER", "DATE")
LISTED = ("BODY", "OBJECT")  # placeholders whose paragraphs PowerPoint shows as an outline
PICTURE = 13  # MSO_SHAPE_TYPE.PICTURE


def pptx_to_text(path: Path) -> tuple[str, str]:
    """(title, text): the file's Title property, else its first slide title ('' when neither), and the slides."""
    pptx = require("pptx", "pptx")
    try:
        presentation = pptx.Presentation(plain_package(path))
    except Exception as exc:  # python-pptx raises zipfile, lxml, KeyError and its own errors for damaged files
        raise DataError(f"{path}: not a readable .pptx file ({type(exc).__name__}: {exc}); an encrypted one "
                        "must be saved without its password first; a PowerPoint 97-2003 file is read from a file named "
                        ".ppt") from exc
    try:
        return _presentation_text(presentation, str(path))
    except DataError:
        raise
    except Exception as exc:  # python-pptx parses a slide's XML when first asked: a damaged one raises its own
        raise DataError(f"{path}: a damaged slide ({type(exc).__name__}: {exc})") from exc  # (lxml's, enum) errors


def _presentation_text(presentation: Any, what: str) -> tuple[str, str]:
    """(title, text) of an opened presentation (``what``: its file, for errors)."""
    blocks: list[str] = []
    first_title = ""
    for number, slide in enumerate(presentation.slides, start=1):
        title_shape = slide.shapes.title
        title = _one_line(title_shape.text_frame.text) if title_shape is not None else ""
        first_title = first_title or title
        skip = {title_shape.shape_id} if title_shape is not None else set()
        content = _shape_blocks(slide.shapes, skip, what)
        if slide.has_notes_slide:
            notes = slide.notes_slide.notes_text_frame
            text = "\n".join(line for line in (notes.text if notes is not None else "").split("\n") if line.strip())
            if text:
                content.append(f"Notes: {text}")
        if title or content:  # an empty slide without a title is no section
            blocks += [f"## {title or f'Slide {number}'}", *content]
    title = stored_title(presentation) or first_title
    return title, "\n\n".join(blocks)


def _table_lines(table: Any) -> str:
    """A table's rows, a line each; when PowerPoint shows its first row as a header (Table Design's "Header Row",
    on for a new table) each cell of the other rows is led by its column's name (:func:`row_line`: only names of at
    most 40 characters), except in a row with merged cells, whose cells cannot be matched to the names."""
    rows = [(list(row.cells), [_one_line(cell.text) for cell in row.cells]) for row in table.rows]
    header = rows[0][1] if rows and table.first_row else None
    lines = [row_line(texts, None if any(c.is_merge_origin or c.is_spanned for c in cells) else header)
             for cells, texts in rows]
    return "\n".join(line for line in lines if line)


def _shape_blocks(shapes: Any, skip: set[int], what: str) -> list[str]:
    """Text blocks of ``shapes`` in reading order, a group's shapes read where the group stands (``what``: the file,
    for errors)."""
    blocks: list[str] = []
    for shape in sorted(shapes, key=_position):
        if shape.shape_id in skip or _placeholder_kind(shape) in FURNITURE:
            continue
        if hasattr(shape, "shapes"):  # a group
            blocks += _shape_blocks(shape.shapes, skip, what)
        elif getattr(shape, "has_chart", False):
            graphic = shape.element.find(f".//{GRAPHIC_DATA}")
            blocks.append("\n".join(chart_part_lines(graphic, shape.part, what)) if graphic is not None else "")
        elif getattr(shape, "has_table", False):
            blocks.append(_table_lines(shape.table))
        elif diagram := diagram_lines(shape.element, shape.part, what, "* "):
            blocks.append("\n".join(diagram))
        elif (described := _alt_text(shape)) is not None:
            blocks.append(f"Image: {described}")
        elif getattr(shape, "has_text_frame", False):
            listed = _placeholder_kind(shape) in LISTED
            lines = [("  " * paragraph.level + "* " if listed else "") + _one_line(paragraph.text)
                     for paragraph in shape.text_frame.paragraphs if paragraph.text.strip()]
            if lines:
                blocks.append("\n".join(lines))
    return [b for b in blocks if b.strip()]


def _alt_text(shape: Any) -> str | None:
    """A picture's alt text as its author wrote it (:func:`pipeline.retrieval.alt_text.authored`); None for other
    shapes."""
    if getattr(shape, "shape_type", None) != PICTURE:
        return None
    return authored(next(iter(shape.element.xpath("./p:nvPicPr/p:cNvPr/@descr")), None))


def _position(shape: Any) -> tuple[int, int]:
    """Top, then left (a shape without a position of its own last)."""
    top, left = shape.top, shape.left
    return (top if top is not None else 1 << 62, left if left is not None else 1 << 62)


def _placeholder_kind(shape: Any) -> str:
    """The placeholder's type name (``BODY``, ``FOOTER``, ...), '' for a shape that is not a placeholder."""
    if not getattr(shape, "is_placeholder", False):
        return ""
    kind = shape.placeholder_format.type
    return str(getattr(kind, "name", kind) or "")


def _one_line(text: str) -> str:
    """Text with its line breaks (PowerPoint's vertical tabs too) as spaces."""
    return " ".join(text.replace("\v", " ").split())
