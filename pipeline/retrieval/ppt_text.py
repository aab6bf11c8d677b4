"""The readable text of a PowerPoint 97-2003 presentation (``.ppt``), read with olefile (the ``pptx`` extra).

Old decks still fill shared drives. The format ([MS-PPT]) is an OLE compound file whose ``PowerPoint Document``
stream is a tree of records. A save may append only the records it changed: a chain of edit records, found from the
``Current User`` stream, maps each object's persist id to its newest copy, and only those are read. Slides come in
the presentation's order and read as a ``.pptx`` file's do (:mod:`pipeline.retrieval.pptx_text`): each opened by its
title as a ``## `` heading ("## Slide 4" for a slide without one; an empty untitled slide is left out), then the text
of its other shapes in reading order (top to bottom, then left to right; a group's shapes read where the group
stands): bulleted paragraphs, and those of a body placeholder, as list items indented by their outline level; other
text (WordArt's too) as lines; a table (a group of cells in a grid) as rows ``a | b``; a picture as its alt text
("Image: ...", not a file name). The speaker notes follow the slide ("Notes: ..."). Footers, slide numbers and dates
are page furniture and are left out, as are charts (embedded objects that hold no text here) and the masters'
prompts. Text is UTF-16, or 8-bit with each byte a Latin-1 character. The Title property names the deck, else its
first slide's title. An encrypted deck, a file that is not an OLE compound file or holds no presentation, and a
damaged one are errors naming the file.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import groupby
from pathlib import Path
from typing import NamedTuple

from models.errors import DataError
from pipeline.retrieval.alt_text import authored
from pipeline.retrieval.ole_files import ole_file, summary_title
from pipeline.retrieval.table_text import row_line

__all__ = ["ppt_to_text"]

STREAM, CURRENT_USER = "PowerPoint Document", "Current User"
HEADER = struct.Struct("<HHI")  # a record's version and instance, type, and body size
CONTAINER = 0xF  # the version of a record that holds records
ENCRYPTED_TOKEN = 0xF3D1C4DF  # CurrentUserAtom.headerToken of an encrypted deck
DOCUMENT, SLIDE, SLIDE_ATOM, NOTES, DRAWING = 1000, 1006, 1007, 1008, 1036
SLIDE_LIST, SLIDE_PERSIST, USER_EDIT, PERSIST_DIRECTORY = 4080, 1011, 4085, 6002
SLIDE_LIST_OF_SLIDES, SLIDE_LIST_OF_NOTES = 0, 2  # SlideListWithText instances
OUTLINE_TEXT_REF, TEXT_HEADER, TEXT_CHARS, STYLE_TEXT_PROP, TEXT_BYTES = 3998, 3999, 4000, 4001, 4008
FIELD_MARKS = {4056, 4087, 4088, 4089, 4090, 4117}  # slide number, date, header and footer fields: furniture
PLACEHOLDER = 3011
SHAPE_GROUP, SHAPE, SHAPE_ATOM, SHAPE_PROPERTIES, MORE_PROPERTIES = 0xF003, 0xF004, 0xF00A, 0xF00B, 0xF122
CHILD_ANCHOR, CLIENT_ANCHOR, CLIENT_DATA, CLIENT_TEXTBOX = 0xF00F, 0xF010, 0xF011, 0xF00D
IS_GROUP = 0x1  # OfficeArtFSP flag: the group's own shape
LINE, PICTURE_FRAME = 20, 75  # shape types
PICTURE_BLIP, DESCRIPTION, WORD_ART = 0x0104, 0x0381, 0x00C0  # shape properties: a picture's image, its alt
# text, the text of a WordArt shape
TITLE_TEXTS, NOTES_TEXT, BODY_TEXTS, OTHER_TEXT = {0, 6}, 2, {1, 7, 8}, 4  # TextHeaderAtom text types
TITLE_PLACEHOLDERS, FURNITURE = {1, 3, 13, 15, 17}, {7, 8, 9, 10}  # PlaceholderAtom types
BODY_PLACEHOLDERS, NOTES_PLACEHOLDERS = {2, 14, 18, 19}, {6, 12}
MAX_EDITS, MAX_DEPTH, MAX_RUNS = 10_000, 32, 100_000
NOWHERE = 1 << 62  # the position of a shape without an anchor: read last


class _Record(NamedTuple):
    type: int
    instance: int
    start: int  # of its body
    end: int
    container: bool


@dataclass
class _Text:
    """One text of a shape or of the slide list: its kind (TextHeaderAtom type), characters and paragraph styles."""

    kind: int
    chars: str = ""
    styles: _Record | None = None
    fields: list[int] = field(default_factory=list)  # positions of furniture fields' placeholder characters

    def paragraphs(self, data: bytes) -> list[tuple[int, bool | None, str]]:
        """(outline level, bulleted or None when the style does not say, text) of each non-empty paragraph."""
        chars = list(self.chars)
        for position in self.fields:
            if 0 <= position < len(chars):
                chars[position] = ""
        runs = _paragraph_styles(data, self.styles) if self.styles is not None else []
        paragraphs, at, run, run_end = [], 0, 0, runs[0][0] if runs else 0
        for text in self.chars.split("\r"):
            while run + 1 < len(runs) and at >= run_end:
                run += 1
                run_end += runs[run][0]
            level, bulleted = runs[run][1:] if runs else (0, None)
            line = " ".join("".join(chars[at: at + len(text)]).replace("\v", " ").split())
            if line:
                paragraphs.append((level, bulleted, line))
            at += len(text) + 1
        return paragraphs


class _Shape(NamedTuple):
    top: int
    left: int
    kind: int  # shape type (LINE, PICTURE_FRAME...)
    placeholder: int  # PlaceholderAtom type; 0 when none
    text: _Text | None
    alt: str | None  # a picture's alt text; None for other shapes
    members: list[_Shape] | None  # a group's shapes


class _Entry(NamedTuple):
    """A slide (or notes page) as the slide list names it: where it is, its id, and texts its shapes refer to."""

    persist: int
    slide_id: int
    texts: list[_Text]


def ppt_to_text(path: Path) -> tuple[str, str]:
    """(title, text) of the PowerPoint 97-2003 deck in ``path``: its Title property, else its first slide's title
    ('' when neither), and its slides separated by blank lines."""
    with ole_file(path, extra="pptx", stream=STREAM, kind=".ppt",
                  not_ole="not a PowerPoint 97-2003 presentation (an OLE compound file); a newer PowerPoint file is "
                          "read from a file named .pptx",
                  without="a PowerPoint presentation in it (a Word .doc or Excel .xls file named .ppt?)") as ole:
        if not ole.exists(CURRENT_USER):
            raise DataError(f"{path}: the presentation's {CURRENT_USER} stream is missing (a damaged file)")
        data = ole.openstream(STREAM).read()
        offsets, document_ref = _persist_offsets(data, ole.openstream(CURRENT_USER).read(4096))
        document = _persisted(data, offsets, document_ref, DOCUMENT, "document")
        notes = {entry.slide_id: entry for entry in _slide_list(data, document, SLIDE_LIST_OF_NOTES)}
        blocks: list[str] = []
        first_title = ""
        for number, entry in enumerate(_slide_list(data, document, SLIDE_LIST_OF_SLIDES), start=1):
            slide = _persisted(data, offsets, entry.persist, SLIDE, f"slide {number}")
            shapes = _drawing_shapes(data, slide, entry.texts)
            title_shape = next((s for s in shapes if s.text is not None and _is_title(s)), None)
            title = _one_line(data, title_shape.text) if title_shape else ""
            first_title = first_title or title
            content = _blocks(data, [s for s in shapes if s is not title_shape])
            notes_entry = notes.get(_notes_id(data, slide))
            if notes_entry is not None:
                notes_page = _persisted(data, offsets, notes_entry.persist, NOTES, f"the notes of slide {number}")
                lines = [p[2] for s in _flat(_drawing_shapes(data, notes_page, notes_entry.texts))
                         if s.text is not None and _is_notes(s) for p in s.text.paragraphs(data)]
                if lines:
                    content.append("Notes: " + "\n".join(lines))
            if title or content:  # an empty slide without a title is no section
                blocks += [f"## {title or f'Slide {number}'}", *content]
        title = summary_title(ole) or first_title
    return title, "\n\n".join(blocks)


def _children(data: bytes, start: int, end: int) -> Iterator[_Record]:
    """The records laid end to end in ``data[start:end]`` (a container's body)."""
    at = start
    while at + HEADER.size <= end:
        record = _record_at(data, at, end)
        yield record
        at = record.end


def _record_at(data: bytes, at: int, end: int | None = None) -> _Record:
    """The record whose header is at ``at``; it must end by ``end`` (the stream's end by default)."""
    limit = len(data) if end is None else end
    if at < 0 or at + HEADER.size > limit:
        raise DataError(f"a record at offset {at} lies outside the stream (a damaged file)")
    version_instance, kind, size = HEADER.unpack_from(data, at)
    if at + HEADER.size + size > limit:
        raise DataError(f"a record of {size} bytes at offset {at} runs past its container (a damaged file)")
    return _Record(kind, version_instance >> 4, at + HEADER.size, at + HEADER.size + size,
                   version_instance & 0xF == CONTAINER)


def _persist_offsets(data: bytes, current_user: bytes) -> tuple[dict[int, int], int]:
    """(persist id -> offset of its newest record, the document's persist id), read from the chain of edits that
    the Current User stream starts, newest first."""
    if len(current_user) < 20:
        raise DataError(f"the {CURRENT_USER} stream is too short (a damaged file)")
    token, offset = struct.unpack_from("<II", current_user, 12)
    if token == ENCRYPTED_TOKEN:
        raise DataError("the presentation is encrypted (password-protected); save it without its password first")
    offsets: dict[int, int] = {}
    document: int | None = None
    seen: set[int] = set()
    while offset:
        if offset in seen or len(seen) >= MAX_EDITS:
            raise DataError("the presentation's chain of saved edits loops (a damaged file)")
        seen.add(offset)
        edit = _record_at(data, offset)
        if edit.type != USER_EDIT or edit.end - edit.start < 20:
            raise DataError(f"no saved edit at offset {offset}, where the chain of edits points (a damaged file)")
        offset, directory_at, document_ref = struct.unpack_from("<III", data, edit.start + 8)
        document = document_ref if document is None else document  # the newest edit's
        directory = _record_at(data, directory_at)
        if directory.type != PERSIST_DIRECTORY:
            raise DataError(f"no persist directory at offset {directory_at} (a damaged file)")
        at = directory.start
        while at + 4 <= directory.end:
            entry = struct.unpack_from("<I", data, at)[0]
            first, count = entry & 0xFFFFF, entry >> 20
            if at + 4 + 4 * count > directory.end:
                raise DataError(f"the persist directory at offset {directory_at} is cut short (a damaged file)")
            for index, where in enumerate(struct.unpack_from(f"<{count}I", data, at + 4)):
                offsets.setdefault(first + index, where)  # a newer edit's copy wins
            at += 4 + 4 * count
    if document is None:
        raise DataError(f"the {CURRENT_USER} stream points to no saved edit (a damaged file)")
    return offsets, document


def _persisted(data: bytes, offsets: dict[int, int], persist: int, kind: int, what: str) -> _Record:
    """The newest record of persist id ``persist``, which must be of type ``kind``."""
    if persist not in offsets:
        raise DataError(f"{what} is missing from the persist directory (a damaged file)")
    record = _record_at(data, offsets[persist])
    if record.type != kind:
        raise DataError(f"{what} is not where the persist directory puts it (a damaged file)")
    return record


def _slide_list(data: bytes, document: _Record, instance: int) -> list[_Entry]:
    """The entries of the document's slide list of ``instance`` (slides or notes pages), in order."""
    for child in _children(data, document.start, document.end):
        if child.type == SLIDE_LIST and child.instance == instance:
            runs: list[tuple[int, int, list[_Record]]] = []  # (persist id, slide id, the records after its atom)
            for record in _children(data, child.start, child.end):
                if record.type == SLIDE_PERSIST and record.end - record.start >= 16:
                    persist, _, _, slide_id = struct.unpack_from("<IIII", data, record.start)
                    runs.append((persist, slide_id, []))
                elif runs:
                    runs[-1][2].append(record)
            return [_Entry(persist, slide_id, _texts(data, records)) for persist, slide_id, records in runs]
    return []


def _texts(data: bytes, records: Sequence[_Record]) -> list[_Text]:
    """The texts in a run of records: each opened by a TextHeaderAtom, then its characters and styles."""
    texts: list[_Text] = []
    for record in records:
        if record.type == TEXT_HEADER and record.end - record.start >= 4:
            texts.append(_Text(struct.unpack_from("<I", data, record.start)[0]))
        elif not texts:
            continue
        elif record.type == TEXT_CHARS:
            texts[-1].chars = data[record.start: record.end].decode("utf-16-le", errors="replace")
        elif record.type == TEXT_BYTES:
            texts[-1].chars = data[record.start: record.end].decode("latin-1")
        elif record.type == STYLE_TEXT_PROP:
            texts[-1].styles = record
        elif record.type in FIELD_MARKS and record.end - record.start >= 4:
            texts[-1].fields.append(struct.unpack_from("<i", data, record.start)[0])
    return texts


def _paragraph_styles(data: bytes, styles: _Record) -> list[tuple[int, int, bool | None]]:
    """(characters covered, outline level, bulleted or None) of each paragraph run of a StyleTextPropAtom; the runs
    read until the atom ends or a run is cut short (the character runs after them are not needed)."""
    runs: list[tuple[int, int, bool | None]] = []
    at = styles.start
    while at + 10 <= styles.end and len(runs) < MAX_RUNS:
        count, level, masks = struct.unpack_from("<IHI", data, at)
        at += 10
        bulleted = None
        if masks & 0x1 and at + 2 <= styles.end:  # hasBullet: bulletFlags.fHasBullet is valid
            bulleted = bool(struct.unpack_from("<H", data, at)[0] & 0x1)
        runs.append((count, min(level, 8), bulleted))
        at = _after_paragraph_exception(data, at, masks)
    return runs


# TextPFException fields after its masks, in order: (mask bits that make the field present, its size in bytes);
# size 0 is the tab stops, a count of 2 bytes and 4 bytes per stop
PF_FIELDS = ((0xF, 2), (1 << 7, 2), (1 << 4, 2), (1 << 6, 2), (1 << 5, 4), (1 << 11, 2), (1 << 12, 2), (1 << 13, 2),
             (1 << 14, 2), (1 << 8, 2), (1 << 10, 2), (1 << 15, 2), (1 << 20, 0), (1 << 16, 2), (0x7 << 17, 2),
             (1 << 21, 2))


def _after_paragraph_exception(data: bytes, at: int, masks: int) -> int:
    """Where a TextPFException whose fields start at ``at`` ends ([MS-PPT] 2.9.20)."""
    for bits, size in PF_FIELDS:
        if masks & bits:
            at += size or 2 + 4 * (struct.unpack_from("<H", data, at)[0] if at + 2 <= len(data) else 0)
    return at


def _drawing_shapes(data: bytes, container: _Record, outline: list[_Text]) -> list[_Shape]:
    """The top-level shapes of a slide's or notes page's drawing (``outline``: the slide list's texts, which a
    shape may refer to instead of holding its own)."""
    for child in _children(data, container.start, container.end):
        if child.type == DRAWING:
            for drawing in _children(data, child.start, child.end):
                for group in _children(data, drawing.start, drawing.end) if drawing.container else ():
                    if group.type == SHAPE_GROUP:
                        members = _group(data, group, outline, 0).members
                        return members or []
    return []


def _group(data: bytes, group: _Record, outline: list[_Text], depth: int) -> _Shape:
    """A group of shapes: placed where its own shape (the first) is, its members read in their own order."""
    if depth > MAX_DEPTH:
        raise DataError(f"shapes nested more than {MAX_DEPTH} groups deep (a damaged file)")
    place: _Shape | None = None
    members: list[_Shape] = []
    for child in _children(data, group.start, group.end):
        if child.type == SHAPE_GROUP:
            members.append(_group(data, child, outline, depth + 1))
        elif child.type == SHAPE:
            shape, is_group = _shape(data, child, outline)
            if is_group and place is None:
                place = shape
            else:
                members.append(shape)
    top, left = (place.top, place.left) if place else (NOWHERE, NOWHERE)
    return _Shape(top, left, 0, 0, None, None, members)


def _shape(data: bytes, container: _Record, outline: list[_Text]) -> tuple[_Shape, bool]:
    """(one shape, whether it is its group's own shape) from its container's records."""
    kind, flags, placeholder = 0, 0, 0
    top = left = NOWHERE
    text: _Text | None = None
    properties: dict[int, bytes | int] = {}
    for record in _children(data, container.start, container.end):
        size = record.end - record.start
        if record.type == SHAPE_ATOM and size >= 8:
            kind, flags = record.instance, struct.unpack_from("<I", data, record.start + 4)[0]
        elif record.type in (SHAPE_PROPERTIES, MORE_PROPERTIES):
            properties |= _properties(data, record)
        elif record.type == CLIENT_ANCHOR and size in (8, 16):
            top, left = struct.unpack_from("<hh" if size == 8 else "<ii", data, record.start)
        elif record.type == CHILD_ANCHOR and size >= 16:
            left, top = struct.unpack_from("<ii", data, record.start)
        elif record.type == CLIENT_DATA:
            for atom in _children(data, record.start, record.end):
                if atom.type == PLACEHOLDER and atom.end - atom.start >= 5:
                    placeholder = data[atom.start + 4]
        elif record.type == CLIENT_TEXTBOX:
            text = _textbox_text(data, record, outline)
    word_art = properties.get(WORD_ART)
    if text is None and isinstance(word_art, bytes):
        text = _Text(OTHER_TEXT, word_art.decode("utf-16-le", errors="replace").split("\x00")[0])
    alt = None
    if kind == PICTURE_FRAME or PICTURE_BLIP in properties:
        description = properties.get(DESCRIPTION)
        alt = authored(description.decode("utf-16-le", errors="replace").split("\x00")[0]
                       if isinstance(description, bytes) else None) or ""
    return _Shape(top, left, kind, placeholder, text, alt, None), bool(flags & IS_GROUP)


def _textbox_text(data: bytes, textbox: _Record, outline: list[_Text]) -> _Text | None:
    """A shape's text: its own, or the slide list's text it refers to by index."""
    records = list(_children(data, textbox.start, textbox.end))
    for record in records:
        if record.type == OUTLINE_TEXT_REF and record.end - record.start >= 4:
            index = struct.unpack_from("<i", data, record.start)[0]
            return outline[index] if 0 <= index < len(outline) else None
    texts = _texts(data, records)
    return texts[0] if texts else None


def _properties(data: bytes, record: _Record) -> dict[int, bytes | int]:
    """A shape's properties ([MS-ODRAW] OfficeArtFOPT): a simple one's value, a complex one's bytes (which follow
    the table of properties in its order)."""
    found: dict[int, bytes | int] = {}
    complex_at = record.start + 6 * record.instance
    for index in range(record.instance):
        if record.start + 6 * index + 6 > record.end:
            break
        key, value = struct.unpack_from("<HI", data, record.start + 6 * index)
        if key & 0x8000:  # complex: ``value`` bytes after the table
            found[key & 0x3FFF] = data[complex_at: min(complex_at + value, record.end)]
            complex_at += value
        else:
            found[key & 0x3FFF] = value
    return found


def _notes_id(data: bytes, slide: _Record) -> int:
    """The id of the slide's notes page (SlideAtom.notesIdRef; 0 without one)."""
    for child in _children(data, slide.start, slide.end):
        if child.type == SLIDE_ATOM and child.end - child.start >= 20:
            return int(struct.unpack_from("<I", data, child.start + 16)[0])
    return 0


def _blocks(data: bytes, shapes: list[_Shape]) -> list[str]:
    """Text blocks of ``shapes`` in reading order, a group's (or a table's) where the group stands."""
    blocks: list[str] = []
    for shape in sorted(shapes, key=lambda s: (s.top, s.left)):
        if shape.placeholder in FURNITURE:
            continue
        if shape.members is not None:
            table = _table(data, shape.members)
            blocks += [table] if table is not None else _blocks(data, shape.members)
        elif shape.alt:
            blocks.append(f"Image: {shape.alt}")
        elif shape.text is not None:
            listed = shape.text.kind in BODY_TEXTS or shape.placeholder in BODY_PLACEHOLDERS
            lines = [("  " * level + "* " if (listed if bulleted is None else bulleted) else "") + line
                     for level, bulleted, line in shape.text.paragraphs(data)]
            if lines:
                blocks.append("\n".join(lines))
    return blocks


def _table(data: bytes, members: list[_Shape]) -> str | None:
    """A group's cells as table rows (``a | b``), when they form a grid of at least two rows of the same number (at
    least two) of cells, lines between them aside; None for a group that is not a table."""
    cells = [shape for shape in members if shape.kind != LINE]
    if any(cell.members is not None or cell.alt is not None or cell.top == NOWHERE for cell in cells):
        return None
    rows = [sorted(row, key=lambda c: c.left) for _, row in groupby(sorted(cells, key=lambda c: c.top),
                                                                     key=lambda c: c.top)]
    if len(rows) < 2 or len({len(row) for row in rows}) != 1 or len(rows[0]) < 2:
        return None
    lines = [row_line([_one_line(data, cell.text) for cell in row], None) for row in rows]
    return "\n".join(line for line in lines if line)


def _one_line(data: bytes, text: _Text | None) -> str:
    """A text's paragraphs on one line ('' for none)."""
    return " ".join(line for _, _, line in text.paragraphs(data)) if text is not None else ""


def _flat(shapes: list[_Shape]) -> Iterator[_Shape]:
    """Every shape, a group's members in its place."""
    for shape in shapes:
        if shape.members is not None:
            yield from _flat(shape.members)
        else:
            yield shape


def _is_title(shape: _Shape) -> bool:
    return shape.placeholder in TITLE_PLACEHOLDERS or (shape.text is not None and shape.text.kind in TITLE_TEXTS)


def _is_notes(shape: _Shape) -> bool:
    return shape.placeholder in NOTES_PLACEHOLDERS or (shape.text is not None and shape.text.kind == NOTES_TEXT)
