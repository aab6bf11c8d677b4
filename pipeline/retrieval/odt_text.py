"""The readable text of an OpenDocument text file (``.odt``: LibreOffice, OpenOffice, Google Docs' ODF export),
read with the standard library.

Read as a Word file is (:mod:`pipeline.retrieval.docx_text`): paragraphs and tables in document order, headings
(``text:h`` of outline level N, and the Title style) written as Markdown headings, list items with the label the
list's style shows (``- `` for a bullet, ``3. ``, ``b) ``, ``iv. ``), a table row as one paragraph of its cells,
text boxes after the paragraph they are anchored in, and a picture as its alt text ("Image: ...") unless a program
wrote it (:mod:`pipeline.retrieval.alt_text`). Left out, as a reader of the page would skip them or never see them:
tables of contents and other generated indexes, comments, footnote bodies, and the text that tracked changes
deleted. The title is the document's own (``meta.xml``), else its first heading.

XML is parsed by :mod:`xml.etree.ElementTree`, which resolves no external entity and, with the expat that Python
ships, refuses entity expansion bombs.
"""

from __future__ import annotations

import re
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from xml.etree import ElementTree

from models.errors import DataError
from pipeline.retrieval.alt_text import authored

__all__ = ["odt_to_text"]

OFFICE = "urn:oasis:names:tc:opendocument:xmlns:office:1.0"
TEXT = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
TABLE = "urn:oasis:names:tc:opendocument:xmlns:table:1.0"
DRAW = "urn:oasis:names:tc:opendocument:xmlns:drawing:1.0"
STYLE = "urn:oasis:names:tc:opendocument:xmlns:style:1.0"
SVG = "urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0"
DC = "http://purl.org/dc/elements/1.1/"
MAX_PART_BYTES = 64 * 2**20  # content.xml unpacked: more is a zip bomb, not a document
NOT_READ = {f"{{{TEXT}}}{name}" for name in ("table-of-content", "alphabetical-index", "illustration-index",
                                              "table-index", "object-index", "user-index", "bibliography",
                                              "tracked-changes", "note", "sequence-decls", "variable-decls",
                                              "user-field-decls")} | {f"{{{OFFICE}}}annotation",
                                                                       f"{{{OFFICE}}}annotation-end",
                                                                       f"{{{OFFICE}}}forms"}
ROMAN = (("m", 1000), ("cm", 900), ("d", 500), ("cd", 400), ("c", 100), ("xc", 90), ("l", 50), ("xl", 40),
         ("x", 10), ("ix", 9), ("v", 5), ("iv", 4), ("i", 1))


def odt_to_text(path: Path) -> tuple[str, str]:
    """(title, text): the document's title, else its first heading ('' when neither), and its paragraphs
    separated by blank lines."""
    try:
        with zipfile.ZipFile(path) as document:
            content = _xml(path, document, "content.xml")
            meta = _xml(path, document, "meta.xml") if "meta.xml" in document.namelist() else None
            styles = _xml(path, document, "styles.xml") if "styles.xml" in document.namelist() else None
    except (zipfile.BadZipFile, OSError, EOFError, zlib.error, RuntimeError, NotImplementedError) as exc:
        raise DataError(f"{path}: not a readable .odt file ({exc}); an .odt file is a zip of OpenDocument XML, "
                        "and a password-protected one must be saved without its password first") from exc
    body = content.find(f"{{{OFFICE}}}body/{{{OFFICE}}}text")
    if body is None:
        raise DataError(f"{path}: content.xml holds no text body (office:text); is it a spreadsheet or "
                        "presentation saved as .odt?")
    reader = _Reader(_list_styles(content, styles), _title_styles(content, styles))
    reader.blocks(body)
    title = re.sub(r"\s+", " ", meta.findtext(f".//{{{DC}}}title") or "").strip() if meta is not None else ""
    if not title:
        title = next((p.lstrip("#").strip() for p in reader.paragraphs if p.startswith("#")), "")
    return title, "\n\n".join(reader.paragraphs)


