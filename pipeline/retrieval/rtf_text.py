"""The readable text of Rich Text Format files (``.rtf``: macOS TextEdit's default, WordPad, legal and clinical
exports): paragraphs and tables as a reader sees them, without the markup.

An RTF file is 7-bit text: groups in braces, control words (``\\par``, ``\\b``), and characters escaped as bytes of
the document's code page (``\\'e9`` in ``\\ansicpg1252``) or as Unicode (``\\u8217?``, the ``?`` a fallback for old
readers, skipped as ``\\ucN`` says). Read here in one pass with an explicit stack (no recursion, linear time):
paragraphs end at ``\\par``, a heading (``\\outlinelevelN``, or a heading style of the style sheet: ``Heading 2``,
``Title``) is written as Markdown's (``## Refunds``), a table's cells are joined as ``a | b`` and each row is a
paragraph, typographic characters (``\\emdash``, ``\\rquote``) are written as they print, a link reads as its
words, a list item keeps the label Word shows (its ``\\listtext``: "3. ", a bullet as "- "), a text box's
paragraphs (``\\shptxt``) follow the paragraph it is anchored in. What is not text is left out:
font, colour and style tables, pictures and other shapes, objects, document properties (the ``\\title`` names the
document), headers and footers, footnotes, comments, field instructions and every ignorable destination
(``{\\*\\...}``); ``\\binN`` data is stepped over.

RTF that carries an HTML page (``\\fromhtml1``: the body Outlook stores for an HTML message, and Outlook's "Save As
RTF" of one) is read as that page ([MS-OXRTFEX]): the markup in ``{\\*\\htmltagN ...}`` groups and the text between
them, without what ``\\htmlrtf`` marks as RTF's own rendering, then :func:`~pipeline.retrieval.html_text.html_to_text`,
so that its paragraphs, headings, lists and tables are the page's, not the rendering's.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from models.errors import DataError
from models.unicode_text import whole_characters
from pipeline.retrieval.code_pages import windows_codec
from pipeline.retrieval.html_text import html_to_text
from pipeline.retrieval.table_text import row_line

__all__ = ["rtf_text", "rtf_to_text"]

MAX_DEPTH = 2000  # groups open at once: more is a crafted file, not a document
TOKEN = re.compile(rb"\\([a-zA-Z]{1,32})(-?\d{1,10})? ?|\\'([0-9a-fA-F]{2})|\\(.)|([{}])|[\r\n]+|([^\\{}\r\n]+)",
                   re.DOTALL)
NOT_TEXT = frozenset({
    "fonttbl", "colortbl", "stylesheet", "listtable", "listoverridetable", "revtbl", "rsidtbl", "generator",
    "info", "pict", "object", "objdata", "nonshppict", "shppict", "themedata", "colorschememapping",
    "datastore", "latentstyles", "xmlnstbl", "filetbl", "pgdsctbl", "header", "headerl", "headerr", "headerf",
    "footer", "footerl", "footerr", "footerf", "footnote", "annotation", "atnid", "atnauthor", "fldinst",
    "bkmkstart", "bkmkend", "field_instruction", "mmathPr", "docvar", "template",
})
SPECIAL = {"emdash": "\u2014", "endash": "\u2013", "bullet": "\u2022", "lquote": "\u2018", "rquote": "\u2019",
           "ldblquote": "\u201c", "rdblquote": "\u201d", "tab": " ", "emspace": " ", "enspace": " ", "qmspace": " "}
SYMBOLS = {"~": " ", "_": "-", "-": "", "\\": "\\", "{": "{", "}": "}", "\t": " "}
PARAGRAPH = "\n\n"
CELL = "\ue000"  # a table cell's end (a private-use character), made " | " once its row is read
HEADER_ROW = "\ue002"  # a header row's mark, read by _paragraphs
HEADING = "\ue001"  # one per level of the heading a paragraph is, made "#"s once the paragraph is read
FROM_HTML = re.compile(rb"\\fromhtml1\b")  # in the header: the document carries an HTML page (read as that page)
HEADER_BYTES = 1024  # where \fromhtml1 is looked for: it precedes the font table
STYLE_HEADING = re.compile(r"(?i)^(?:heading\s*([1-6])|title)$")  # built-in style names of headings


class _StyleSheet:
    """The heading level (0 for level 1) of each paragraph style (``\\sN``) the style sheet defines: its
    ``\\outlinelevelN``, else its built-in name ("heading 2", "Title"), since LibreOffice writes its headings as
    styles without an outline level. Fed the tokens of the ``{\\stylesheet ...}`` group, one entry group a style."""

    def __init__(self) -> None:
        self.levels: dict[int, int] = {}
        self.depth: int | None = None  # the style sheet group's depth while it is read
        self._entry: list[Any] = [0, None, bytearray()]  # style number (None: not a paragraph style), level, name

    def open(self, depth: int) -> None:
        self.depth = depth

    def feed(self, kind: str, value: Any, depth: int) -> None:
        """A token met at group ``depth`` (before a ``}`` closes it) while the style sheet is open (``depth`` set)."""
        if self.depth is None:
            return
        if kind == "}":
            if depth == self.depth + 1:
                self._close_entry()
            elif depth <= self.depth:
                self.depth = None
        elif kind == "{" and depth == self.depth + 1:
            self._entry = [0, None, bytearray()]
        elif depth != self.depth + 1:  # a group inside an entry (\\*\\keycode...): not the style's name
            return
        elif kind == "word":
            name, number = value
            if name == "s" and number is not None:
                self._entry[0] = number
            elif name in ("cs", "ts", "ds"):  # character, table and section styles are no paragraphs' headings
                self._entry[0] = None
            elif name == "outlinelevel" and number is not None and 0 <= number < 6:
                self._entry[1] = number
        elif kind == "run":
            self._entry[2].extend(value)

    def _close_entry(self) -> None:
        number, level, name = self._entry
        if number is None:
            return
        if level is None:
            found = STYLE_HEADING.match(name.decode("latin-1").split(";")[0].strip())
            level = None if found is None else int(found.group(1)) - 1 if found.group(1) else 0
        if level is not None:
            self.levels[number] = level


def _tokens(data: bytes) -> Iterator[tuple[str, Any]]:
    """RTF's tokens for the readers below, in one linear pass: ("{", None), ("}", None), ("word", (name, number or
    None)), ("char", a ``\\uN`` character), ("byte", a ``\\'hh`` byte), ("symbol", an escaped character), ("run",
    literal bytes). What every reader of RTF handles alike is done here: a ``\\uN`` character's fallback (as many
    characters or escapes as its group's ``\\ucN`` says, 1 by default) is skipped, ``\\binN`` data is stepped over,
    and groups nested past ``MAX_DEPTH`` are an error."""
    fallbacks = [1]  # \uc of each open group (the document's first)
    skip = 0  # fallback characters still to skip after a \u character
    at = 0
    while (token := TOKEN.match(data, at)) is not None:
        at = token.end()
        word, number, hexbyte, symbol, brace, run = token.groups()
        if skip and (hexbyte or run or symbol):  # the fallback of a \u character: one character or escape each
            if run and len(run) > skip:
                run, skip = run[skip:], 0
            else:
                skip -= 1 if not run else len(run)
                continue
        if brace == b"{":
            if len(fallbacks) > MAX_DEPTH:
                raise DataError(f"groups nested more than {MAX_DEPTH} deep (a crafted or damaged file)")
            fallbacks.append(fallbacks[-1])
            yield "{", None
        elif brace == b"}":
            if len(fallbacks) > 1:
                fallbacks.pop()
            yield "}", None
        elif word is not None:
            name, value = word.decode("ascii"), int(number) if number else None
            if name == "bin":  # binary data of that many bytes follows: not text, and not RTF to read
                at += max(value or 0, 0)
            elif name == "uc" and value is not None:
                fallbacks[-1] = max(value, 0)
            elif name == "u" and value is not None:
                skip = fallbacks[-1]
                yield "char", chr(value % 65536 if value < 0 else min(value, 0x10FFFF))
            else:
                yield "word", (name, value)
        elif hexbyte is not None:
            yield "byte", int(hexbyte, 16)
        elif symbol is not None:
            yield "symbol", symbol.decode("latin-1")
        elif run is not None:
            yield "run", run


def rtf_text(data: bytes) -> tuple[str, str]:
    """(title, text) of an RTF document's bytes."""
    if not data.lstrip()[:5] == b"{\\rtf":
        raise DataError("not an RTF file (it does not start with '{\\rtf')")
    if FROM_HTML.search(data[:HEADER_BYTES]):
        title, text = html_to_text(_encapsulated_html(data))
        if text.strip():
            return whole_characters(title), whole_characters(text)
    out: dict[str, list[str]] = {"text": [], "title": [], "label": []}
    pending = bytearray()  # escaped bytes of the code page, decoded together (a character may take two)
    codepage = "cp1252"
    stack: list[str] = []
    into = "text"  # what the open group's text is: read ("text"), the title ("title"), document properties other
    # than the title ("info"), a shape in the text, which may hold a text box ("shape"), a list item's label ("label"),
    # or left out ("")
    in_row = False  # inside a table row: its cells' paragraphs are the cells' text
    styles = _StyleSheet()
    heading = False  # the paragraph being read is marked as a heading already (by its style or outline level)

    def flush() -> None:
        if pending:
            if into in out:
                out[into].append(pending.decode(codepage, errors="replace"))
            pending.clear()

    def write(text: str) -> None:
        flush()
        if into in out:
            out[into].append(text)

    def mark_heading(level: int) -> None:
        nonlocal heading
        if not heading and not in_row:
            write(HEADING * (level + 1))
            heading = True

    for kind, value in _tokens(data):
        if styles.depth is not None:  # inside the style sheet: its entries are read apart
            styles.feed(kind, value, len(stack) + (kind == "{"))
        if kind == "{":
            flush()
            stack.append(into)
        elif kind == "}":
            flush()
            closed, into = into, stack.pop() if stack else into
            if closed == "label" and into != "label":  # a list item's label, as Word shows it: now written
                write(_list_label("".join(out["label"])))
                out["label"].clear()
        elif kind == "word":
            name, number = value
            if name == "title" and into == "info":
                into = "title"
            elif name in ("listtext", "pntext"):  # the label Word shows before a list item ("1.", a bullet)
                flush()
                into = "label" if into == "text" and not in_row else ""
            elif name == "shp":  # a drawing shape: only a text box's text (below) is read, and only in the text
                flush()
                into = "shape" if into == "text" else ""
            elif name == "shptxt" and into == "shape":  # a text box's paragraphs, apart from the one it is anchored in
                into = "text"
                write(" " if in_row else PARAGRAPH)  # (in a table cell: in the cell)
            elif name in NOT_TEXT:
                flush()
                into = "info" if name == "info" and into else ""
                if name == "stylesheet":
                    styles.open(len(stack))
            elif name == "ansicpg" and number:
                codepage = windows_codec(number, codepage)
            elif name in ("par", "sect", "page"):
                write(" " if in_row else PARAGRAPH)  # a paragraph inside a table cell stays in the cell
                heading = False
            elif name == "line":
                write("\n")
            elif name == "outlinelevel" and number is not None and 0 <= number < 6 and into == "text":
                mark_heading(number)  # a heading's level (Word's heading styles, pandoc): read as Markdown's
            elif name == "s" and number in styles.levels and into == "text":
                mark_heading(styles.levels[number])  # a heading style (LibreOffice's headings)
            elif name in ("trowd", "intbl"):
                in_row = True
            elif name == "trhdr":  # the row repeats atop each page: the table's header row
                write(HEADER_ROW)
            elif name in ("cell", "nestcell"):
                write(CELL)
            elif name in ("row", "nestrow"):
                in_row = heading = False
                write(PARAGRAPH)
            elif name in SPECIAL:
                write(SPECIAL[name])
        elif kind == "char":
            write(value)
        elif kind == "byte":
            pending.append(value)
        elif kind == "symbol":
            if value == "*":  # an ignorable destination: its group is not text (a shape's may hold its text box)
                flush()
                into = "shape" if into == "shape" else ""
            elif value in ("\n", "\r"):  # an escaped line end is a paragraph mark
                write(PARAGRAPH)
            else:
                write(SYMBOLS.get(value, ""))
        else:
            pending.extend(value)  # 8-bit characters written raw are in the code page too
    flush()
    title = " ".join("".join(out["title"]).split())
    return whole_characters(title), _paragraphs(whole_characters("".join(out["text"])))


