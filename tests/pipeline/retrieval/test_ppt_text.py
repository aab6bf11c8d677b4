"""A PowerPoint 97-2003 deck (.ppt) reads as the same deck saved as .pptx does: slides in order with their titles,
outlines as lists, tables as rows, notes kept, furniture left out, only the newest copy of each slide read."""

import struct
import time
from pathlib import Path

import pytest

from models.errors import DataError
from pipeline.retrieval.documents import chunk_text, read_document
from pipeline.retrieval.strips import strips_with_sections
from tests.pipeline.conftest import assert_needs_extra, damaged_copies_read, ole_bytes

# python-pptx's deck (a title slide, a titled outline of two levels with Greek and Cyrillic text, a text box and
# speaker notes, an untitled slide with a table and a grouped text box, a titled slide with a picture, an empty slide)
# saved as .ppt by LibreOffice 7.4 (`soffice --headless --convert-to ppt`), its thumbnail left out of the
# SummaryInformation, whose Title differs from the first slide's: tests/fixtures/README.md
QUARTERLY_REVIEW = Path(__file__).parents[2] / "fixtures" / "quarterly-review.ppt"


def test_a_powerpoint_97_deck_reads_as_its_pptx_twin():
    title, text = read_document(QUARTERLY_REVIEW)
    assert title == "Quarterly review, finance team"  # the Title property
    assert text.split("\n\n") == [
        "## Quarterly review", "Finance team, October",
        "## Q3 revenue",
        "* Revenue grew 12% to 4.1 million euros.\n  * Subscriptions made most of the growth.\n"
        "* Ελληνικά και кириллица: выручка выросла.",
        "Source: ledger export of 2 October.",
        "Notes: Mention the one-off licence sale of 0.3 million.",
        "## Slide 3", "Region | Revenue\nNorth | 2.3 M\nSouth | 1.8 M", "Both regions met their targets.",
        "## Sales regions",  # its picture has no alt text; the empty slide after it is no section
    ]
    assert "Click to edit" not in text  # the masters' prompts are not slides
    assert ("Source: ledger export of 2 October.", "Q3 revenue") in [
        strip for chunk in chunk_text(text) for strip in strips_with_sections(chunk)]


def record(kind: int, body: bytes = b"", *, instance: int = 0) -> bytes:
    return struct.pack("<HHI", instance << 4, kind, len(body)) + body


def container(kind: int, *children: bytes, instance: int = 0) -> bytes:
    body = b"".join(children)
    return struct.pack("<HHI", 0xF | instance << 4, kind, len(body)) + body


def text(kind: int, chars: str, *, eight_bit: bool = False, styles: bytes = b"", fields: tuple[int, ...] = ()) -> bytes:
    """A TextHeaderAtom of ``kind``, the characters (TextBytesAtom or TextCharsAtom), styles and field marks."""
    atom = record(4008, chars.encode("latin-1")) if eight_bit else record(4000, chars.encode("utf-16-le"))
    marks = b"".join(record(4056, struct.pack("<i", at)) for at in fields)  # SlideNumberMCAtom
    return record(3999, struct.pack("<I", kind)) + atom + (record(4001, styles) if styles else b"") + marks


def shape(*records: bytes, kind: int = 1, flags: int = 0, top: int = 0, left: int = 0) -> bytes:
    """A shape container: its type and flags, a slide anchor (top, left), then ``records``."""
    return container(0xF004, record(0xF00A, struct.pack("<II", 1, flags), instance=kind),
                     record(0xF010, struct.pack("<hhhh", top, left, left + 100, top + 50)), *records)


def drawing(*shapes: bytes) -> bytes:
    group_self = container(0xF004, record(0xF00A, struct.pack("<II", 1, 0x5)))
    return container(1036, container(0xF002, container(0xF003, group_self, *shapes)))


def slide_atom(notes_id: int = 0) -> bytes:
    return record(1007, struct.pack("<I8sIIHH", 0, b"\x00" * 8, 0x80000001, notes_id, 0, 0), instance=0)


def reference(index: int) -> bytes:
    """A shape's text box that holds no text but the index of one in the slide list (OutlineTextRefAtom)."""
    return container(0xF00D, record(3998, struct.pack("<i", index)))


