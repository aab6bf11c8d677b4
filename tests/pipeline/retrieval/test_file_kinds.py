"""Office files are read as what they hold, not as their names say: a web archive or an HTML table named .doc or .xls,
delimited text named .xls, Rich Text named .doc, a .docx named .doc and the other way round."""

import io
import logging
import shutil
import zipfile
from pathlib import Path

import pytest

from models.errors import DataError
from pipeline.retrieval.archives import DocumentText
from pipeline.retrieval.documents import is_record_metadata, read_document
from pipeline.retrieval.file_kinds import content_suffix
from tests.pipeline.conftest import write_opendocument

FIXTURES = Path(__file__).parents[2] / "fixtures"
WORD_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"
SLIDES_TYPE = "application/vnd.openxmlformats-officedocument.presentationml.presentation.main+xml"
SHEET_TYPE = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"

# what Confluence's "Export to Word" writes (a web archive), shortened
CONFLUENCE_EXPORT = """\
Date: Tue, 5 Mar 2024 10:00:00 +0000 (UTC)
Message-ID: <1@confluence>
Subject: Exported From Confluence
MIME-Version: 1.0
Content-Type: multipart/related;\x20
\tboundary="----=_Part_1"

------=_Part_1
Content-Type: text/html; charset=UTF-8
Content-Transfer-Encoding: quoted-printable
Content-Location: file:///C:/exported.html

<html><head><title>Refund policy</title></head><body><h1>Refund policy</h1><p>Refunds take 30 days=
 from delivery; caf=C3=A9 gift cards are not refunded.</p></body></html>
------=_Part_1
Content-Type: image/png
Content-Transfer-Encoding: base64
Content-Location: file:///C:/logo.png

iVBORw0KGgo=
------=_Part_1--
""".replace("\n", "\r\n")

EXCEL_WEB_PAGE = ('<html xmlns:o="urn:schemas-microsoft-com:office:office" '
                  'xmlns:x="urn:schemas-microsoft-com:office:excel"><head><meta charset="windows-1252">'
                  "<title>Q3 sales</title></head><body><table><tr><th>Region</th><th>Revenue</th></tr>"
                  "<tr><td>North</td><td>2.3 M \u20ac</td></tr></table></body></html>")


def test_a_confluence_word_export_reads_as_the_page_it_archives(tmp_path, caplog):
    path = tmp_path / "Refund+policy.doc"
    path.write_bytes(CONFLUENCE_EXPORT.encode("ascii"))
    with caplog.at_level(logging.INFO, logger="pipeline.retrieval.documents"):
        assert read_document(path) == ("Refund policy", "# Refund policy\n\nRefunds take 30 days from delivery; "
                                                        "caf\xe9 gift cards are not refunded.")
    assert "read as a .mht file" in caplog.text  # said, for whoever wonders why a .doc reads as a page


def test_tables_saved_as_web_pages_or_delimited_text_under_a_workbook_name(tmp_path):
    page = tmp_path / "sales.xls"
    page.write_bytes(EXCEL_WEB_PAGE.encode("cp1252"))  # in the charset its <meta> declares
    assert read_document(page) == ("Q3 sales", "Region | Revenue\n\nRegion: North | Revenue: 2.3 M \u20ac")
    assert DocumentText.read(page).suffix == ".html"  # chunked as a page, not as a table's records
    delimited = tmp_path / "export.xlsx"
    delimited.write_text("Region;Revenue\nNorth;2.3 M\n", encoding="utf-8")
    assert read_document(delimited)[1] == "Region: North\nRevenue: 2.3 M"
    assert DocumentText.read(delimited).suffix == ".csv"


def test_rich_text_and_renamed_packages_are_read_by_their_own_readers(tmp_path):
    rich = tmp_path / "memo.doc"
    rich.write_text(r"{\rtf1\ansi{\fonttbl\f0 Arial;}\f0 Refunds take 30 days.\par}", encoding="ascii")
    assert read_document(rich) == ("memo", "Refunds take 30 days.")
    older = tmp_path / "handbook.docx"  # a Word 97-2003 file renamed
    shutil.copy(FIXTURES / "store-handbook.doc", older)
    assert read_document(older)[0] == "Store handbook"
    deck = tmp_path / "review.pptx"  # a PowerPoint 97-2003 file renamed
    shutil.copy(FIXTURES / "quarterly-review.ppt", deck)
    assert read_document(deck)[0] == "Quarterly review, finance team"
    docx = pytest.importorskip("docx")
    newer = tmp_path / "letter.doc"  # a .docx renamed
    document = docx.Document()
    document.add_paragraph("Refunds take 30 days.")
    document.save(str(newer))
    assert read_document(newer)[1] == "Refunds take 30 days."


