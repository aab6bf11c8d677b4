"""Word files are read in document order, headings as Markdown, page headers left out."""

import io

import docx
import pytest
from docx.oxml.ns import qn

from models import DataError
from pipeline.retrieval.documents import chunk_text, read_document
from pipeline.retrieval.ingest import collect_files
from pipeline.retrieval.strips import sentence_strips
from tests.pipeline.conftest import (
    DIAGRAM_DATA_REL,
    DIAGRAM_DATA_TYPE,
    ONE_PIXEL_PNG,
    add_docx_chart,
    docx_inline_run,
    smartart_data,
    smartart_graphic_data,
)


def _handbook(path, title=""):
    document = docx.Document()
    document.core_properties.title = title
    document.sections[0].header.paragraphs[0].text = "ACME confidential - do not forward"
    document.add_heading("Returns handbook", 0)
    document.add_paragraph("Refunds are accepted   within thirty days.")
    document.add_heading("Exchanges", level=2)
    document.add_paragraph("Bring the receipt to any store.", style="List Bullet")
    table = document.add_table(rows=2, cols=3)
    for cell, text in zip(table.rows[0].cells, ("Zone", "Days", "Cost"), strict=True):
        cell.text = text
    table.cell(1, 0).merge(table.cell(1, 1)).text = "EU"
    table.cell(1, 2).text = "Free"
    document.add_paragraph("")
    document.add_paragraph("Shipping back is paid by the customer.")
    document.save(str(path))
    return path


def test_a_word_file_reads_in_order_with_markdown_headings(tmp_path):
    title, text = read_document(_handbook(tmp_path / "handbook.docx"))
    assert title == "Returns handbook"
    assert text.split("\n\n") == ["# Returns handbook", "Refunds are accepted within thirty days.", "## Exchanges",
                                  "- Bring the receipt to any store.", "Zone | Days | Cost", "EU | Free",
                                  "Shipping back is paid by the customer."]
    assert "confidential" not in text  # the page header is not body text
    strips = [s for chunk in chunk_text(text) for s in sentence_strips(chunk)]
    assert strips[0] == "Refunds are accepted within thirty days."  # headings are never quoted


def test_rows_below_a_repeated_header_row_read_with_their_column_names(tmp_path):
    document = docx.Document()
    table = document.add_table(rows=4, cols=3)
    for r, row in enumerate((("Zone", "Delivery time", "Cost"), ("EU", "3-5 days", "4.90"), ("UK", "", "9.90"),
                             ("US", "7-10 days", "14.90"))):
        for cell, text in zip(table.rows[r].cells, row, strict=True):
            cell.text = text
    table.cell(3, 1).merge(table.cell(3, 2))  # a merged cell: whose column name would lead it?
    header = table.rows[0]._tr.get_or_add_trPr()
    header.append(header.makeelement(qn("w:tblHeader"), {}))  # Word's "Repeat as header row"
    plain = document.add_table(rows=2, cols=2)  # no header row: a name and its value per row
    for r, row in enumerate((("Owner", "Ann"), ("Review", "Yearly"))):
        for cell, text in zip(plain.rows[r].cells, row, strict=True):
            cell.text = text
    document.save(str(tmp_path / "rates.docx"))
    assert read_document(tmp_path / "rates.docx")[1].split("\n\n") == [
        "Zone | Delivery time | Cost", "Zone: EU | Delivery time: 3-5 days | Cost: 4.90", "Zone: UK | Cost: 9.90",
        "US | 7-10 days 14.90", "Owner | Ann", "Review | Yearly"]


def test_pictures_read_as_the_alt_text_their_author_wrote(tmp_path):
    document = docx.Document()
    document.add_paragraph("The returns desk is at the back of the store.")
    for alt in ("Floor plan: the returns desk is left of the exit", "A picture containing indoor, floor. "
                "Description automatically generated", None):
        document.add_picture(io.BytesIO(ONE_PIXEL_PNG))  # python-docx names the picture by its file: "image.png"
        if alt:
            document.paragraphs[-1]._p.xpath(".//wp:docPr")[0].set("descr", alt)
    path = tmp_path / "store.docx"
    document.save(str(path))
    assert read_document(path)[1] == ("The returns desk is at the back of the store.\n\n"
                                      "Image: Floor plan: the returns desk is left of the exit")