def _list_label(text: str) -> str:
    """A list item's label as read: a number ("3.", "b)", "2.1.") as it is, a bullet (a symbol font's character, an
    "o" or a dash) as "- "; '' for none."""
    label = " ".join(text.split())
    if not label:
        return ""
    numbered = label[-1] in ".)" or any(character.isdigit() for character in label)
    return f"{label} " if numbered else "- "


def _encapsulated_html(data: bytes) -> str:
    """The HTML page an RTF document made from one carries ([MS-OXRTFEX] de-encapsulation): the text of
    ``{\\*\\htmltagN ...}`` groups and the text outside them, except what ``\\htmlrtf`` (up to ``\\htmlrtf0`` or
    its group's end) marks as RTF's own; other destinations left out."""
    out: list[str] = []
    pending = bytearray()
    codepage = "cp1252"
    stack: list[tuple[str, bool]] = []
    into, rtf_only = "html", False  # into: "html" (read) or "" (a destination left out)
    ignorable = False  # after \\*: the group is a destination, read only if it is an htmltag

    def write(text: str | bytes) -> None:
        if into and not rtf_only:
            if pending:
                out.append(pending.decode(codepage, errors="replace"))
                pending.clear()
            if isinstance(text, bytes):
                pending.extend(text)
            else:
                out.append(text)

    for kind, value in _tokens(data):
        if kind in ("{", "}"):
            write(b"")
            if kind == "{":
                stack.append((into, rtf_only))
            elif stack:
                into, rtf_only = stack.pop()
            ignorable = False
        elif kind == "word":
            name, number = value
            if ignorable:
                into, rtf_only = ("html", False) if name == "htmltag" else ("", rtf_only)
            elif name == "htmlrtf":
                write(b"")
                rtf_only = number != 0
            elif name in NOT_TEXT:
                write(b"")
                into = ""
            elif name == "ansicpg" and number:
                codepage = windows_codec(number, codepage)
            elif name in ("par", "line"):
                write("\n")
            elif name in SPECIAL:
                write(SPECIAL[name])
            ignorable = False
        elif kind == "symbol":
            if value == "*":
                ignorable = True
            else:
                write(SYMBOLS.get(value, ""))
        elif kind == "char":
            write(value)
        elif kind == "byte":
            write(bytes([value]))
        else:
            write(value)
    write(b"")
    return "".join(out)


