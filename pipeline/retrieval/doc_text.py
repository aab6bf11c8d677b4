"""The readable text of a Word 97-2003 document (``.doc``), read with olefile (the ``docx`` extra).

Legacy ``.doc`` files still fill document archives. The format ([MS-DOC]) is an OLE compound file whose
``WordDocument`` stream holds the text in pieces that a piece table (in the ``0Table`` or ``1Table`` stream) puts in
order, each piece 8-bit (Windows-1252) or UTF-16; the paragraphs' properties (style, table membership) are in
formatted disk pages that map file offsets to property lists. Read here as a ``.docx`` file is
(:mod:`pipeline.retrieval.docx_text`): the main document's paragraphs in order, headings (the built-in "Heading
1".."Heading 9" styles and "Title") as Markdown headings, table rows as ``a | b`` (below a first row that Word repeats
as a header row, each cell led by its column's name), a field by its shown result (a hyperlink by its words, a page
number by its number), not its code. The text of text boxes follows the main text (where each box is anchored is
in the drawing layer, not read). Pictures, drawn objects, footnote and comment marks, headers, footers, footnotes
and comments are left out. List paragraphs carry the label Word shows (``3.``, ``2.1.``, ``b)``, a bullet),
counted per list (a list instance's restart overrides are not read). The Title property names the document, else its
first heading. An encrypted document, a file that is not an OLE compound file or holds no Word document, and a
damaged one are errors naming the file.
"""

from __future__ import annotations

import bisect
import itertools
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from models.errors import DataError
from pipeline.retrieval.docx_numbering import next_label
from pipeline.retrieval.ole_files import ole_file, summary_title
from pipeline.retrieval.table_text import row_line

__all__ = ["doc_to_text"]

WORD_IDENT = 0xA5EC  # FibBase.wIdent: a Word binary document
ENCRYPTED, WHICH_TABLE, OBFUSCATED = 0x0100, 0x0200, 0x8000  # FibBase flags
CCP_TEXT, CCP_TEXT_BOXES = 3, 9  # FibRgLw97: characters of the main document; then of footnotes, headers, macros,
# comments and endnotes, and of the main document's text boxes
STSHF, PLCF_BTE_PAPX, CLX, PLF_LST, PLF_LFO = 1, 13, 33, 73, 74  # FibRgFcLcb97 pairs: style sheet, paragraph
# property pages, piece table, list definitions and list instances (all in the table stream)
PAGE = 512  # a formatted disk page
IN_TABLE, TABLE_ROW_END, TABLE_HEADER = 0x2416, 0x2417, 0x3404  # sprmPFInTable, sprmPFTtp, sprmTTableHeader
TABLE_DEFINITION = 0xD608  # sprmTDefTable: its operand's length takes two bytes
LIST_INSTANCE, LIST_LEVEL = 0x460B, 0x260A  # sprmPIlfo (1-based; 0: no list), sprmPIlvl
NUMBER_FORMATS = {0: "decimal", 1: "upperRoman", 2: "lowerRoman", 3: "upperLetter", 4: "lowerLetter",
                  22: "decimalZero", 23: "bullet", 255: "none"}  # MS-DOC nfc -> the docx names next_label reads
STI_HEADINGS, STI_TITLE = range(1, 10), 62  # built-in style identifiers: Heading 1..9, Title
FIELD_BEGIN, FIELD_SEPARATOR, FIELD_END = "\x13", "\x14", "\x15"
DROPPED = dict.fromkeys(range(32), None) | {0x0B: "\n", 0x09: " ", 0x1E: "-", 0xA0: " "}  # control characters
MAX_PIECES = 1_000_000


class _Marks(NamedTuple):
    """What a paragraph mark's properties say of its paragraph (the defaults: a plain paragraph)."""

    style: int = 0  # index into the style sheet
    in_table: bool = False
    row_end: bool = False
    header_row: bool = False  # (on a row's end mark) the row repeats atop each page: the table's header row
    list_instance: int = 0  # 1-based index of the list it is an item of (0: none)
    list_level: int = 0