def test_numbered_list_paragraphs_keep_their_numbers(tmp_path):
    document = docx.Document()
    document.add_paragraph("To return an order:")
    for step in ("Open the orders page", "Choose the order"):
        document.add_paragraph(step, style="List Number")
    document.add_paragraph("Keep the receipt", style="List Bullet")
    document.add_paragraph("Then wait for the refund", style="List Number")  # the same list goes on, as Word shows
    document.save(str(tmp_path / "steps.docx"))
    assert read_document(tmp_path / "steps.docx")[1].split("\n\n") == [
        "To return an order:", "1. Open the orders page", "2. Choose the order", "- Keep the receipt",
        "3. Then wait for the refund"]


def _numbered(paragraph, num_id, level=0):
    """Number a paragraph directly (its own w:numPr), as Word does for a list typed into a "List Paragraph"."""
    from docx.oxml import parse_xml

    paragraph._p.get_or_add_pPr().append(parse_xml(
        f'<w:numPr xmlns:w="{W_NS}"><w:ilvl w:val="{level}"/><w:numId w:val="{num_id}"/></w:numPr>'))


W_NS = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"


def test_word_numbering_definitions_give_nested_lettered_and_restarted_labels(tmp_path):
    from docx.oxml import parse_xml

    document = docx.Document()
    numbering = document.part.numbering_part.element
    levels = [("decimal", "%1.", 1), ("lowerLetter", "%2)", 1), ("upperRoman", "%1.%3", 4)]
    numbering.append(parse_xml(f'<w:abstractNum xmlns:w="{W_NS}" w:abstractNumId="90">' + "".join(
        f'<w:lvl w:ilvl="{i}"><w:start w:val="{start}"/><w:numFmt w:val="{fmt}"/><w:lvlText w:val="{text}"/></w:lvl>'
        for i, (fmt, text, start) in enumerate(levels)) + "</w:abstractNum>"))
    numbering.append(parse_xml(f'<w:num xmlns:w="{W_NS}" w:numId="90"><w:abstractNumId w:val="90"/></w:num>'))
    numbering.append(parse_xml(  # a second list on the same definition that starts at 7
        f'<w:num xmlns:w="{W_NS}" w:numId="91"><w:abstractNumId w:val="90"/>'
        '<w:lvlOverride w:ilvl="0"><w:startOverride w:val="7"/></w:lvlOverride></w:num>'))
    items = [("Install the tool", 90, 0), ("Download it", 90, 1), ("Unpack it", 90, 1), ("Check the hash", 90, 2),
             ("Configure it", 90, 0), ("Set the key", 90, 1), ("Later steps", 91, 0), ("Not numbered", 0, 0)]
    for text, num_id, level in items:
        _numbered(document.add_paragraph(text, style="List Paragraph"), num_id, level)
    document.add_paragraph("A plain paragraph in a list style shows no label", style="List Paragraph")
    document.save(str(tmp_path / "manual.docx"))
    assert read_document(tmp_path / "manual.docx")[1].split("\n\n") == [
        "1. Install the tool", "a) Download it", "b) Unpack it", "1.IV Check the hash", "2. Configure it",
        "a) Set the key", "7. Later steps", "Not numbered", "A plain paragraph in a list style shows no label"]


def test_the_title_property_names_the_document_and_folders_find_word_files(tmp_path):
    path = _handbook(tmp_path / "h.docx", title="Store policy 2026")
    assert read_document(path)[0] == "Store policy 2026"
    assert collect_files([tmp_path]) == [path]