def deck(*, token: int = 0xE391C05F, loop: bool = False, unused_texts: int = 0) -> bytes:
    """An OLE file written as PowerPoint writes one saved twice: the second save appended a new copy of slide 1
    and a persist directory naming it. Slide 2 lies before slide 1 in the stream; the slide list orders them.
    ``unused_texts``: more texts in slide 1's part of the slide list, which no shape refers to."""
    outline_styles = struct.pack("<IHI", 5, 0, 0) + struct.pack("<IHI", 12, 1, 0)  # "Soup\r" level 0, the rest 1
    slide_list = container(4080, record(1011, struct.pack("<IIIII", 2, 0, 2, 256, 0)),
                           text(0, "Caf\xe9 menu", eight_bit=True),
                           text(1, "Soup\rBread\vrolls", styles=outline_styles),
                           *(text(4, "unused", eight_bit=True) for _ in range(unused_texts)),
                           record(1011, struct.pack("<IIIII", 3, 0, 0, 257, 0)), instance=0)
    notes_list = container(4080, record(1011, struct.pack("<IIIII", 4, 0, 0, 512, 0)), instance=2)
    document = container(1000, record(1001, b"\x00" * 40), slide_list, notes_list)
    description = "Photo of the soup of the day".encode("utf-16-le") + b"\x00\x00"
    picture_properties = record(0xF00B, struct.pack("<HIHI", 0x4104, 1, 0x8381, len(description)) + description,
                                instance=2)
    word_art = "Open on Sundays".encode("utf-16-le") + b"\x00\x00"
    word_art_properties = record(0xF00B, struct.pack("<HI", 0x80C0, len(word_art)) + word_art, instance=1)
    new_slide = container(1006, slide_atom(notes_id=512), drawing(
        shape(reference(1), top=100),
        shape(reference(0), top=10),
        shape(container(0xF00D, text(4, "Page *", fields=(5,))), top=300),
        shape(container(0xF011, record(3011, struct.pack("<IBBH", 0, 9, 0, 0))),
              container(0xF00D, text(4, "Confidential")), top=400),  # a footer placeholder: furniture
        shape(picture_properties, kind=75, top=200),
        shape(word_art_properties, kind=136, top=250)))
    old_slide = container(1006, slide_atom(), drawing(shape(container(0xF00D, text(0, "Old menu")), top=10)))
    second_slide = container(1006, slide_atom(), drawing(shape(container(0xF00D, text(6, "Drinks")), top=10)))
    notes = container(1008, record(1009, struct.pack("<II", 256, 0)), drawing(
        shape(container(0xF011, record(3011, struct.pack("<IBBH", 1, 12, 0, 0))),
              container(0xF00D, text(2, "Say the soup\rtwice")))))
    stream = bytearray()
    at: dict[str, int] = {}
    for name, part in (("document", document), ("second", second_slide), ("old", old_slide), ("notes", notes)):
        at[name] = len(stream)
        stream += part
    directory = record(6002, struct.pack("<IIIII", 1 | 4 << 20, at["document"], at["old"], at["second"], at["notes"]))
    at["directory"] = len(stream)
    stream += directory
    at["edit"] = len(stream)
    stream += record(4085, struct.pack("<IHBBIIIIHH", 256, 0, 0, 3, 0, at["directory"], 1, 5, 1, 0))
    at["new"] = len(stream)
    stream += new_slide
    at["directory2"] = len(stream)
    stream += record(6002, struct.pack("<II", 2 | 1 << 20, at["new"]))
    newest = len(stream)
    stream += record(4085, struct.pack("<IHBBIIIIHH", 256, 0, 0, 3, newest if loop else at["edit"],
                                       at["directory2"], 1, 5, 1, 0))
    current_user = record(4086, struct.pack("<III", 0x14, token, newest) + b"\x00" * 16)
    return ole_bytes({"PowerPoint Document": bytes(stream).ljust(4096, b"\x00"),
                      "Current User": current_user.ljust(4096, b"\x00")})


def test_the_newest_copy_of_each_slide_is_read_in_the_slide_lists_order_with_texts_it_refers_to(tmp_path):
    path = tmp_path / "menu.ppt"
    path.write_bytes(deck())
    assert read_document(path) == ("Caf\xe9 menu", (
        "## Caf\xe9 menu\n\n"  # 8-bit text, the title the slide list holds and a shape refers to
        "* Soup\n  * Bread rolls\n\n"  # a body's paragraphs as an outline, its line break a space
        "Image: Photo of the soup of the day\n\n"  # the alt text
        "Open on Sundays\n\n"  # WordArt
        "Page\n\n"  # the slide number's placeholder character left out; so is the footer
        "Notes: Say the soup\ntwice\n\n"
        "## Drinks"))


def test_a_slide_list_of_many_texts_reads_in_linear_time(tmp_path):
    path = tmp_path / "long.ppt"
    path.write_bytes(deck())
    expected = read_document(path)
    path.write_bytes(deck(unused_texts=20_000))  # each text was parsed again for every one after it: minutes
    start = time.perf_counter()
    assert read_document(path) == expected
    assert time.perf_counter() - start < 5


def test_encrypted_decks_and_looping_edit_chains_are_errors_naming_the_file(tmp_path):
    path = tmp_path / "secret.ppt"
    path.write_bytes(deck(token=0xF3D1C4DF))
    with pytest.raises(DataError, match=r"secret\.ppt: the presentation is encrypted"):
        read_document(path)
    path = tmp_path / "looping.ppt"
    path.write_bytes(deck(loop=True))
    with pytest.raises(DataError, match=r"looping\.ppt: the presentation's chain of saved edits loops"):
        read_document(path)


def test_damaged_decks_raise_only_data_errors(tmp_path):
    assert damaged_copies_read(QUARTERLY_REVIEW.read_bytes(), ".ppt", tmp_path, copies=150, seed=13) > 0


def test_without_the_pptx_extra_the_error_names_it(monkeypatch):
    assert_needs_extra(QUARTERLY_REVIEW, "olefile", "pptx", monkeypatch)
