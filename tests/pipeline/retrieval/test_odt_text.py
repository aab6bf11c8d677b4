"""An OpenDocument text file (.odt) is read as a Word file is: headings, list labels, table rows, alt text; what a
reader never sees (deleted tracked changes, comments, footnote bodies, generated indexes) is left out."""

import time
import zipfile

import pytest

from models.errors import DataError
from pipeline.retrieval.documents import read_document
from tests.pipeline.conftest import ODF_CHART_OBJECT, OPENDOCUMENT_NS, write_opendocument


def write_odt(path, body: str, styles: str = "", meta_title: str | None = None) -> None:
    write_opendocument(path, "text", body, styles=styles, title=meta_title)


def test_what_a_reader_sees_in_order(tmp_path):
    styles = ('<style:style style:name="P1" style:parent-style-name="Title"/>'
              '<text:list-style style:name="L1"><text:list-level-style-number text:level="1" style:num-format="1" '
              'style:num-suffix="."/><text:list-level-style-number text:level="2" style:num-format="a" '
              'style:num-suffix=")"/></text:list-style>')
    body = (
        '<text:tracked-changes><text:changed-region text:id="c1"><text:deletion><text:p>Refunds take 90 days.'
        "</text:p></text:deletion></text:changed-region></text:tracked-changes>"
        '<text:table-of-content><text:index-body><text:p>Returns .... 1</text:p></text:index-body>'
        "</text:table-of-content>"
        '<text:p text:style-name="P1">Shop   handbook</text:p>'
        '<text:h text:outline-level="2">Returns</text:h><text:h text:outline-level="²">Odd level</text:h>'
        "<text:p>Items can be returned within<text:s text:c=\"2\"/>30 days.<text:note><text:note-citation>1"
        "</text:note-citation><text:note-body><text:p>Except gift cards.</text:p></text:note-body></text:note>"
        "<office:annotation><text:p>check this</text:p></office:annotation>"
        '<draw:frame><svg:title>Return label</svg:title><svg:desc>where the label goes on the box</svg:desc>'
        "</draw:frame>"
        '<draw:frame><draw:text-box><text:p>Keep the receipt.</text:p></draw:text-box></draw:frame></text:p>'
        '<text:list text:style-name="L1"><text:list-item><text:p>Pack the item.</text:p></text:list-item>'
        '<text:list-item><text:p>Print the label.</text:p><text:list><text:list-item><text:p>Use the prepaid one.'
        "</text:p></text:list-item></text:list></text:list-item></text:list>"
        "<text:list><text:list-item><text:p>Damaged items are replaced.</text:p></text:list-item></text:list>"
        "<text:section><table:table><table:table-row><table:table-cell><text:p>Canada</text:p></table:table-cell>"
        "<table:table-cell><text:p>5 to 8 days</text:p></table:table-cell><table:table-cell/></table:table-row>"
        "</table:table></text:section>")
    path = tmp_path / "handbook.odt"
    write_odt(path, body, styles)
    title, text = read_document(path)
    assert title == "Shop handbook"  # no title in meta.xml: the first heading (here the Title-style paragraph)
    assert text == ("# Shop handbook\n\n## Returns\n\n# Odd level\n\nItems can be returned within  30 days.\n\n"
                    "Image: Return label where the label goes on the box\n\nKeep the receipt.\n\n"
                    "1. Pack the item.\n\n2. Print the label.\n\n  a) Use the prepaid one.\n\n"
                    "- Damaged items are replaced.\n\nCanada | 5 to 8 days")
    for unseen in ("90 days", "....", "gift cards", "check this"):
        assert unseen not in text
    write_odt(path, "<text:p>Body.</text:p>", meta_title="Returns  policy")
    assert read_document(path) == ("Returns policy", "Body.")


def test_rows_below_a_tables_heading_rows_read_with_their_column_names(tmp_path):
    def row(*cells: str) -> str:
        return "<table:table-row>" + "".join(f"<table:table-cell><text:p>{c}</text:p></table:table-cell>" if c else
                                             "<table:table-cell/>" for c in cells) + "</table:table-row>"

    body = ("<table:table><table:table-header-rows>" + row("Zone", "Delivery time") + "</table:table-header-rows>"
            + row("EU", "3-5 days") + row("UK", "")
            + "<table:table-row><table:table-cell><text:p>US</text:p></table:table-cell><table:covered-table-cell/>"
              "</table:table-row></table:table>"
            + "<table:table>" + row("Owner", "Ann") + "</table:table>")
    write_odt(tmp_path / "rates.odt", body)
    assert read_document(tmp_path / "rates.odt")[1].split("\n\n") == [
        "Zone | Delivery time", "Zone: EU | Delivery time: 3-5 days", "Zone: UK", "US", "Owner | Ann"]