def test_only_office_names_are_second_guessed_and_unknown_content_keeps_its_reader(tmp_path):
    page = tmp_path / "notes.txt"
    page.write_text("<html><body>not read as a page: a .txt file is text</body></html>", encoding="utf-8")
    assert content_suffix(page, ".txt") == ".txt"
    text = tmp_path / "notes.doc"
    text.write_text("Plain text is no Word document\nand not a table either\n", encoding="utf-8")
    assert content_suffix(text, ".doc") == ".doc"
    with pytest.raises(DataError, match=r"notes\.doc: not a Word 97-2003 document"):
        read_document(text)
    assert content_suffix(tmp_path / "missing.doc", ".doc") == ".doc"  # the reader says what is wrong


def retyped(package: bytes, old: str, new: str) -> bytes:
    """A copy of an Office package whose main part's content type ``old`` is ``new`` (as a variant's is)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(package)) as source, zipfile.ZipFile(out, "w") as copy:
        for info in source.infolist():
            data = source.read(info)
            copy.writestr(info, data.replace(old.encode(), new.encode()) if info.filename == "[Content_Types].xml"
                          else data)
    return out.getvalue()


def word_letter() -> bytes:
    docx = pytest.importorskip("docx")
    document = docx.Document()
    document.add_paragraph("Refunds take 30 days.")
    plain = io.BytesIO()
    document.save(plain)
    return plain.getvalue()


def slide_deck() -> bytes:
    pptx = pytest.importorskip("pptx")
    deck = pptx.Presentation()
    deck.slides.add_slide(deck.slide_layouts[0]).shapes.title.text = "Refunds take 30 days."
    plain = io.BytesIO()
    deck.save(plain)
    return plain.getvalue()


@pytest.mark.parametrize(("suffix", "content_type"), [
    (".docm", "application/vnd.ms-word.document.macroEnabled.main+xml"),
    (".dotx", "application/vnd.openxmlformats-officedocument.wordprocessingml.template.main+xml"),
    (".dotm", "application/vnd.ms-word.template.macroEnabledTemplate.main+xml"),
    (".pptm", "application/vnd.ms-powerpoint.presentation.macroEnabled.main+xml"),
    (".ppsx", "application/vnd.openxmlformats-officedocument.presentationml.slideshow.main+xml"),
    (".ppsm", "application/vnd.ms-powerpoint.slideshow.macroEnabled.main+xml"),
    (".potx", "application/vnd.openxmlformats-officedocument.presentationml.template.main+xml"),
    (".potm", "application/vnd.ms-powerpoint.template.macroEnabled.main+xml"),
])
def test_macro_enabled_files_templates_and_slide_shows_read_as_their_familys_files(tmp_path, suffix, content_type):
    word = suffix.startswith(".do")
    plain, plain_type = (word_letter(), WORD_TYPE) if word else (slide_deck(), SLIDES_TYPE)
    path = tmp_path / f"refunds{suffix}"
    path.write_bytes(retyped(plain, plain_type, content_type))  # python-docx and python-pptx alone refuse the type
    assert read_document(path)[1] == ("Refunds take 30 days." if word else "## Refunds take 30 days.")


def test_macro_enabled_workbooks_and_binary_templates_are_read_by_their_familys_readers(tmp_path):
    openpyxl = pytest.importorskip("openpyxl")
    workbook = openpyxl.Workbook()
    workbook.active.append(["Region", "Revenue"])
    workbook.active.append(["North", "2.3 M"])
    plain = io.BytesIO()
    workbook.save(plain)
    macros = tmp_path / "sales.xlsm"
    macros.write_bytes(retyped(plain.getvalue(), SHEET_TYPE, "application/vnd.ms-excel.sheet.macroEnabled.main+xml"))
    assert read_document(macros)[1] == "Region: North\nRevenue: 2.3 M"
    assert DocumentText.read(macros).suffix == ".xlsm" and is_record_metadata({"format": "xlsm"})
    for fixture, name in (("store-handbook.doc", "handbook.dot"), ("quarterly-review.ppt", "review.pps"),
                          ("quarterly-review.ppt", "review.pot")):
        shutil.copy(FIXTURES / fixture, tmp_path / name)
        assert read_document(tmp_path / name)[0] in ("Store handbook", "Quarterly review, finance team")
    letter = tmp_path / "letter.dot"  # a .dotx named .dot: read as a package
    docx = pytest.importorskip("docx")
    document = docx.Document()
    document.add_paragraph("Dear customer,")
    document.save(str(letter))
    assert read_document(letter)[1] == "Dear customer,"


def test_a_file_named_as_another_office_familys_is_read_by_the_reader_of_what_it_holds(tmp_path, caplog):
    xlwt = pytest.importorskip("xlwt")
    pytest.importorskip("xlrd")
    book = xlwt.Workbook()
    sheet = book.add_sheet("Prices")
    for row, values in enumerate([("plan", "price"), ("Team", "12.5")]):
        for column, value in enumerate(values):
            sheet.write(row, column, value)
    workbook = tmp_path / "prices.doc"  # an Excel 97-2003 workbook a mail system named .doc
    book.save(str(workbook))
    assert content_suffix(workbook, ".doc") == ".xls"
    with caplog.at_level(logging.INFO, logger="pipeline.retrieval.documents"):
        assert read_document(workbook)[1] == "plan: Team\nprice: 12.5"
    assert "read as a .xls file" in caplog.text
    assert DocumentText.read(workbook).suffix == ".xls"  # chunked as a table's records
    deck = tmp_path / "review.doc"  # a PowerPoint 97-2003 deck under a Word name
    shutil.copy(FIXTURES / "quarterly-review.ppt", deck)
    assert content_suffix(deck, ".doc") == ".ppt"
    assert read_document(deck)[0] == "Quarterly review, finance team"
    letter = tmp_path / "letter.xlsx"  # a Word 97-2003 document under a workbook name
    shutil.copy(FIXTURES / "store-handbook.doc", letter)
    assert content_suffix(letter, ".xlsx") == ".doc"
    assert read_document(letter)[0] == "Store handbook"
    template = tmp_path / "handbook.dot"  # the name's own family: the template keeps its name
    shutil.copy(FIXTURES / "store-handbook.doc", template)
    assert content_suffix(template, ".dot") == ".dot"


def test_packages_of_another_family_and_opendocument_files_under_office_names(tmp_path):
    slides = tmp_path / "minutes.docx"  # a .pptx renamed .docx
    slides.write_bytes(slide_deck())
    assert content_suffix(slides, ".docx") == ".pptx"
    assert read_document(slides)[1] == "## Refunds take 30 days."
    macro_deck = tmp_path / "minutes.pptm"  # its own family: the variant's name stays
    macro_deck.write_bytes(slide_deck())
    assert content_suffix(macro_deck, ".pptm") == ".pptm"
    letter = tmp_path / "letter.xls"
    letter.write_bytes(word_letter())
    assert content_suffix(letter, ".xls") == ".docx"
    assert read_document(letter)[1] == "Refunds take 30 days."
    odt = tmp_path / "policy.docx"  # LibreOffice's own format saved under Word's name
    write_opendocument(odt, "text", "<text:p>Refunds take 30 days.</text:p>")
    assert content_suffix(odt, ".docx") == ".odt"
    assert read_document(odt) == ("policy", "Refunds take 30 days.")
    other_zip = tmp_path / "photos.doc"  # a zip of something else: the name's family, and its reader's error
    with zipfile.ZipFile(other_zip, "w") as archive:
        archive.writestr("photo.txt", "not an office file")
    assert content_suffix(other_zip, ".doc") == ".docx"


def test_a_damaged_container_keeps_the_reader_its_name_chooses(tmp_path):
    broken_ole = tmp_path / "report.xls"
    broken_ole.write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 100)  # OLE magic, nothing behind it
    assert content_suffix(broken_ole, ".xls") == ".xls"
    with pytest.raises(DataError, match=r"report\.xls"):
        read_document(broken_ole)
    broken_zip = tmp_path / "report.docx"
    broken_zip.write_bytes(b"PK\x03\x04" + b"\x00" * 100)
    assert content_suffix(broken_zip, ".docx") == ".docx"
    with pytest.raises(DataError, match=r"report\.docx"):
        read_document(broken_zip)
