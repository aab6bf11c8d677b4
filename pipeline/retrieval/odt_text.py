"""The readable text of an OpenDocument text file (``.odt``: LibreOffice, OpenOffice, Google Docs' ODF export),
read with the standard library.

Read as a Word file is (:mod:`pipeline.retrieval.docx_text`): paragraphs and tables in document order, headings
(``text:h`` of outline level N, and the Title style) written as Markdown headings, list items with the label the
list's style shows (``- `` for a bullet, ``3. ``, ``b) ``, ``iv. ``), a table row as one paragraph of its cells,
text boxes after the paragraph they are anchored in, a chart as its title and series
(:mod:`pipeline.retrieval.odf_charts`), and a picture as its alt text ("Image: ...") unless a program wrote it
(:mod:`pipeline.retrieval.alt_text`). Left out, as a reader of the page would skip them or never see them:
tables of contents and other generated indexes, comments, footnote bodies, and the text that tracked changes
deleted. The title is the document's own (``meta.xml``), else its first heading. Parts are read through
:mod:`pipeline.retrieval.zipped_xml` (a damaged file is an error naming it).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from xml.etree import ElementTree

from models.errors import DataError
from pipeline.retrieval.alt_text import authored
from pipeline.retrieval.numerals import list_number
from pipeline.retrieval.odf_charts import EmbeddedObjects, chart_lines
from pipeline.retrieval.table_text import row_line
from pipeline.retrieval.zipped_xml import opened_zip, part_xml, xml_file

__all__ = ["OpenDocumentParts", "TextReader", "count_attribute", "document_title", "frame_alt_text", "holds_text",
           "list_styles", "odt_to_text", "opendocument_body", "opendocument_parts", "title_styles"]

OFFICE = "urn:oasis:names:tc:opendocument:xmlns:office:1.0"
TEXT = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
TABLE = "urn:oasis:names:tc:opendocument:xmlns:table:1.0"
DRAW = "urn:oasis:names:tc:opendocument:xmlns:drawing:1.0"
STYLE = "urn:oasis:names:tc:opendocument:xmlns:style:1.0"
SVG = "urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0"
DC = "http://purl.org/dc/elements/1.1/"
SHAPE_TEXT = frozenset({f"{{{TEXT}}}p", f"{{{TEXT}}}h", f"{{{TEXT}}}list"})  # what a shape's own text is made of
NOT_READ = {f"{{{TEXT}}}{name}" for name in ("table-of-content", "alphabetical-index", "illustration-index",
                                              "table-index", "object-index", "user-index", "bibliography",
                                              "tracked-changes", "note", "sequence-decls", "variable-decls",
                                              "user-field-decls")} | {f"{{{OFFICE}}}annotation",
                                                                       f"{{{OFFICE}}}annotation-end",
                                                                       f"{{{OFFICE}}}forms"}
FLAT_SNIFF = 64  # bytes enough to tell XML from a zip


@dataclass(frozen=True)
class OpenDocumentParts:
    """The parsed parts of an OpenDocument file that its text is read from (styles and meta are optional)."""

    content: ElementTree.Element
    styles: ElementTree.Element | None
    meta: ElementTree.Element | None
    package: Path | None = None  # the zip its embedded objects (charts) are read from; None for a flat file


def opendocument_parts(path: Path, kind: str) -> OpenDocumentParts:
    """content.xml, styles.xml and meta.xml of the ``kind`` (``.odt``, ``.ods``) file at ``path``; of a flat
    OpenDocument file (``.fodt``, ``.fods``, ``.fodp``: the same XML in one document, as LibreOffice saves "Flat XML"),
    its one ``office:document``, which holds all three."""
    damaged = "not an OpenDocument file, or a damaged one"
    with path.open("rb") as handle:
        flat = handle.read(FLAT_SNIFF).lstrip(b"\xef\xbb\xbf \t\r\n").startswith((b"<?xml", b"<office:document"))
    if flat:
        root = xml_file(path, f"{{{OFFICE}}}document", "a flat OpenDocument file", damaged)
        return OpenDocumentParts(content=root, styles=None, meta=root)
    with opened_zip(path, f"not a readable {kind} file; an {kind} file is a zip of OpenDocument XML, and a "
                          "password-protected one must be saved without its password first") as archive:
        names = set(archive.namelist())
        return OpenDocumentParts(
            content=part_xml(path, archive, "content.xml", damaged),
            styles=part_xml(path, archive, "styles.xml", damaged) if "styles.xml" in names else None,
            meta=part_xml(path, archive, "meta.xml", damaged) if "meta.xml" in names else None, package=path)


def opendocument_body(path: Path, suffix: str, body: str, what: str, other: str
                      ) -> tuple[OpenDocumentParts, ElementTree.Element]:
    """The parts of the ``suffix`` file at ``path`` and its ``office:<body>`` element (``what`` it holds); a file
    without one (``other`` kinds of document saved under this suffix) is a DataError."""
    parts = opendocument_parts(path, suffix)
    found = parts.content.find(f"{{{OFFICE}}}body/{{{OFFICE}}}{body}")
    if found is None:
        raise DataError(f"{path}: content.xml holds no {what} (office:{body}); is it {other} saved as {suffix}?")
    return parts, found


def document_title(parts: OpenDocumentParts) -> str:
    """The title the document's properties give it ('' without one)."""
    found = parts.meta.findtext(f".//{{{DC}}}title") if parts.meta is not None else None
    return re.sub(r"\s+", " ", found or "").strip()