def test_a_damaged_or_old_word_file_is_a_clear_error(tmp_path):
    (tmp_path / "old.docx").write_bytes(b"\xd0\xcf\x11\xe0 an OLE .doc renamed")
    with pytest.raises(DataError, match=r"old\.docx: not a readable \.docx file.*read from a file named \.doc$"):
        read_document(tmp_path / "old.docx")
    document = docx.Document()
    document.element.remove(document.element.body)  # a document part without its body
    document.save(str(tmp_path / "bodiless.docx"))
    with pytest.raises(DataError, match=r"bodiless\.docx: its document part has no body"):
        read_document(tmp_path / "bodiless.docx")


def test_without_the_docx_extra_a_word_file_is_named_and_can_be_skipped(tmp_path, monkeypatch):
    import sys

    from models import MissingDependencyError
    from pipeline.retrieval.index import LocalHybridIndex
    from pipeline.retrieval.ingest import ingest
    from tests.pipeline.conftest import HashEmbedder

    _handbook(tmp_path / "handbook.docx")
    (tmp_path / "notes.md").write_text("Plain notes here.", encoding="utf-8")
    monkeypatch.setitem(sys.modules, "docx", None)  # as if python-docx were not installed
    index = LocalHybridIndex(tmp_path / "idx", embedder=HashEmbedder())
    with pytest.raises(MissingDependencyError, match=r"crag-grader\[docx\].*--skip-errors"):
        ingest(index, [tmp_path], tenant="t")
    assert not (tmp_path / "idx" / "index.sqlite").exists()  # nothing written
    report = ingest(index, [tmp_path], tenant="t", skip_errors=True)
    assert report.files == 1 and report.skipped[0]["path"].endswith("handbook.docx")
    assert "crag-grader[docx]" in report.skipped[0]["reason"]


def test_without_the_rag_extra_markdown_and_pdf_are_not_one_files_problem(tmp_path, monkeypatch):
    """Markdown and PDF readers belong to the index's own extra: its absence stops the run, with nothing written
    and no advice to skip files."""
    import sys

    from models import MissingDependencyError
    from pipeline.retrieval import markdown_text
    from pipeline.retrieval.index import LocalHybridIndex
    from pipeline.retrieval.ingest import ingest
    from tests.pipeline.conftest import HashEmbedder

    (tmp_path / "notes.md").write_text("Plain notes here.", encoding="utf-8")
    monkeypatch.setitem(sys.modules, "markdown_it", None)
    markdown_text._parser.cache_clear()  # as in a process that never had the parser (cleared again below)
    index = LocalHybridIndex(tmp_path / "idx", embedder=HashEmbedder())
    with pytest.raises(MissingDependencyError, match=r"crag-grader\[rag\]'$"):
        ingest(index, [tmp_path], tenant="t", skip_errors=True)
    assert not (tmp_path / "idx" / "index.sqlite").exists()
    markdown_text._parser.cache_clear()


def _text_box(paragraphs: str, *, alt: str = "") -> str:
    """A run holding a text box as Word writes one: a DrawingML shape and the same box again as a VML fallback."""
    return (
        '<w:r xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main" '
        'xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006" '
        'xmlns:wp="http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing" '
        'xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" '
        'xmlns:wps="http://schemas.microsoft.com/office/word/2010/wordprocessingShape" '
        'xmlns:v="urn:schemas-microsoft-com:vml"><mc:AlternateContent><mc:Choice Requires="wps"><w:drawing>'
        f'<wp:anchor><wp:docPr id="7" name="Text Box 7" descr="{alt}"/><a:graphic><a:graphicData '
        'uri="http://schemas.microsoft.com/office/word/2010/wordprocessingShape"><wps:wsp><wps:txbx><w:txbxContent>'
        f"{paragraphs}</w:txbxContent></wps:txbx></wps:wsp></a:graphicData></a:graphic></wp:anchor></w:drawing>"
        f"</mc:Choice><mc:Fallback><w:pict><v:shape><v:textbox><w:txbxContent>{paragraphs}</w:txbxContent>"
        "</v:textbox></v:shape></w:pict></mc:Fallback></mc:AlternateContent></w:r>")