@dataclass(frozen=True)
class _Paragraph:
    text: str
    ends_cell: bool  # its mark is a cell's end (a table row's end mark is one too)
    marks: _Marks

    @property
    def in_table(self) -> bool:
        return self.marks.in_table or self.ends_cell


def doc_to_text(path: Path) -> tuple[str, str]:
    """(title, text) of the Word 97-2003 document in ``path``: its Title property, else its first heading ('' when
    neither), and its paragraphs separated by blank lines."""
    with ole_file(path, extra="docx", stream="WordDocument", kind=".doc",
                  not_ole="not a Word 97-2003 document (an OLE compound file); a newer Word file is read from a file "
                          "named .docx",
                  without="a Word document in it (an Excel .xls or Outlook .msg file named .doc?)") as ole:
        word = ole.openstream("WordDocument").read()
        fib = _Fib(word, path)
        table_name = "1Table" if fib.flags & WHICH_TABLE else "0Table"
        if not ole.exists(table_name):
            raise DataError(f"{path}: the document's {table_name} stream is missing (a damaged file)")
        table = ole.openstream(table_name).read()
        pieces = _pieces(table, fib)
        properties = _ParagraphProperties(word, table, *fib.pair(PLCF_BTE_PAPX))
        paragraphs = _paragraphs(word, pieces, properties, (0, fib.longs[CCP_TEXT]))
        boxes = _paragraphs(word, pieces, properties, fib.text_box_story())
        styles = _heading_levels(table, *fib.pair(STSHF))
        lists = _Lists(table, fib)
        title = summary_title(ole)
    blocks = _blocks(paragraphs, styles, lists) + _blocks(boxes, styles, lists)
    title = title or next((block.lstrip("#").strip() for block in blocks if block.startswith("#")), "")
    return title, "\n\n".join(blocks)


class _Fib:
    """The File Information Block at the start of the WordDocument stream: where everything else is."""

    def __init__(self, word: bytes, path: Path) -> None:
        if len(word) < 0x22 or struct.unpack_from("<H", word, 0)[0] != WORD_IDENT:
            raise DataError(f"{path}: not a Word 97-2003 document (no Word header in its WordDocument stream)")
        self.flags = struct.unpack_from("<H", word, 0x0A)[0]
        if self.flags & (ENCRYPTED | OBFUSCATED):
            raise DataError(f"{path}: the document is encrypted (password-protected); save it without its password "
                            "first")
        at = 0x20
        words = struct.unpack_from("<H", word, at)[0]
        at += 2 + 2 * words
        longs = struct.unpack_from("<H", word, at)[0]
        self.longs = struct.unpack_from(f"<{longs}i", word, at + 2)
        at += 2 + 4 * longs
        pairs = struct.unpack_from("<H", word, at)[0]
        self.pairs = struct.unpack_from(f"<{2 * pairs}I", word, at + 2)
        if len(self.longs) <= CCP_TEXT or len(self.pairs) <= 2 * CLX + 1:
            raise DataError(f"{path}: its Word header is too short for a Word 97 or later document")

    def text_box_story(self) -> tuple[int, int]:
        """The first and past-the-last characters of the main document's text boxes, which follow its text, footnotes,
        headers, comments and endnotes in the document's characters; (0, 0) for a header too short to say."""
        if len(self.longs) <= CCP_TEXT_BOXES:
            return 0, 0
        start = sum(max(count, 0) for count in self.longs[CCP_TEXT:CCP_TEXT_BOXES])
        return start, start + max(self.longs[CCP_TEXT_BOXES], 0)

    def pair(self, index: int) -> tuple[int, int]:
        """(offset, length) of a structure in the table stream; (0, 0) when the header is too short to say."""
        return (self.pairs[2 * index], self.pairs[2 * index + 1]) if 2 * index + 1 < len(self.pairs) else (0, 0)