@dataclass
class _Reader:
    """Paragraphs from the body's elements, in order."""

    list_styles: dict[str, dict[int, tuple[str, str, str]]]  # style -> level -> (num-format, prefix, suffix)
    title_styles: set[str]
    paragraphs: list[str] = field(default_factory=list)

    def blocks(self, parent: ElementTree.Element, list_style: str = "", depth: int = 0) -> None:
        for child in parent:
            tag = child.tag
            if tag in NOT_READ:
                continue
            if tag == f"{{{TEXT}}}h":
                level = min(6, max(1, _count(child.get(f"{{{TEXT}}}outline-level"))))
                self._paragraph(child, "#" * level + " ")
            elif tag == f"{{{TEXT}}}p":
                title = child.get(f"{{{TEXT}}}style-name", "") in self.title_styles
                self._paragraph(child, "# " if title else "")
            elif tag == f"{{{TEXT}}}list":
                self._list(child, child.get(f"{{{TEXT}}}style-name") or list_style, depth + 1)
            elif tag == f"{{{TABLE}}}table":
                for row in child.iter(f"{{{TABLE}}}table-row"):
                    cells = [" ".join(_words(cell).split()) for cell in row.iter(f"{{{TABLE}}}table-cell")]
                    line = " | ".join(cell for cell in cells if cell)
                    if line:
                        self.paragraphs.append(line)
            else:  # sections, text boxes' frames at body level and other containers: their paragraphs
                self.blocks(child, list_style, depth)

    def _list(self, element: ElementTree.Element, style: str, depth: int) -> None:
        number = 1
        for item in element:
            if item.tag not in (f"{{{TEXT}}}list-item", f"{{{TEXT}}}list-header"):
                continue
            number = _count(item.get(f"{{{TEXT}}}start-value"), number)
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
        return f"{prefix}{_numeral(number, num_format)}{suffix} "

    def _paragraph(self, element: ElementTree.Element, lead: str) -> None:
        text = " ".join(_words(element).split()) if lead.startswith("#") else _words(element).strip()
        if text:
            self.paragraphs.append(lead + text)
        for frame in element.iter(f"{{{DRAW}}}frame"):
            boxes = frame.findall(f"{{{DRAW}}}text-box")
            for box in boxes:
                self.blocks(box)
            if not boxes:
                alt = authored(" ".join(part for part in (frame.findtext(f"{{{SVG}}}title"),
                                                           frame.findtext(f"{{{SVG}}}desc")) if part))
                if alt:
                    self.paragraphs.append(f"Image: {alt}")


def _words(element: ElementTree.Element) -> str:
    """The text a reader sees in a paragraph or cell: spans and links read, ``text:s`` as its spaces, tabs and line
    breaks as such; comments, footnotes and frames (read apart) left out."""
    parts: list[str] = [element.text or ""]
    for child in element:
        tag = child.tag
        if tag == f"{{{TEXT}}}s":
            parts.append(" " * min(_count(child.get(f"{{{TEXT}}}c")), 1000))
        elif tag == f"{{{TEXT}}}tab":
            parts.append("\t")
        elif tag == f"{{{TEXT}}}line-break":
            parts.append("\n")
        elif tag not in NOT_READ and tag != f"{{{DRAW}}}frame":
            parts.append(_words(child))
        parts.append(child.tail or "")
    return "".join(parts)


def _count(value: str | None, default: int = 1) -> int:
    """A count attribute's value (a level, a number of spaces, a list's start), ``default`` when absent or not a
    whole number."""
    return int(value) if value and value.isascii() and value.isdigit() and len(value) < 7 else default


def _numeral(number: int, num_format: str) -> str:
    """``number`` as a list style writes it: 1, a, A, i or I."""
    if num_format in ("a", "A"):
        letters = ""
        while number > 0:
            number, rest = divmod(number - 1, 26)
            letters = chr(ord("a") + rest) + letters
        return letters.upper() if num_format == "A" else letters
    if num_format in ("i", "I"):
        roman = ""
        for symbol, value in ROMAN:
            while number >= value:
                roman, number = roman + symbol, number - value
        return roman.upper() if num_format == "I" else roman
    return str(number)


def _list_styles(*roots: ElementTree.Element | None) -> dict[str, dict[int, tuple[str, str, str]]]:
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
                    levels[_count(level.get(f"{{{TEXT}}}level"))] = (
                        num_format, level.get(f"{{{STYLE}}}num-prefix", ""), level.get(f"{{{STYLE}}}num-suffix", "."))
    return styles


def _title_styles(*roots: ElementTree.Element | None) -> set[str]:
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


def _xml(path: Path, document: zipfile.ZipFile, member: str) -> ElementTree.Element:
    try:
        info = document.getinfo(member)
    except KeyError as exc:
        raise DataError(f"{path}: {member} is missing; not an OpenDocument text file, or a damaged one") from exc
    if info.file_size > MAX_PART_BYTES:
        raise DataError(f"{path}: {member} unpacks to {info.file_size:,} bytes, more than {MAX_PART_BYTES:,}; not read")
    try:
        return ElementTree.fromstring(document.read(info))
    except (ElementTree.ParseError, LookupError) as exc:  # LookupError: an encoding Python does not know
        raise DataError(f"{path}: {member} is not well-formed XML ({exc}); the file is damaged") from exc