def test_text_boxes_read_once_after_the_paragraph_they_are_anchored_in(tmp_path):
    from docx.oxml import parse_xml

    document = docx.Document()
    flyer = document.add_paragraph("Spring sale at every store.")
    inner_picture = ('<w:r><w:drawing><wp:inline><wp:docPr id="9" name="Picture 9" descr="A red sale tag"/>'
                     "</wp:inline></w:drawing></w:r>")
    nested = _text_box("<w:p><w:r><w:t>Members save another 5%.</w:t></w:r></w:p>")
    box = ('<w:p><w:pPr><w:pStyle w:val="Heading2"/></w:pPr><w:r><w:t>Returns desk</w:t></w:r></w:p>'
           "<w:p><w:r><w:t>Open   9 to 5, call 555-0100.</w:t></w:r>" + inner_picture + nested + "</w:p>"
           "<w:tbl><w:tr><w:tc><w:p><w:r><w:t>Mon</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>closed</w:t></w:r>"
           "</w:p></w:tc></w:tr></w:tbl>")
    flyer._p.append(parse_xml(_text_box(box, alt="Returns panel")))
    document.add_paragraph("Prices include tax.")
    path = tmp_path / "flyer.docx"
    document.save(str(path))
    assert read_document(path)[1].split("\n\n") == [
        "Spring sale at every store.", "Image: Returns panel", "## Returns desk", "Open 9 to 5, call 555-0100.",
        "Image: A red sale tag", "Members save another 5%.", "Mon | closed", "Prices include tax."]


W_DECL = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'


def _control(content: str, gallery: str = "") -> str:
    """A content control (``w:sdt``) around ``content``, a building block of ``gallery`` when one is named."""
    properties = (f'<w:docPartObj><w:docPartGallery w:val="{gallery}"/></w:docPartObj>' if gallery
                  else '<w:alias w:val="Field"/>')
    return f"<w:sdt {W_DECL}><w:sdtPr>{properties}</w:sdtPr><w:sdtContent>{content}</w:sdtContent></w:sdt>"