def _pieces(table: bytes, fib: _Fib) -> list[tuple[int, int, int, bool]]:
    """(first character, last character + 1, file offset, 8-bit) of each piece of text, from the piece table."""
    at, length = fib.pair(CLX)
    end = at + length
    while at < end and table[at] == 0x01:  # Prc: formatting of pieces, not needed for the text
        size = struct.unpack_from("<h", table, at + 1)[0]
        if size < 0:
            raise DataError("a piece formatting of negative size (a damaged file)")
        at += 3 + size
    if at >= end or table[at] != 0x02:
        raise DataError("no piece table where the Word header says it is (a damaged file)")
    size = struct.unpack_from("<I", table, at + 1)[0]
    count = (size - 4) // 12
    if not 0 < count <= MAX_PIECES:
        raise DataError(f"a piece table of {count} pieces (a damaged file)")
    cps = struct.unpack_from(f"<{count + 1}I", table, at + 5)
    if any(later < earlier for earlier, later in itertools.pairwise(cps)):
        raise DataError("its piece table is out of order (a damaged file)")
    pieces = []
    for index in range(count):
        fc = struct.unpack_from("<I", table, at + 5 + 4 * (count + 1) + 8 * index + 2)[0]
        compressed = bool(fc & 0x40000000)
        pieces.append((cps[index], cps[index + 1], (fc & 0x3FFFFFFF) // 2 if compressed else fc, compressed))
    return pieces


def _paragraphs(word: bytes, pieces: list[tuple[int, int, int, bool]], properties: _ParagraphProperties,
                story: tuple[int, int]) -> list[_Paragraph]:
    """The paragraphs of one story (``story``: its first character and the one past its last; the main document's
    is ``(0, ccpText)``) in order, each with the properties of its paragraph mark."""
    story_first, limit = story[0], min(story[1], len(word))  # a character takes a byte or two of the stream: no more
    paragraphs: list[_Paragraph] = []
    current: list[str] = []
    for piece_first, last, piece_offset, compressed in pieces:
        first, last = max(piece_first, story_first), min(last, limit)
        if first >= last:
            continue
        width = 1 if compressed else 2
        offset = piece_offset + (first - piece_first) * width
        data = word[offset: offset + (last - first) * width]
        text = data.decode("cp1252" if compressed else "utf-16-le", errors="replace")
        start = 0
        for position, character in enumerate(text):
            if character in "\r\x07\x0c":  # paragraph, cell or row, page or section end
                current.append(text[start:position])
                paragraphs.append(_Paragraph(_visible("".join(current)), character == "\x07",
                                             properties.of(offset + position * width)))
                current, start = [], position + 1
        current.append(text[start:])
    if "".join(current).strip():
        paragraphs.append(_Paragraph(_visible("".join(current)), False, _Marks()))
    return paragraphs


class _ParagraphProperties:
    """Paragraph properties (:class:`_Marks`) by the file offset of a paragraph mark, from the formatted disk pages
    (each read once)."""

    def __init__(self, word: bytes, table: bytes, at: int, length: int) -> None:
        count = (length - 4) // 8
        self.word = word
        self.bounds = struct.unpack_from(f"<{count + 1}I", table, at) if count > 0 else (0,)
        self.pages = [struct.unpack_from("<I", table, at + 4 * (count + 1) + 4 * i)[0] & 0x3FFFFF
                      for i in range(max(count, 0))]
        self.read: dict[int, tuple[tuple[int, ...], list[_Marks]]] = {}

    def of(self, fc: int) -> _Marks:
        """The properties of the paragraph mark at ``fc``."""
        index = bisect.bisect_right(self.bounds, fc) - 1
        if not 0 <= index < len(self.pages):
            return _Marks()
        page = self.pages[index]
        if page not in self.read:
            self.read[page] = self._page(page)
        marks, papx = self.read[page]
        run = bisect.bisect_right(marks, fc) - 1
        return papx[run] if 0 <= run < len(papx) else _Marks()

    def _page(self, number: int) -> tuple[tuple[int, ...], list[_Marks]]:
        """One formatted disk page of paragraph properties: its runs' first offsets and each run's properties."""
        page = self.word[number * PAGE: (number + 1) * PAGE]
        if len(page) < PAGE:
            return (), []
        runs = page[PAGE - 1]
        marks = struct.unpack_from(f"<{runs + 1}I", page, 0)
        found = []
        for run in range(runs):
            offset = 2 * page[4 * (runs + 1) + 13 * run]
            found.append(_papx(page, offset) if offset else _Marks())
        return marks[:runs], found


def _papx(page: bytes, offset: int) -> _Marks:
    """The properties a PapxInFkp gives: its style index and the sprms that say the rest."""
    size = page[offset]
    start, length = (offset + 1, 2 * size - 1) if size else (offset + 2, 2 * page[offset + 1])
    grpprl = page[start: start + length]
    if len(grpprl) < 2:
        return _Marks()
    style = struct.unpack_from("<H", grpprl, 0)[0]
    sprms = _sprms(grpprl[2:])

    def number(sprm: int) -> int:
        return int.from_bytes(sprms.get(sprm, b"")[:2], "little")

    return _Marks(style, bool(number(IN_TABLE)), bool(number(TABLE_ROW_END)), bool(number(TABLE_HEADER)),
                  number(LIST_INSTANCE), number(LIST_LEVEL))


def _sprms(data: bytes) -> dict[int, bytes]:
    """{sprm: operand} of a list of property modifiers (operand sizes by the sprm's spra bits)."""
    found: dict[int, bytes] = {}
    at = 0
    while at + 2 <= len(data):
        sprm = struct.unpack_from("<H", data, at)[0]
        at += 2
        size = {0: 1, 1: 1, 2: 2, 3: 4, 4: 2, 5: 2, 7: 3}.get(sprm >> 13)
        if size is None:  # variable: a length byte first, then that many bytes
            if at >= len(data):
                break
            if sprm == TABLE_DEFINITION and at + 1 < len(data):  # two length bytes, counting one of themselves
                size = struct.unpack_from("<H", data, at)[0] + 1
            else:
                size = data[at] + 1
        if at < len(data):
            found[sprm] = data[at: at + size]
        at += size
    return found


def _heading_levels(table: bytes, at: int, length: int) -> dict[int, int]:
    """{style index: heading level} for the styles that are built-in headings (Heading 1..9: 1..9; Title: 1)."""
    levels: dict[int, int] = {}
    if length < 4 or at + length > len(table):
        return levels
    header = struct.unpack_from("<H", table, at)[0]
    styles = struct.unpack_from("<H", table, at + 2)[0]
    position = at + 2 + header
    for index in range(styles):
        if position + 2 > at + length:
            break
        size = struct.unpack_from("<H", table, position)[0]
        if size >= 2:
            sti = struct.unpack_from("<H", table, position + 2)[0] & 0x0FFF
            if sti in STI_HEADINGS:
                levels[index] = sti
            elif sti == STI_TITLE:
                levels[index] = 1
        position += 2 + size
    return levels


def _visible(text: str) -> str:
    """Text as Word shows it: a field by its result (its code left out, fields nested in either), control marks
    (pictures, footnote and comment references, tabs as spaces, line breaks kept) removed."""
    if FIELD_BEGIN in text:
        kept, depth_codes = [], []  # per open field: whether its code is still being read
        for character in text:
            if character == FIELD_BEGIN:
                depth_codes.append(True)
            elif character == FIELD_SEPARATOR and depth_codes:
                depth_codes[-1] = False
            elif character == FIELD_END and depth_codes:
                depth_codes.pop()
            elif not any(depth_codes):
                kept.append(character)
        text = "".join(kept)
    return re.sub(r"[ \t]+", " ", text.translate(DROPPED)).strip()  # as the .docx reader collapses spaces


def _blocks(paragraphs: list[_Paragraph], headings: dict[int, int], lists: _Lists) -> list[str]:
    """Paragraphs as Markdown: headings, list items with their labels, table rows (cells joined; below a header
    row each led by its column's name), text."""
    blocks: list[str] = []
    cell: list[str] = []  # the paragraphs of the cell being read
    cells: list[str] = []  # the cells of the row being read
    header: list[str] | None = None
    rows = 0  # rows of the current table read
    for paragraph in paragraphs:
        marks = paragraph.marks
        if marks.row_end:  # the row's end mark: its cells are complete
            line = row_line(cells, header)
            if rows == 0 and marks.header_row:
                header = cells
            if line:
                blocks.append(line)
            cells, cell, rows = [], [], rows + 1
        elif paragraph.in_table:
            cell.append(paragraph.text.strip())
            if paragraph.ends_cell:
                cells.append(" ".join(part for part in cell if part))
                cell = []
        else:
            if cells or cell:  # a row without its end mark (a damaged table): what was read of it
                blocks.append(row_line([*cells, " ".join(cell)], None))
                cells, cell = [], []
            header, rows = None, 0
            text = paragraph.text.strip()
            level = headings.get(marks.style)
            label = lists.label(marks.list_instance, marks.list_level) if text and not level else ""
            if text:
                blocks.append(f"{'#' * level} {' '.join(text.split())}" if level else label + text)
    if cells or cell:
        blocks.append(row_line([*cells, " ".join(cell)], None))
    return blocks


class _Lists:
    """The document's lists ([MS-DOC] PlfLst: each list's levels; PlfLfo: the list instances paragraphs name) and
    their counters, for the labels Word shows ("3. ", "2.1. ", "b) ", a bullet), as :mod:`.docx_numbering` gives
    them for .docx files. A list instance's overrides of its list (a restart) are not read."""

    def __init__(self, table: bytes, fib: _Fib) -> None:
        self.levels: dict[int, tuple[list[tuple[str, str]], list[int]]] = {}  # list id: levels' (format, text), starts
        self.instances: list[int] = []  # list instance (0-based) -> list id
        self.counters: dict[int, list[int | None]] = {}
        at, length = fib.pair(PLF_LST)
        if length >= 2:
            count = struct.unpack_from("<h", table, at)[0]
            position = at + 2 + 28 * count  # the levels follow the list definitions, outside lcbPlfLst
            for index in range(max(count, 0)):
                list_id = struct.unpack_from("<i", table, at + 2 + 28 * index)[0]
                simple = table[at + 2 + 28 * index + 26] & 0x01
                levels, starts = [], []
                for _ in range(1 if simple else 9):
                    number_format, text, start, position = _level(table, position)
                    levels.append((number_format, text))
                    starts.append(start)
                self.levels[list_id] = (levels, starts)
        at, length = fib.pair(PLF_LFO)
        if length >= 4:
            count = struct.unpack_from("<i", table, at)[0]
            self.instances = [struct.unpack_from("<i", table, at + 4 + 16 * index)[0] for index in range(max(count, 0))]

    def label(self, instance: int, level: int) -> str:
        """The label of a paragraph of list instance ``instance`` (1-based, 0: none) at ``level``; '' when none."""
        if not 0 < instance <= len(self.instances) or self.instances[instance - 1] not in self.levels:
            return ""
        list_id = self.instances[instance - 1]
        levels, starts = self.levels[list_id]
        return next_label(levels, starts, self.counters.setdefault(list_id, [None] * len(levels)), min(level, 8))


def _level(table: bytes, at: int) -> tuple[str, str, int, int]:
    """(format, text as Word's %1 placeholders, start, where the next level begins) of the LVL at ``at``."""
    start, number_format = struct.unpack_from("<iB", table, at)
    papx_size, chpx_size = table[at + 25], table[at + 24]
    at += 28 + papx_size + chpx_size
    characters = struct.unpack_from("<H", table, at)[0]
    text = table[at + 2: at + 2 + 2 * characters].decode("utf-16-le", errors="replace")
    text = "".join(f"%{ord(c) + 1}" if ord(c) < 9 else c for c in text)  # placeholder k: level k's number
    return NUMBER_FORMATS.get(number_format, "decimal"), text, start, at + 2 + 2 * characters
