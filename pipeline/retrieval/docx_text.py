"""The readable text of a Word (.docx) file, read with python-docx (the ``docx`` extra).

Paragraphs and tables come in document order. Heading and Title styles are written as Markdown headings,
so chunking keeps each section with its heading and sentence strips never quote one; list paragraphs
keep the label Word shows them with (``- `` for a bullet, ``3. ``, ``2.1. ``, ``b) ``: see
:mod:`pipeline.retrieval.docx_numbering`); a table row is one paragraph of its cells; a picture reads as its alt
text ("Image: ...") after its paragraph, unless a program wrote it (:mod:`pipeline.retrieval.alt_text`); a text
box's paragraphs and tables (a cover page's title, a flyer's panels, a form's boxes), a chart's title and series
(:mod:`pipeline.retrieval.office_charts`) and a SmartArt diagram's outline (:mod:`pipeline.retrieval.smartart`)
come after the paragraph they are anchored in, a box read once although
Word stores each twice (a DrawingML shape and its VML fallback for older readers).
Text inside content controls (a cover page, a form's filled-in fields, a repeating section's table rows) and
tracked insertions reads as Word shows it, deleted text does not, and a table of contents is left out (it repeats
the headings); python-docx's own paragraph and table text misses all of these. An imported chunk (``w:altChunk``: a
web page or archive, Rich Text or Word file the document holds whole) is read by its own reader in its place. Page
headers and footers are not part of the body and are left out, like a web page's furniture.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from models.deps import require
from models.errors import DataError
from pipeline.retrieval.alt_text import authored
from pipeline.retrieval.docx_numbering import ListLabels
from pipeline.retrieval.office_charts import CHART_URI, chart_part_lines
from pipeline.retrieval.office_parts import GRAPHIC_DATA, R_ID, stored_title
from pipeline.retrieval.office_variants import plain_package
from pipeline.retrieval.smartart import DIAGRAM_URI, diagram_lines
from pipeline.retrieval.table_text import row_line

__all__ = ["docx_to_text"]

logger = logging.getLogger(__name__)
HEADING_STYLE = re.compile(r"heading\s*([1-6])$", re.IGNORECASE)
W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
NOT_OWN = frozenset({"{http://schemas.openxmlformats.org/markup-compatibility/2006}Fallback", f"{W}txbxContent"})
CHUNK_SUFFIXES = frozenset({".mht", ".mhtml", ".htm", ".html", ".xhtml", ".rtf", ".txt", ".docx"})
CHUNK_TYPES = {"message/rfc822": ".mht", "multipart/related": ".mht", "text/html": ".html",
               "application/xhtml+xml": ".xhtml", "application/rtf": ".rtf", "text/rtf": ".rtf", "text/plain": ".txt",
               "application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml": ".docx"}
BLOCKS = (f"{W}p", f"{W}tbl", f"{W}altChunk")
RUNS_NOT_SHOWN = frozenset({f"{W}del", f"{W}moveFrom", f"{W}rt"})  # deleted, moved away, a ruby's phonetic guide


def docx_to_text(path: Path) -> tuple[str, str]:
    """(title, text): the document's Title property, else its first heading ('' when neither), and its
    paragraphs separated by blank lines."""
    docx = require("docx", "docx")
    try:
        document = docx.Document(plain_package(path))
    except Exception as exc:  # python-docx raises zipfile, lxml and its own errors for damaged files
        raise DataError(f"{path}: not a readable .docx file ({type(exc).__name__}: {exc}); an encrypted one must "
                        "be saved without its password first, and a Word 97-2003 one is read from a file named "
                        ".doc") from exc
    body = document.element.body
    if body is None:
        raise DataError(f"{path}: its document part has no body (w:body); the file is damaged")
    paragraphs = _blocks(body, document, ListLabels(document), str(path))
    title = stored_title(document)
    if not title:
        title = next((p.lstrip("#").strip() for p in paragraphs if p.startswith("#")), "")
    return title, "\n\n".join(paragraphs)


def _blocks(container: Any, parent: Any, labels: ListLabels, what: str) -> list[str]:
    """The paragraphs and table rows of the body, a text box or a content control (``container``, an lxml element;
    ``parent``: the python-docx object its paragraphs hang from), imported chunks read in their place, each paragraph
    followed by its pictures' alt text, its charts, its SmartArt diagrams' outlines and its text boxes' blocks
    (``what``: the file, for errors)."""
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    paragraphs: list[str] = []
    for element in _block_elements(container):
        if element.tag == f"{W}tbl":
            paragraphs += _table_rows(Table(element, parent))
            continue
        if element.tag == f"{W}altChunk":
            paragraphs += _imported_chunk(element, parent.part, what)
            continue
        block = Paragraph(element, parent)
        text = _paragraph_text(element)
        if text.strip():
            paragraphs.append(_paragraph(text, labels.label(block), labels.styles.of(block)))
        paragraphs += [f"Image: {alt}" for alt in _pictures(block)]
        for graphic in element.iter(GRAPHIC_DATA):
            uri = graphic.get("uri")
            if uri not in (DIAGRAM_URI, CHART_URI) or not _own(graphic, element):
                continue
            if uri == DIAGRAM_URI:
                paragraphs += diagram_lines(graphic, block.part, what, "- ")
            elif chart := chart_part_lines(graphic, block.part, what):
                paragraphs.append("\n".join(chart))
        for box in _text_boxes(element):
            paragraphs += _blocks(box, block, labels, what)
    return paragraphs


def _block_elements(container: Any, tags: tuple[str, ...] = BLOCKS) -> Iterator[Any]:
    """The elements of ``container`` named in ``tags`` (paragraphs, tables and imported chunks; or a table's rows), in
    order, those inside content controls (``w:sdt``: a cover page, a form's sections, a repeating section's rows) and
    custom XML too; a table of contents' control is left out (it repeats the headings)."""
    for child in container:
        if child.tag in tags:
            yield child
        elif child.tag == f"{W}sdt" and not _is_table_of_contents(child):
            for content in child.iterchildren(f"{W}sdtContent"):
                yield from _block_elements(content, tags)
        elif child.tag == f"{W}customXml":
            yield from _block_elements(child, tags)


def _imported_chunk(chunk: Any, part: Any, what: str) -> list[str]:
    """The paragraphs of an imported chunk (``w:altChunk``): a web page, web archive, Rich Text, text or Word file
    that the document holds whole and Word shows in its place. "Export to Word" in many web applications (html-docx-js
    and its kin) writes the whole document so. Read by the reader of its type; one that cannot be read is logged and
    left out, as an unreadable attachment is."""
    from pipeline.retrieval.archives import DocumentText  # (documents imports this module)

    related = part.related_parts.get(chunk.get(R_ID, ""))
    if related is None:
        return []
    suffix = Path(str(related.partname)).suffix.lower()
    suffix = suffix if suffix in CHUNK_SUFFIXES else CHUNK_TYPES.get(related.content_type, "")
    if not suffix:
        logger.info("%s: an imported chunk of type %r not read", what, related.content_type)
        return []
    document = DocumentText.from_bytes(bytes(related.blob), f"chunk{suffix}", named=f"{what} (imported chunk)")
    if document.error is not None:
        logger.info("%s", document.error)
        return []
    return [block for block in document.text.split("\n\n") if block.strip()]


def _is_table_of_contents(control: Any) -> bool:
    gallery = control.find(f"{W}sdtPr/{W}docPartObj/{W}docPartGallery")
    return gallery is not None and gallery.get(f"{W}val", "").lower().startswith("table of contents")


def _paragraph_text(paragraph: Any) -> str:
    """The paragraph's shown text: its runs in order, those in hyperlinks, content controls (a form's filled-in
    fields), tracked insertions and simple fields too; not deleted or moved-away text, a phonetic guide, or a text
    box's runs (read as the box's own paragraphs)."""
    return "".join(run.text for run in paragraph.iter(f"{W}r") if _own(run, paragraph, RUNS_NOT_SHOWN))


def _text_boxes(paragraph: Any) -> list[Any]:
    """The ``w:txbxContent`` elements of a paragraph's own text boxes, in order."""
    return [box for box in paragraph.iter(f"{W}txbxContent") if _own(box, paragraph)]


def _own(element: Any, paragraph: Any, outside: frozenset[str] = frozenset()) -> bool:
    """Whether ``element`` belongs to ``paragraph`` itself: not to one of its text boxes (read with the box), nor to
    a VML fallback (the same shape again, for older readers), nor to any element named in ``outside``."""
    ancestor = element.getparent()
    while ancestor is not None and ancestor is not paragraph:
        if ancestor.tag in NOT_OWN or ancestor.tag in outside:
            return False
        ancestor = ancestor.getparent()
    return True


def _paragraph(paragraph_text: str, label: str | None, paragraph_style: Any) -> str:
    """A paragraph as Markdown: a heading (by its ``paragraph_style``), a list item (the ``label`` Word shows:
    "- ", "3. ", "2.1. "), or plain text."""
    text = re.sub(r"[ \t]+", " ", paragraph_text).strip()
    style = (paragraph_style.name if paragraph_style is not None else "") or ""
    level = HEADING_STYLE.search(style)
    if level:
        return "#" * int(level.group(1)) + " " + " ".join(text.split())
    if style.lower() == "title":
        return "# " + " ".join(text.split())
    return (label or "") + text


def _pictures(paragraph: Any) -> list[str]:
    """The authored alt text of the pictures in a paragraph (inline or floating), in order."""
    found = paragraph._p.xpath(".//wp:docPr")  # python-docx has no public API for a picture's alt text
    return [alt for alt in (authored(p.get("descr", "")) for p in found if _own(p, paragraph._p)) if alt]


def _table_rows(table: Any) -> list[str]:
    """A table's rows, a line each; below a header row (Word's "Repeat as header row": the row's ``w:tblHeader``)
    each cell led by its column's name (:func:`row_line`), except in a row with merged cells."""
    from docx.table import _Cell, _Row

    rows: list[str] = []
    header: list[str] | None = None
    for tr in _block_elements(table._tbl, (f"{W}tr",)):  # a repeating section's rows too
        row = _Row(tr, table)
        try:
            spans = row.cells
        except ValueError:  # a row inside a content control: python-docx cannot find the row above a merged cell
            spans = tuple(_Cell(tc, table) for tc in tr.tc_lst)
        cells = list({id(c._tc): _cell_text(c._tc) for c in spans}.values())  # a merged cell is listed per column
        if not rows and header is None and _repeats_as_header(row):
            header = cells
        line = row_line(cells, header if len(cells) == len(spans) else None)  # merged cells: which name is whose?
        if line:
            rows.append(line)
    return rows


def _cell_text(cell: Any) -> str:
    """A cell's shown text, its paragraphs (those in content controls too) a line each."""
    return "\n".join(_paragraph_text(p) for p in _block_elements(cell) if p.tag == f"{W}p").strip()


def _repeats_as_header(row: Any) -> bool:
    """Whether Word repeats this row atop each page of its table: the table's header row."""
    flags = row._tr.xpath("./w:trPr/w:tblHeader/@w:val") or (["1"] if row._tr.xpath("./w:trPr/w:tblHeader") else [])
    return bool(flags) and flags[0].lower() not in ("0", "false", "off")