def odt_to_text(path: Path) -> tuple[str, str]:
    """(title, text): the document's title, else its first heading ('' when neither), and its paragraphs
    separated by blank lines."""
    parts, body = opendocument_body(path, ".odt", "text", "text body", "a spreadsheet or presentation")
    with TextReader.of(parts) as reader:
        reader.blocks(body)
    title = document_title(parts) or next((p.lstrip("#").strip() for p in reader.paragraphs if p.startswith("#")), "")
    return title, "\n\n".join(reader.paragraphs)


@dataclass
class TextReader:
    """Paragraphs from the body's elements, in order (also the text boxes of a presentation's frames)."""

    list_styles: dict[str, dict[int, tuple[str, str, str]]]  # style -> level -> (num-format, prefix, suffix)
    title_styles: set[str]
    paragraphs: list[str] = field(default_factory=list)
    package: EmbeddedObjects | None = None  # where embedded charts are read from (None: a flat file's are inline)

    @classmethod
    def of(cls, parts: OpenDocumentParts) -> TextReader:
        """A reader that knows the document's list and title styles; used in a ``with`` block, which closes the
        package its charts were read from."""
        return cls(list_styles(parts.content, parts.styles), title_styles(parts.content, parts.styles),
                   package=EmbeddedObjects(parts.package) if parts.package is not None else None)

    def __enter__(self) -> TextReader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.package is not None:
            self.package.close()

    def read(self, element: ElementTree.Element) -> list[str]:
        """The paragraphs of ``element``'s children, apart from those read before."""
        start = len(self.paragraphs)
        self.blocks(element)
        found = self.paragraphs[start:]
        del self.paragraphs[start:]
        return found

    def blocks(self, parent: ElementTree.Element, list_style: str = "", depth: int = 0) -> None:
        for child in parent:
            tag = child.tag
            if tag in NOT_READ:
                continue
            if tag == f"{{{TEXT}}}h":
                level = min(6, max(1, count_attribute(child.get(f"{{{TEXT}}}outline-level"))))
                self._paragraph(child, "#" * level + " ")
            elif tag == f"{{{TEXT}}}p":
                title = child.get(f"{{{TEXT}}}style-name", "") in self.title_styles
                self._paragraph(child, "# " if title else "")
            elif tag == f"{{{TEXT}}}list":
                self._list(child, child.get(f"{{{TEXT}}}style-name") or list_style, depth + 1)
            elif tag == f"{{{TABLE}}}table":
                self.paragraphs += _table_rows(child)
            else:  # sections, text boxes' frames at body level and other containers: their paragraphs
                self.blocks(child, list_style, depth)

    def _list(self, element: ElementTree.Element, style: str, depth: int) -> None:
        number = 1
        for item in element:
            if item.tag not in (f"{{{TEXT}}}list-item", f"{{{TEXT}}}list-header"):
                continue
            number = count_attribute(item.get(f"{{{TEXT}}}start-value"), number)
            label = self._label(style, depth, number) if item.tag.endswith("list-item") else ""
            first = len(self.paragraphs)
            self.blocks(item, style, depth)
            own_text = len(item) > 0 and item[0].tag == f"{{{TEXT}}}p"  # not a list nested at once, not a heading
            if len(self.paragraphs) > first and label and own_text:
                self.paragraphs[first] = "  " * (depth - 1) + label + self.paragraphs[first]
            if item.tag.endswith("list-item"):
                number += 1

    def _label(self, style: str, depth: int, number: int) -> str:
        num_format, prefix, suffix = self.list_styles.get(style, {}).get(depth, ("", "", ""))
        if not num_format:
            return "- "
        return f"{prefix}{list_number(number, num_format)}{suffix} "

    def _paragraph(self, element: ElementTree.Element, lead: str) -> None:
        text = " ".join(_words(element).split()) if lead.startswith("#") else _words(element).strip()
        if text:
            self.paragraphs.append(lead + text)
        for frame in _drawings(element):
            if frame.tag != f"{{{DRAW}}}frame":  # a shape with text of its own (a Word text box LibreOffice imported)
                self.blocks(frame)
                continue
            boxes = frame.findall(f"{{{DRAW}}}text-box")
            for box in boxes:
                self.blocks(box)
            if boxes:
                continue
            if chart := chart_lines(self.package, frame):
                self.paragraphs.append("\n".join(chart))
            elif alt := frame_alt_text(frame):
                self.paragraphs.append(f"Image: {alt}")


