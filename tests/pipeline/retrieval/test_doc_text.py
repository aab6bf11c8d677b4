"""A Word 97-2003 document (.doc) reads as the same document saved as .docx does: headings, paragraphs, table rows,
fields by their shown result, headers and footers left out."""

import struct
import time
from pathlib import Path

import pytest

from models.errors import DataError
from pipeline.retrieval.documents import chunk_text, read_document
from pipeline.retrieval.strips import strips_with_sections
from tests.pipeline.conftest import assert_needs_extra, damaged_copies_read, ole_bytes

# python-docx's document (Title and heading styles, a hyperlink field, Greek and Cyrillic text, a table whose first
# row Word repeats as a header row and a cell of two paragraphs, bulleted and numbered lists, a page header and footer)
# saved as .doc by LibreOffice 7.4 (`soffice --headless --convert-to doc`): tests/fixtures/README.md
STORE_HANDBOOK = Path(__file__).parents[2] / "fixtures" / "store-handbook.doc"


def test_a_word_97_document_reads_as_its_docx_twin(tmp_path):
    title, text = read_document(STORE_HANDBOOK)
    assert title == "Store handbook"
    assert text.split("\n\n") == [
        "# Store handbook", "# Refunds",
        "Read the refund policy before you write: the window is 30 days.",  # the link's words, not its field code
        "Ελληνικά και кириллица: возврат в течение 30 дней.",
        "## Delivery",
        "Zone | Delivery time | Notes",
        "Zone: EU | Delivery time: 3-5 days | Notes: Tracked",
        "Zone: US | Delivery time: 7 days | Notes: Signed for on delivery",
        "After the table.",
        "- Send a photo of the damage.", "- Keep the packaging.",
        "Returns, step by step:", "1. Print the label.", "2. Pack the item.", "3. Drop it at a post office.",
    ]
    assert "confidential" not in text and "footer" not in text and "HYPERLINK" not in text
    assert ("Zone: EU | Delivery time: 3-5 days | Notes: Tracked", "Delivery") in [
        strip for chunk in chunk_text(text) for strip in strips_with_sections(chunk)]


def word_document(pieces: list[tuple[str, bool]], *, prc: bytes = b"", summary: bytes = b"") -> bytes:
    """A minimal Word 97 file (FIB, piece table, no formatting) whose main text is ``pieces`` in order, each 8-bit
    (True: Windows-1252, as Word writes text that fits it) or UTF-16; the pieces are stored in reverse order, so that
    only the piece table puts them right. ``prc``: piece formatting before the piece table; ``summary``: a
    SummaryInformation property set."""
    body, placed = bytearray(b"\x00" * 1536), []
    for text, eight_bit in reversed(pieces):
        placed.append((len(body), eight_bit))
        body += text.encode("cp1252" if eight_bit else "utf-16-le")
    placed.reverse()
    cps = [0]
    for text, _ in pieces:
        cps.append(cps[-1] + len(text))
    pcds = b"".join(struct.pack("<HIH", 0, (2 * at) | 0x40000000 if eight_bit else at, 0) for at, eight_bit in placed)
    plcpcd = struct.pack(f"<{len(cps)}I", *cps) + pcds
    clx = prc + b"\x02" + struct.pack("<I", len(plcpcd)) + plcpcd
    fc_lcb = [0] * (2 * 93)
    fc_lcb[2 * 33: 2 * 33 + 2] = [0, len(clx)]  # fcClx, lcbClx: the piece table at the table stream's start
    longs = [0] * 22
    longs[3] = cps[-1]  # ccpText
    fib = bytearray(struct.pack("<HH6xH", 0xA5EC, 193, 0x0200).ljust(32, b"\x00"))
    fib += struct.pack("<H", 14) + b"\x00" * 28 + struct.pack("<H22i", 22, *longs)
    fib += struct.pack(f"<H{2 * 93}I", 93, *fc_lcb)
    body[: len(fib)] = fib
    streams = {"WordDocument": bytes(body), "1Table": clx.ljust(4096, b"\x00")}
    if summary:
        streams["\x05SummaryInformation"] = summary.ljust(4096, b"\x00")
    return ole_bytes(streams)


