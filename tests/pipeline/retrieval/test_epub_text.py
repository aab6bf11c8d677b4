"""An e-book (.epub) is read as its title and its chapters in reading order, each chapter's title a section."""

import zipfile

import pytest

from models.errors import DataError
from pipeline.retrieval.documents import read_document
from pipeline.retrieval.strips import strips_with_sections

CONTAINER = ('<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">'
             '<rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>'
             '</rootfiles></container>')
PACKAGE = """<?xml version="1.0" encoding="UTF-8"?>
<package xmlns="http://www.idpf.org/2007/opf" version="3.0">
  <metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>Field  Guide</dc:title></metadata>
  <manifest>
    <item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>
    <item id="one" href="text/chapter%201.xhtml" media-type="application/xhtml+xml"/>
    <item id="two" href="text/two.xhtml" media-type="application/xhtml+xml"/>
    <item id="css" href="style.css" media-type="text/css"/>
  </manifest>
  <spine><itemref idref="nav"/><itemref idref="two"/><itemref idref="css"/><itemref idref="one"/></spine>
</package>"""


def page(title: str, body: str, encoding: str = "UTF-8") -> bytes:
    return (f'<?xml version="1.0" encoding="{encoding}"?><html xmlns="http://www.w3.org/1999/xhtml"><head>'
            f"<title>{title}</title></head><body>{body}</body></html>").encode(encoding)


def write_epub(path, members: dict[str, bytes | str]) -> None:
    with zipfile.ZipFile(path, "w") as book:
        book.writestr("mimetype", "application/epub+zip")
        for name, data in members.items():
            book.writestr(name, data)


def test_chapters_are_read_in_spine_order_under_their_titles(tmp_path):
    path = tmp_path / "guide.epub"
    write_epub(path, {
        "META-INF/container.xml": CONTAINER, "OEBPS/content.opf": PACKAGE,
        "OEBPS/nav.xhtml": page("Contents", "<nav><ol><li>Chapter one</li><li>Chapter two</li></ol></nav>"),
        "OEBPS/text/two.xhtml": page("Setting up camp", "<p>Pitch the tent on high ground, away from the river.</p>",
                                     encoding="iso-8859-1"),
        "OEBPS/text/chapter 1.xhtml": page("Field Guide", "<h1>Finding water</h1><p>Follow the valley down to the "
                                           "stream.</p><h2>Filtering</h2><p>Boil the water for one full minute.</p>"
                                           "<pre>boil --minutes 1</pre>"),
        "OEBPS/style.css": "p { margin: 0 }",
    })
    title, text = read_document(path)
    assert title == "Field Guide"
    assert text == ("## Setting up camp\n\nPitch the tent on high ground, away from the river.\n\n"
                    "## Finding water\n\nFollow the valley down to the stream.\n\n### Filtering\n\n"
                    "Boil the water for one full minute.\n\n```\nboil --minutes 1\n```")
    assert ("Boil the water for one full minute.", "Finding water › Filtering") in strips_with_sections(text)
    assert ("Pitch the tent on high ground, away from the river.", "Setting up camp") in strips_with_sections(text)


ENCRYPTION = ('<encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container" '
              'xmlns:enc="http://www.w3.org/2001/04/xmlenc#"><enc:EncryptedData><enc:CipherData>'
              '<enc:CipherReference URI="OEBPS/text/two.xhtml"/></enc:CipherData></enc:EncryptedData></encryption>')


def damaged_deflate(path) -> None:
    """A book whose one member's deflate stream is overwritten in the middle."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as book:
        book.writestr("META-INF/container.xml", CONTAINER * 20)
    data = bytearray(path.read_bytes())
    data[60:70] = b"\xff" * 10
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(("members", "error"), [
    ({"META-INF/container.xml": CONTAINER, "OEBPS/content.opf": PACKAGE, "META-INF/encryption.xml": ENCRYPTION,
      "OEBPS/text/two.xhtml": b"\x00\x93encrypted", "OEBPS/text/chapter 1.xhtml": page("x", "<p>y</p>")},
     r"the book's chapters are encrypted \(DRM\)"),
    ({"META-INF/container.xml": CONTAINER, "OEBPS/content.opf": PACKAGE}, r"OEBPS/text/two\.xhtml is missing"),
    ({"META-INF/container.xml": "<container><rootfiles>"}, r"META-INF/container\.xml is not well-formed XML"),
    ({"META-INF/container.xml": '<?xml version="1.0" encoding="utf-x"?><container/>'},
     r"META-INF/container\.xml is not well-formed XML"),
    ({"META-INF/container.xml": "<container/>"}, r"META-INF/container\.xml names no package file"),
    (damaged_deflate, r"not a readable EPUB"),
    ("not a zip", r"not a readable EPUB"),
], ids=["drm", "missing chapter", "broken xml", "unknown encoding", "no rootfile", "damaged deflate", "not a zip"])
def test_encrypted_damaged_and_false_books_are_errors_naming_the_file(tmp_path, members, error):
    path = tmp_path / "book.epub"
    if isinstance(members, dict):
        write_epub(path, members)
    elif isinstance(members, str):
        path.write_text(members, encoding="utf-8")
    else:
        members(path)
    with pytest.raises(DataError, match=rf"book\.epub: {error}"):
        read_document(path)