def test_a_document_docutils_writes_reads_like_its_source(tmp_path):
    from docutils.core import publish_file

    source = tmp_path / "guide.rst"
    source.write_text("Returns\n=======\n\nItems can be returned within 30 days. [#]_\n\n1. Pack the item.\n"
                      "2. Print the label.\n\n.. [#] Except gift cards.\n\n.. note:: Duties are paid on delivery.\n",
                      encoding="utf-8")
    path = tmp_path / "guide.odt"
    publish_file(source_path=str(source), destination_path=str(path), writer="odf_odt",
                 settings_overrides={"report_level": 5})
    title, text = read_document(path)
    assert title == "Returns"
    assert "Items can be returned within 30 days." in text.split("\n\n")
    assert "1. Pack the item." in text.split("\n\n") and "2. Print the label." in text.split("\n\n")
    assert "Duties are paid on delivery." in text and "gift cards" not in text


@pytest.mark.parametrize(("content", "error"), [
    (None, r"not a readable \.odt file"),
    ({"content.xml": "<office:document-content"}, r"content\.xml is not well-formed XML"),
    ({"styles.xml": "<x/>"}, r"content\.xml is missing"),
    ({"content.xml": '<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0">'
                     "<office:body><office:spreadsheet/></office:body></office:document-content>"},
     r"holds no text body"),
    ({"content.xml": '<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0">'
                     + "<x>" * 5000 + "</x>" * 5000 + "</office:document-content>"},
     r"content\.xml nests elements more than 200 deep"),  # read recursively, it would exhaust the stack
], ids=["not a zip", "broken xml", "no content", "a spreadsheet", "nested too deep"])
def test_damaged_and_false_files_are_errors_naming_them(tmp_path, content, error):
    path = tmp_path / "notes.odt"
    if content is None:
        path.write_text("plain text", encoding="utf-8")
    else:
        with zipfile.ZipFile(path, "w") as document:
            for name, data in content.items():
                document.writestr(name, data)
    with pytest.raises(DataError, match=rf"notes\.odt: .*{error}"):
        read_document(path)


@pytest.mark.parametrize(("suffix", "kind", "body", "text"), [
    (".fodt", "text", '<text:h text:outline-level="1">Refunds</text:h><text:p>Refunds take 30 days.</text:p>',
     "# Refunds\n\nRefunds take 30 days."),
    (".fods", "spreadsheet", "<table:table table:name='Prices'><table:table-row><table:table-cell><text:p>Plan"
     "</text:p></table:table-cell><table:table-cell><text:p>Price</text:p></table:table-cell></table:table-row>"
     "<table:table-row><table:table-cell><text:p>Basic</text:p></table:table-cell><table:table-cell><text:p>9 EUR"
     "</text:p></table:table-cell></table:table-row></table:table>", "Plan: Basic\nPrice: 9 EUR"),
    (".fodp", "presentation", '<draw:page><draw:frame presentation:class="title" svg:x="1cm" svg:y="1cm">'
     "<draw:text-box><text:p>Q3 revenue</text:p></draw:text-box></draw:frame></draw:page>", "## Q3 revenue"),
])
def test_flat_opendocument_files_read_as_their_zipped_twins(tmp_path, suffix, kind, body, text):
    path = tmp_path / f"flat{suffix}"  # LibreOffice's "Flat XML": meta, styles and content in one document
    path.write_text(f'<?xml version="1.0" encoding="UTF-8"?>\n<office:document {OPENDOCUMENT_NS}><office:meta>'
                    f"<dc:title>Flat file</dc:title></office:meta><office:body><office:{kind}>{body}</office:{kind}>"
                    "</office:body></office:document>", encoding="utf-8")
    assert read_document(path) == ("Flat file", text)
    path.write_text('<?xml version="1.0"?><office:document-content xmlns:office="urn:oasis:names:tc:opendocument:'
                    'xmlns:office:1.0"/>', encoding="utf-8")
    with pytest.raises(DataError, match=rf"flat\{suffix}: XML, but not a flat OpenDocument file"):
        read_document(path)


