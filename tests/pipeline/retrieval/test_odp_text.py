"""An OpenDocument presentation (.odp) is read as a PowerPoint file is: slide titles as headings, frames in reading
order, alt text and speaker notes; page furniture left out."""

import zipfile

import pytest

from models.errors import DataError
from pipeline.retrieval.documents import read_document
from pipeline.retrieval.strips import strips_with_sections
from tests.pipeline.conftest import ODF_CHART_OBJECT, write_opendocument


def frame(kind: str, x: str, y: str, inner: str) -> str:
    cls = f' presentation:class="{kind}"' if kind else ""
    return f'<draw:frame{cls} svg:x="{x}" svg:y="{y}">{inner}</draw:frame>'


def box(*paragraphs: str) -> str:
    return "<draw:text-box>" + "".join(f"<text:p>{p}</text:p>" for p in paragraphs) + "</draw:text-box>"


def test_slides_read_in_order_with_their_titles_frames_and_notes(tmp_path):
    styles = ('<text:list-style style:name="L1"><text:list-level-style-number text:level="1" style:num-format="1" '
              'style:num-suffix="."/></text:list-style>')
    first = ('<draw:page draw:name="page1">'
             + frame("outline", "1cm", "5cm", '<draw:text-box><text:list text:style-name="L1"><text:list-item>'
                     "<text:p>Refunds within 30 days.</text:p></text:list-item><text:list-item><text:p>Store credit "
                     "after that.</text:p></text:list-item></text:list></draw:text-box>")
             + frame("title", "1cm", "1cm", box("Refund   policy"))
             + frame("", "1cm", "12cm", '<draw:image xlink:href="x.png"/><svg:title>Refund flow chart</svg:title>')
             + frame("footer", "1cm", "18cm", box("Confidential"))
             + frame("page-number", "20cm", "18cm", box("1"))
             # a PowerPoint text box as LibreOffice writes it: a shape with paragraphs of its own; a shape without
             + '<draw:custom-shape svg:x="1cm" svg:y="14cm"><text:p>Source: the ledger.</text:p>'
               "<draw:enhanced-geometry/></draw:custom-shape>" + '<draw:rect svg:x="1cm" svg:y="15cm"/>'
             + '<presentation:notes>' + frame("notes", "1cm", "1cm", box("Mention the holiday extension."))
             + frame("page-number", "1cm", "20cm", box("<text:page-number>&lt;number&gt;</text:page-number>"))
             + "</presentation:notes></draw:page>")
    second = ('<draw:page draw:name="page2"><draw:g>'
              + frame("", "10cm", "2cm", box("Right column."))
              + frame("", "1in", "2cm", box("Left column."))
              + "</draw:g>"
              + frame("", "1cm", "8cm", "<table:table><table:table-row><table:table-cell><text:p>Canada</text:p>"
                      "</table:table-cell><table:table-cell><text:p>5 to 8 days</text:p></table:table-cell>"
                      "</table:table-row></table:table>")
              + "</draw:page>")
    empty = '<draw:page draw:name="page3">' + frame("footer", "0cm", "0cm", box("Confidential")) + "</draw:page>"
    path = tmp_path / "refunds.odp"
    write_opendocument(path, "presentation", first + second + empty, styles=styles)
    title, text = read_document(path)
    assert title == "Refund policy"  # no title in meta.xml: the first slide's
    assert text == ("## Refund policy\n\n1. Refunds within 30 days.\n\n2. Store credit after that.\n\n"
                    "Image: Refund flow chart\n\nSource: the ledger.\n\nNotes: Mention the holiday extension.\n\n"
                    "## Slide 2\n\nLeft column.\n\nRight column.\n\nCanada | 5 to 8 days")
    assert "Confidential" not in text
    assert ("Mention the holiday extension.", "Refund policy") in [
        (strip.removeprefix("Notes: "), section) for strip, section in strips_with_sections(text)]


def test_a_table_whose_first_row_is_styled_as_a_header_reads_with_its_column_names(tmp_path):
    def row(*cells: str) -> str:
        return ("<table:table-row>" + "".join(f"<table:table-cell><text:p>{c}</text:p></table:table-cell>"
                                              for c in cells) + "</table:table-row>")

    rows = row("Zone", "Delivery time") + row("Canada", "5 to 8 days")
    page = ('<draw:page draw:name="p">'
            + frame("", "1cm", "1cm", f'<table:table table:use-first-row-styles="true">{rows}</table:table>')
            + frame("", "1cm", "9cm", f'<table:table table:use-first-row-styles="false">{rows}</table:table>')
            + "</draw:page>")
    path = tmp_path / "shipping.odp"
    write_opendocument(path, "presentation", page)
    assert read_document(path)[1] == ("## Slide 1\n\nZone | Delivery time\n\nZone: Canada | Delivery time: 5 to 8 "
                                      "days\n\nZone | Delivery time\n\nCanada | 5 to 8 days")


def test_a_file_that_is_not_a_presentation_is_an_error_naming_it(tmp_path):
    path = tmp_path / "deck.odp"
    write_opendocument(path, "text", "<text:p>Body.</text:p>")
    with pytest.raises(DataError, match=r"deck\.odp: content\.xml holds no presentation"):
        read_document(path)


def test_a_chart_reads_as_its_title_and_series_as_a_powerpoint_chart_does(tmp_path):
    page = ('<draw:page>' + frame("title", "1cm", "1cm", box("Trend"))
            + frame("", "1cm", "5cm", '<draw:object xlink:href="./Object 1"/><draw:image xlink:href="./ObjectRepl"/>')
            + frame("", "1cm", "9cm", '<draw:object xlink:href="./Object 2"/>')  # an object that is not a chart
            + frame("", "1cm", "12cm", '<draw:object xlink:href="../../etc"/>') + "</draw:page>")
    path = tmp_path / "trend.odp"
    write_opendocument(path, "presentation", page)
    with zipfile.ZipFile(path, "a") as package:
        package.writestr("Object 1/content.xml", ODF_CHART_OBJECT)
        package.writestr("Object 2/content.xml", ODF_CHART_OBJECT.replace("office:chart>", "office:drawing>"))
    assert read_document(path)[1] == ("## Trend\n\nChart: Revenue by quarter\nRevenue: Q2 3.7, Q3 4.1\n"
                                      "Costs: Q2 2, Q3 2.2")