def test_content_controls_tracked_changes_and_repeating_rows_read_as_word_shows_them(tmp_path):
    from docx.oxml import parse_xml

    document = docx.Document()
    body = document.element.body
    body.insert(0, parse_xml(_control('<w:p><w:pPr><w:pStyle w:val="Title"/></w:pPr><w:r><w:t>Claim form</w:t>'
                                      "</w:r></w:p>", gallery="Cover Pages")))
    body.insert(1, parse_xml(_control("<w:p><w:r><w:t>Claim form ........ 1</w:t></w:r></w:p>",
                                      gallery="Table of Contents")))  # repeats the headings: left out
    name = document.add_paragraph("Customer: ")
    name._p.append(parse_xml(_control("<w:r><w:t>Jane Roe</w:t></w:r>")))  # a filled-in form field
    changed = document.add_paragraph("Refunds take ")
    changed._p.append(parse_xml(f"<w:del {W_DECL} w:id=\"1\" w:author=\"A\"><w:r><w:delText>90</w:delText></w:r>"
                                "</w:del>"))
    changed._p.append(parse_xml(f"<w:ins {W_DECL} w:id=\"2\" w:author=\"A\"><w:r><w:t>30</w:t></w:r></w:ins>"))
    changed.add_run(" days.")
    table = document.add_table(rows=1, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "Item", "Amount"
    table.rows[0]._tr.get_or_add_trPr().append(parse_xml(f"<w:tblHeader {W_DECL}/>"))
    cell = '<w:tc><w:p><w:r><w:t>{}</w:t></w:r></w:p></w:tc>'
    table._tbl.append(parse_xml(_control(  # a repeating section: rows inside a control, a control inside a cell
        "<w:tr>" + cell.format("Taxi") + "<w:tc>" + _control("<w:p><w:r><w:t>42 EUR</w:t></w:r></w:p>") + "</w:tc>"
        "</w:tr><w:tr>" + cell.format("Hotel") + cell.format("120 EUR") + "</w:tr>")))
    path = tmp_path / "claim.docx"
    document.save(str(path))
    assert read_document(path) == ("Claim form", "# Claim form\n\nCustomer: Jane Roe\n\nRefunds take 30 days.\n\n"
                                                 "Item | Amount\n\nItem: Taxi | Amount: 42 EUR\n\n"
                                                 "Item: Hotel | Amount: 120 EUR")


def test_a_smartart_diagram_reads_as_an_outline_after_its_paragraph(tmp_path):
    from docx.opc.packuri import PackURI
    from docx.opc.part import Part
    from docx.oxml import parse_xml

    document = docx.Document()
    anchor = document.add_paragraph("Our refund process:")
    part = Part(PackURI("/word/diagrams/data1.xml"), DIAGRAM_DATA_TYPE,
                smartart_data([("Request", ["Online form"]), ("Refund", ["within 30 days"])]), document.part.package)
    rid = document.part.relate_to(part, DIAGRAM_DATA_REL)
    anchor._p.append(parse_xml(docx_inline_run(smartart_graphic_data(rid), 3)))
    document.add_paragraph("Gift cards are not refunded.")
    path = tmp_path / "refunds.docx"
    document.save(str(path))
    assert read_document(path)[1].split("\n\n") == [
        "Our refund process:", "- Request", "  - Online form", "- Refund", "  - within 30 days",
        "Gift cards are not refunded."]


def test_a_chart_reads_as_its_title_and_series_after_its_paragraph(tmp_path):
    pytest.importorskip("pptx")  # only to write the chart's XML, as Office does
    from pptx.chart.data import CategoryChartData, XyChartData
    from pptx.chart.xmlwriter import ChartXmlWriter
    from pptx.enum.chart import XL_CHART_TYPE

    def chart_xml(kind, data, title: str = "") -> bytes:
        space = ChartXmlWriter(kind, data).xml
        if title:
            space = space.replace("<c:chart>", f"<c:chart><c:title><c:tx><c:rich><a:bodyPr/><a:p><a:r><a:t>{title}"
                                               "</a:t></a:r></a:p></c:rich></c:tx></c:title>", 1)
        return space.encode()

    document = docx.Document()
    columns = CategoryChartData()
    columns.categories = ["Q2", "Q3"]
    columns.add_series("Revenue", (3.7, 4.1))
    columns.add_series("Costs", (2.0, None))  # a point without a value is left out
    add_docx_chart(document, document.add_paragraph("Revenue grew."),
                   chart_xml(XL_CHART_TYPE.COLUMN_CLUSTERED, columns, "Revenue by quarter"), 1)
    scatter = XyChartData()
    scatter.add_series("Price").add_data_point(1.5, 10)
    add_docx_chart(document, document.add_paragraph("Demand:"), chart_xml(XL_CHART_TYPE.XY_SCATTER, scatter), 2)
    path = tmp_path / "report.docx"
    document.save(str(path))
    assert read_document(path)[1].split("\n\n") == [
        "Revenue grew.", "Chart: Revenue by quarter\nRevenue: Q2 3.7, Q3 4.1\nCosts: Q2 2", "Demand:",
        "Price: 1.5 10"]


def test_imported_chunks_read_in_their_place(tmp_path, caplog):
    # what html-docx-js and other "Export to Word" code writes: the page as a web archive the document imports whole
    from docx.opc.packuri import PackURI
    from docx.opc.part import Part
    from docx.oxml import parse_xml

    archive = ("MIME-Version: 1.0\r\nContent-Type: multipart/related; type=\"text/html\"; boundary=\"--b\"\r\n\r\n"
               "----b\r\nContent-Type: text/html; charset=utf-8\r\nContent-Location: file:///C:/chunk.htm\r\n\r\n"
               "<html><body><h2>Returns</h2><ol><li>Pack the item.</li><li>Print the label.</li></ol>"
               "<table><tr><td><p>Zone</p></td><td><p>Days</p></td></tr></table></body></html>\r\n----b--\r\n")
    document = docx.Document()
    document.add_paragraph("Before the chunks.")
    relationship = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/aFChunk"
    for name, content_type, data in [
            ("afchunk.mht", "message/rfc822", archive.encode()),
            ("chunk2.bin", "text/html", "<p>Caf\u00e9 opens at 9.</p>".encode()),  # its type from its content type
            ("chunk3.txt", "text/plain", b"Plain words."),
            ("chunk4.bin", "application/x-unknown", b"\x00\x01"),  # not read, and said so
            ("chunk5.rtf", "application/rtf", b"not RTF at all")]:  # unreadable: left out, and said so
        part = Part(PackURI(f"/word/{name}"), content_type, data, document.part.package)
        rid = document.part.relate_to(part, relationship)
        document.element.body.insert(len(document.element.body) - 1, parse_xml(
            '<w:altChunk xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main" '
            f'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships" r:id="{rid}"/>'))
    document.add_paragraph("After the chunks.")
    path = tmp_path / "export.docx"
    document.save(str(path))
    with caplog.at_level("INFO", logger="pipeline.retrieval.docx_text"):
        title, text = read_document(path)
    assert title == "Returns"
    assert text.split("\n\n") == ["Before the chunks.", "## Returns", "1. Pack the item.", "2. Print the label.",
                                  "Zone | Days", "Caf\u00e9 opens at 9.", "Plain words.", "After the chunks."]
    assert "application/x-unknown" in caplog.text and "export.docx (imported chunk): not an RTF file" in caplog.text


def test_a_word_file_as_html_docx_js_writes_one_reads_as_its_page(tmp_path):
    # a package of nothing but a body importing a web archive, and no document properties: python-docx makes up a
    # "Word Document" title for it, which is not the document's
    import quopri
    import zipfile

    page = ('<!DOCTYPE html><html><head><meta charset="UTF-8"></head><body><h1 class="name">Inspection report</h1>'
            "<p>Roof: two tiles loose \u2013 fix before winter.</p><ul><li>Gutter clear</li></ul></body></html>")
    archive = ('MIME-Version: 1.0\nContent-Type: multipart/related;\n    type="text/html";\n'
               '    boundary="----=mhtDocumentPart"\n\n\n------=mhtDocumentPart\nContent-Type: text/html;\n'
               '    charset="utf-8"\nContent-Transfer-Encoding: quoted-printable\n'
               "Content-Location: file:///C:/fake/document.html\n\n"
               + quopri.encodestring(page.encode()).decode("ascii") + "\n\n\n------=mhtDocumentPart--\n")
    relationships = '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
    path = tmp_path / "report.docx"
    with zipfile.ZipFile(path, "w") as package:
        package.writestr("[Content_Types].xml", (
            '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" '
            'ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Override '
            'PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.'
            'wordprocessingml.document.main+xml"/><Override PartName="/word/afchunk.mht" '
            'ContentType="message/rfc822"/></Types>'))
        package.writestr("_rels/.rels", relationships + (
            '<Relationship Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" '
            'Target="/word/document.xml" Id="R1"/></Relationships>'))
        package.writestr("word/document.xml", (
            '<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main" '
            'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><w:body>'
            '<w:altChunk r:id="htmlChunk"/><w:sectPr/></w:body></w:document>'))
        package.writestr("word/_rels/document.xml.rels", relationships + (
            '<Relationship Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/aFChunk" '
            'Target="/word/afchunk.mht" Id="htmlChunk"/></Relationships>'))
        package.writestr("word/afchunk.mht", archive)
    assert read_document(path) == ("Inspection report", "# Inspection report\n\nRoof: two tiles loose \u2013 fix "
                                                        "before winter.\n\n- Gutter clear")