def rtf_to_text(path: Path) -> tuple[str, str]:
    """(title, text) of the RTF file at ``path`` (see the module)."""
    try:
        return rtf_text(path.read_bytes())
    except DataError as exc:
        raise DataError(f"{path}: {exc}") from exc


def _paragraphs(text: str) -> str:
    """Paragraphs with their whitespace collapsed, a table row's cells joined (:func:`row_line`: below a header
    row, ``\\trhdr``, each led by its column's name), empty ones left out."""
    paragraphs = []
    header: list[str] | None = None
    for paragraph in text.split(PARAGRAPH):
        lines = [" ".join(line.split()) for line in paragraph.split("\n")]
        joined = "\n".join(line for line in lines if line)
        if not joined:
            continue
        if CELL in joined:
            cells = joined.replace(HEADER_ROW, "").split(CELL)[:-1]  # the last cell ends its row
            if HEADER_ROW in joined:
                header = cells
            joined = row_line(cells, header)
        else:
            header = None
        level = min(len(joined) - len(joined.lstrip(HEADING)), 6)
        joined = joined.replace(HEADING, "").strip()
        if joined and level:
            joined = "#" * level + " " + " ".join(joined.split())  # a heading is one line
        if joined:
            paragraphs.append(joined)
    return PARAGRAPH.join(paragraphs)
