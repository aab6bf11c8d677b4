"""The readable text of a Word (.docx) file, read with python-docx (the ``docx`` extra).

Paragraphs and tables come in document order. Heading and Title styles are written as Markdown headings,
so chunking keeps each section with its heading and sentence strips never quote one; list paragraphs
keep a ``- `` bullet, or their number (``1. ``, ``2. ``) in a "List Number" style; a table row is one paragraph
of its cells. Page headers and footers are not part of
the body and are left out, like a web page's furniture.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from models.deps import require
from models.errors import DataError

__all__ = ["docx_to_text"]

HEADING_STYLE = re.compile(r"heading\s*([1-6])$", re.IGNORECASE)


def docx_to_text(path: Path) -> tuple[str, str]:
    """(title, text): the document's Title property, else its first heading ('' when neither), and its
    paragraphs separated by blank lines."""
    docx = require("docx", "docx")
    try:
        document = docx.Document(str(path))
    except Exception as exc:  # python-docx raises zipfile, lxml and its own errors for damaged files
        raise DataError(f"{path}: not a readable .docx file ({type(exc).__name__}: {exc}); an encrypted or "
                        "older .doc file must be saved as .docx first") from exc
    paragraphs: list[str] = []
    step = 0  # the number of the next item of a numbered list ("List Number" styles), 0 outside one
    for block in document.iter_inner_content():
        if isinstance(block, docx.table.Table):
            paragraphs += _table_rows(block)
            step = 0
        elif block.text.strip():
            style = _style(block).lower()
            step = step + 1 if style.startswith("list") and "number" in style else 0
            paragraphs.append(_paragraph(block, step))
    title = (document.core_properties.title or "").strip()
    if not title:
        title = next((p.lstrip("#").strip() for p in paragraphs if p.startswith("#")), "")
    return title, "\n\n".join(paragraphs)


def _style(paragraph: Any) -> str:
    return (paragraph.style.name if paragraph.style is not None else "") or ""


def _paragraph(paragraph: Any, step: int = 0) -> str:
    """The paragraph as Markdown: a heading, a list item (numbered ``step.`` when ``step``), or plain text."""
    text = re.sub(r"[ \t]+", " ", paragraph.text).strip()
    style = _style(paragraph)
    level = HEADING_STYLE.search(style)
    if level:
        return "#" * int(level.group(1)) + " " + " ".join(text.split())
    if style.lower() == "title":
        return "# " + " ".join(text.split())
    if style.lower().startswith("list"):
        return f"{step}. {text}" if step else "- " + text
    return text


def _table_rows(table: Any) -> list[str]:
    rows = []
    for row in table.rows:
        cells = list({id(c._tc): c.text.strip() for c in row.cells}.values())  # a merged cell is listed per column
        line = " | ".join(c for c in cells if c)
        if line:
            rows.append(line)
    return rows