def test_a_chart_in_a_text_reads_after_its_paragraph(tmp_path):
    body = ('<text:p>Revenue grew.<draw:frame><draw:object xlink:href="./Object 1"/></draw:frame></text:p>'
            "<text:p>Costs held.</text:p>")
    path = tmp_path / "report.odt"
    write_opendocument(path, "text", body)
    with zipfile.ZipFile(path, "a") as package:
        package.writestr("Object 1/content.xml", ODF_CHART_OBJECT)
    assert read_document(path)[1] == ("Revenue grew.\n\nChart: Revenue by quarter\nRevenue: Q2 3.7, Q3 4.1\n"
                                      "Costs: Q2 2, Q3 2.2\n\nCosts held.")


def test_many_charts_are_read_from_one_opening_of_the_package(tmp_path):
    count = 2000  # opened once per chart, the zip's directory was read 2,000 times: 8 s
    body = "".join(f'<text:p><draw:frame><draw:object xlink:href="./Object {i}"/></draw:frame></text:p>'
                   for i in range(count))
    body += '<text:p><draw:frame><draw:object xlink:href="../outside"/></draw:frame></text:p>'  # never followed
    path = tmp_path / "charts.odt"
    write_opendocument(path, "text", body)
    with zipfile.ZipFile(path, "a") as package:
        for i in range(count):
            package.writestr(f"Object {i}/content.xml", ODF_CHART_OBJECT)
    start = time.perf_counter()
    text = read_document(path)[1]
    assert time.perf_counter() - start < 3
    assert text.count("Chart: Revenue by quarter") == count


def test_a_damaged_chart_object_is_an_error_naming_the_file(tmp_path):
    path = tmp_path / "report.odt"
    write_opendocument(path, "text", '<text:p><draw:frame><draw:object xlink:href="./Object 1"/></draw:frame></text:p>')
    with zipfile.ZipFile(path, "a", zipfile.ZIP_DEFLATED) as package:
        package.writestr("Object 1/content.xml", ODF_CHART_OBJECT)
    data = bytearray(path.read_bytes())
    at = data.index(b"Object 1/content.xml", data.index(b"Object 1/content.xml") + 1)  # the central directory entry
    start = data.index(b"Object 1/content.xml") + len("Object 1/content.xml")  # the local entry's deflated data
    data[start + 5: start + 40] = b"\xff" * 35
    assert at > start
    path.write_bytes(bytes(data))
    with pytest.raises(DataError, match=r"report\.odt: not a readable OpenDocument file \(Error -3"):
        read_document(path)


def test_shapes_with_text_and_nested_frames_read_once_after_their_paragraph(tmp_path):
    # LibreOffice keeps a Word text box it imports as a custom shape holding paragraphs, not as a frame
    shape = ('<draw:custom-shape draw:name="Text Box 7" svg:x="0in" svg:y="0in"><text:p>Returns desk open 9 to 5.'
             '</text:p><text:p>Call 555-0100.</text:p><draw:enhanced-geometry draw:type="ooxml-non-primitive"/>'
             "</draw:custom-shape>")
    picture = ('<draw:frame draw:name="Tag"><draw:image xlink:href="Pictures/tag.png"/><svg:title>A red sale tag'
               "</svg:title></draw:frame>")
    box = f"<draw:frame><draw:text-box><text:p>Members save 5%.{picture}</text:p></draw:text-box></draw:frame>"
    line = '<draw:line svg:x1="0cm" svg:y1="0cm" svg:x2="1cm" svg:y2="1cm"/>'  # a shape without text: nothing
    body = (f"<text:p>Every store takes part.{shape}</text:p><text:p>Second box below.<text:span>{box}</text:span>"
            f"{line}</text:p><text:p>Prices include tax.</text:p>")
    path = tmp_path / "flyer.odt"
    write_odt(path, body)
    assert read_document(path)[1].split("\n\n") == [
        "Every store takes part.", "Returns desk open 9 to 5.", "Call 555-0100.", "Second box below.",
        "Members save 5%.", "Image: A red sale tag", "Prices include tax."]