def test_pieces_of_8_bit_and_unicode_text_read_in_order_with_fields_by_their_result(tmp_path):
    path = tmp_path / "memo.doc"
    path.write_bytes(word_document([
        ("Caf\xe9 refunds \u2013 see \x13 HYPERLINK \"https://example.com\" \x14the policy\x15.\r", True),
        ("\u0412\u043e\u0437\u0432\u0440\u0430\u0442: 30 \u0434\u043d\u0435\u0439\x0bnew line\r", False),
        ("Page \x13 PAGE \x143\x15 of \x13 NUMPAGES \x13 nested \x15\x14 9\x15\x01\x08\x02\r", True),
    ]))
    assert read_document(path) == ("memo", "Caf\xe9 refunds \u2013 see the policy.\n\n"
                                           "\u0412\u043e\u0437\u0432\u0440\u0430\u0442: 30 \u0434\u043d\u0435\u0439\n"
                                           "new line\n\nPage 3 of 9")


def test_a_crafted_piece_table_is_an_error_not_a_loop(tmp_path):
    path = tmp_path / "crafted.doc"
    path.write_bytes(word_document([("text\r", True)], prc=b"\x01" + struct.pack("<h", -3)))  # would step back
    with pytest.raises(DataError, match=r"crafted\.doc: a piece formatting of negative size"):
        read_document(path)
    path.write_bytes(word_document([("Caf\xe9\r", True)], prc=b"\x01" + struct.pack("<h", 2) + b"\x00\x00"))
    assert read_document(path)[1] == "Caf\xe9"  # a real one is stepped over


def property_set(title: bytes, *, more: bytes = b"") -> bytes:
    """A SummaryInformation property set ([MS-OLEPS]) of a code page, a Title (8-bit) and property 3 (``more``)."""
    values = [struct.pack("<IHH", 2, 1252, 0), struct.pack("<II", 30, len(title) + 1) + title + b"\x00" * 4, more]
    offsets, at = [], 8 + 8 * len(values)
    for value in values:
        offsets.append(at)
        at += len(value) + (-len(value)) % 4
    section = struct.pack("<II", at, len(values)) + b"".join(
        struct.pack("<II", prop, offset) for prop, offset in zip((1, 2, 3), offsets, strict=True))
    section += b"".join(value.ljust(len(value) + (-len(value)) % 4, b"\x00") for value in values)
    return struct.pack("<HHI16sI16sI", 0xFFFE, 0, 0, b"\x00" * 16, 1, b"\x00" * 16, 48) + section


def test_the_title_property_names_the_document_and_a_crafted_property_set_is_read_quickly(tmp_path):
    path = tmp_path / "memo.doc"
    # property 3 a vector of 2**31 - 1 empty values: olefile's own metadata parser steps through each of them
    endless = struct.pack("<II", 0x1000, 0x7FFFFFFF)
    path.write_bytes(word_document([("Refunds take 30 days.\r", True)],
                                   summary=property_set(b"Caf\xe9 memo", more=endless)))
    start = time.perf_counter()
    assert read_document(path) == ("Caf\xe9 memo", "Refunds take 30 days.")
    assert time.perf_counter() - start < 5


def test_files_that_are_not_word_97_documents_are_errors_naming_them(tmp_path):
    newer = tmp_path / "contract.doc"
    newer.write_bytes(b"PK\x03\x04 a damaged .docx file named .doc")  # read by the .docx reader, which says why
    with pytest.raises(DataError, match=r"contract\.doc: not a readable \.docx file .* \(read as a \.docx file: its"):
        read_document(newer)
    data = bytearray(STORE_HANDBOOK.read_bytes())
    fib = data.find(b"\xec\xa5")  # the WordDocument stream's first bytes
    data[fib + 0x0B] |= 0x01  # fEncrypted: 0x0100 of the little-endian flags at 0x0A
    (tmp_path / "secret.doc").write_bytes(bytes(data))
    with pytest.raises(DataError, match=r"secret\.doc: the document is encrypted"):
        read_document(tmp_path / "secret.doc")


def test_damaged_documents_raise_only_data_errors(tmp_path):
    assert damaged_copies_read(STORE_HANDBOOK.read_bytes(), ".doc", tmp_path, copies=150, seed=11) > 0


def test_without_the_docx_extra_the_error_names_it(monkeypatch):
    assert_needs_extra(STORE_HANDBOOK, "olefile", "docx", monkeypatch)


def test_text_boxes_are_read_after_the_main_text():
    title, text = read_document(STORE_HANDBOOK.with_name("sale-flyer.doc"))  # tests/fixtures/README.md
    assert title == "Spring sale"
    assert text.split("\n\n") == ["# Spring sale", "Every store takes part.", "Prices include tax.",
                                  "Second box below.", "Returns desk open 9 to 5.", "Call 555-0100.",
                                  "Members save 5%."]