def _drawings(element: ElementTree.Element) -> Iterator[ElementTree.Element]:
    """The frames of a paragraph, and its drawing shapes that hold text, in document order: in its spans and links
    and in groups too, but not those inside another frame or shape (read with it)."""
    for child in element:
        if child.tag == f"{{{DRAW}}}frame" or (child.tag.startswith(f"{{{DRAW}}}") and holds_text(child)):
            yield child
        elif child.tag in (f"{{{DRAW}}}g", f"{{{DRAW}}}a") or (child.tag.startswith(f"{{{TEXT}}}")
                                                                and child.tag not in NOT_READ):
            yield from _drawings(child)


def holds_text(shape: ElementTree.Element) -> bool:
    """Whether a drawing shape (``draw:custom-shape``, ``draw:rect``...) holds paragraphs of its own."""
    return any(child.tag in SHAPE_TEXT for child in shape)


def _words(element: ElementTree.Element) -> str:
    """The text a reader sees in a paragraph or cell: spans and links read, ``text:s`` as its spaces, tabs and line
    breaks as such; comments, footnotes, frames and drawing shapes (read apart) left out."""
    parts: list[str] = [element.text or ""]
    for child in element:
        tag = child.tag
        if tag == f"{{{TEXT}}}s":
            parts.append(" " * min(count_attribute(child.get(f"{{{TEXT}}}c")), 1000))
        elif tag == f"{{{TEXT}}}tab":
            parts.append("\t")
        elif tag == f"{{{TEXT}}}line-break":
            parts.append("\n")
        elif tag not in NOT_READ and not tag.startswith(f"{{{DRAW}}}"):  # drawings: frames and shapes, read apart
            parts.append(_words(child))
        parts.append(child.tail or "")
    return "".join(parts)


def count_attribute(value: str | None, default: int = 1, *, digits: int = 6) -> int:
    """A count attribute's value (a level, a number of spaces, a list's start, a repeat), ``default`` when absent,
    not a whole number, or longer than ``digits`` digits."""
    return int(value) if value and value.isascii() and value.isdigit() and len(value) <= digits else default


def frame_alt_text(frame: ElementTree.Element) -> str | None:
    """A picture frame's alt text (its title and description), None when it has none or a program wrote it."""
    return authored(" ".join(part for part in (frame.findtext(f"{{{SVG}}}title"), frame.findtext(f"{{{SVG}}}desc"))
                             if part))


def list_styles(*roots: ElementTree.Element | None) -> dict[str, dict[int, tuple[str, str, str]]]:
    """Each list style's numbered levels: {style: {level: (num-format, prefix, suffix)}}; bullet levels absent."""
    styles: dict[str, dict[int, tuple[str, str, str]]] = {}
    for root in roots:
        if root is None:
            continue
        for style in root.iter(f"{{{TEXT}}}list-style"):
            levels = styles.setdefault(style.get(f"{{{STYLE}}}name", ""), {})
            for level in style.iter(f"{{{TEXT}}}list-level-style-number"):
                num_format = level.get(f"{{{STYLE}}}num-format", "1") or ""
                if num_format:
                    levels[count_attribute(level.get(f"{{{TEXT}}}level"))] = (
                        num_format, level.get(f"{{{STYLE}}}num-prefix", ""), level.get(f"{{{STYLE}}}num-suffix", "."))
    return styles


def title_styles(*roots: ElementTree.Element | None) -> set[str]:
    """The paragraph styles that are (or derive from) the Title style."""
    parents: dict[str, str] = {}
    for root in roots:
        if root is None:
            continue
        for style in root.iter(f"{{{STYLE}}}style"):
            parents[style.get(f"{{{STYLE}}}name", "")] = style.get(f"{{{STYLE}}}parent-style-name", "")
    titles = set()
    for name in parents:
        seen, current = set(), name
        while current and current not in seen:
            if current == "Title":
                titles.add(name)
                break
            seen.add(current)
            current = parents.get(current, "")
    return titles | {"Title"}


def _table_rows(table: ElementTree.Element) -> list[str]:
    """A table's rows, a line each; below its header rows (``table:table-header-rows``, Writer's "Heading"), or its
    first row when the table styles it as a header (``table:use-first-row-styles``, Impress's "Header row", on for a
    new table), each cell led by its column's name (:func:`row_line`), except in a row with merged (covered) cells."""
    heads = table.find(f"{{{TABLE}}}table-header-rows")
    header_rows = set(heads.iter(f"{{{TABLE}}}table-row")) if heads is not None else set()
    if not header_rows and table.get(f"{{{TABLE}}}use-first-row-styles") == "true":
        header_rows = set(itertools.islice(table.iter(f"{{{TABLE}}}table-row"), 1))
    header: list[str] | None = None
    rows = []
    for row in table.iter(f"{{{TABLE}}}table-row"):
        cells = [_words(cell) for cell in row.iter(f"{{{TABLE}}}table-cell")]
        if row in header_rows and header is None:
            header = cells
        merged = row.find(f"{{{TABLE}}}covered-table-cell") is not None
        line = row_line(cells, None if merged else header)
        if line:
            rows.append(line)
    return rows
