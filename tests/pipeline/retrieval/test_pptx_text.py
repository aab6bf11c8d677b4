"""A PowerPoint file is read slide by slide: titles as headings, outlines as lists, tables as rows, notes kept."""

import io

import pytest

from models.errors import DataError
from pipeline.retrieval.documents import chunk_text, read_document
from pipeline.retrieval.strips import strips_with_sections
from tests.pipeline.conftest import (
    ONE_PIXEL_PNG,
    add_pptx_smartart,
    assert_needs_extra,
    smartart_data,
)

pptx = pytest.importorskip("pptx")
from pptx.chart.data import CategoryChartData  # noqa: E402
from pptx.enum.chart import XL_CHART_TYPE  # noqa: E402
from pptx.util import Inches  # noqa: E402


def deck(path):
    presentation = pptx.Presentation()
    presentation.core_properties.title = ""
    cover = presentation.slides.add_slide(presentation.slide_layouts[0])
    cover.shapes.title.text = "Quarterly review"
    cover.placeholders[1].text = "Finance team, October"

    outline = presentation.slides.add_slide(presentation.slide_layouts[1])
    outline.shapes.title.text = "Q3 revenue"
    body = outline.placeholders[1].text_frame
    body.text = "Revenue grew 12% to 4.1 million euros."
    detail = body.add_paragraph()
    detail.text, detail.level = "Subscriptions made most of the growth.", 1
    box = outline.shapes.add_textbox(Inches(1), Inches(6.5), Inches(6), Inches(0.5))
    box.text_frame.text = "Source: ledger export of 2 October."
    outline.notes_slide.notes_text_frame.text = "Mention the one-off licence sale of 0.3 million."

    blank = presentation.slides.add_slide(presentation.slide_layouts[6])
    rows = blank.shapes.add_table(3, 2, Inches(1), Inches(1), Inches(6), Inches(2)).table
    for r, (region, amount) in enumerate([("Region", "Revenue"), ("North", "2.3 M"), ("South", "1.8 M")]):
        rows.cell(r, 0).text, rows.cell(r, 1).text = region, amount
    group = blank.shapes.add_group_shape()
    later = group.shapes.add_textbox(Inches(1), Inches(5), Inches(4), Inches(0.5))
    later.text_frame.text = "Both regions met their targets."

    charted = presentation.slides.add_slide(presentation.slide_layouts[5])
    charted.shapes.title.text = "Trend"
    data = CategoryChartData()
    data.categories = ["Q2", "Q3"]
    data.add_series("Revenue", (3.7, 4.1))
    chart = charted.shapes.add_chart(XL_CHART_TYPE.COLUMN_CLUSTERED, Inches(1), Inches(2), Inches(6), Inches(4),
                                     data).chart
    chart.has_title = True
    chart.chart_title.text_frame.text = "Revenue by quarter"
    for top, alt in ((6, "Map of the two sales regions"), (6.5, "A picture containing text. Description "
                                                                  "automatically generated"), (7, None)):
        picture = charted.shapes.add_picture(io.BytesIO(ONE_PIXEL_PNG), Inches(1), Inches(top))
        if alt:
            picture.element.xpath("./p:nvPicPr/p:cNvPr")[0].set("descr", alt)
    presentation.slides.add_slide(presentation.slide_layouts[6])  # empty and untitled: no section
    presentation.save(path)


def test_slides_are_read_in_order_with_their_titles_outlines_tables_and_notes(tmp_path):
    path = tmp_path / "review.pptx"
    deck(path)
    title, text = read_document(path)
    assert title == "Quarterly review"  # no Title property: the first slide's title
    assert text == ("## Quarterly review\n\nFinance team, October\n\n"
                    "## Q3 revenue\n\n* Revenue grew 12% to 4.1 million euros.\n  * Subscriptions made most of the "
                    "growth.\n\nSource: ledger export of 2 October.\n\n"
                    "Notes: Mention the one-off licence sale of 0.3 million.\n\n"
                    "## Slide 3\n\nRegion | Revenue\nRegion: North | Revenue: 2.3 M\nRegion: South | Revenue: 1.8 M\n\n"
                    "Both regions met their targets.\n\n## Trend\n\nChart: Revenue by quarter\nRevenue: Q2 3.7, "
                    "Q3 4.1\n\nImage: Map of the two sales regions")


def test_table_rows_are_labelled_only_below_a_header_row_and_never_across_merged_cells(tmp_path):
    pptx = pytest.importorskip("pptx")
    from pptx.util import Inches

    presentation = pptx.Presentation()
    for header_row in (True, False):
        slide = presentation.slides.add_slide(presentation.slide_layouts[6])
        table = slide.shapes.add_table(4, 3, Inches(1), Inches(1), Inches(6), Inches(2)).table
        table.first_row = header_row
        for r, row in enumerate([("Plan", "Price", "Seats"), ("Team", "12 EUR", "10"), ("Business", "", "50"),
                                 ("Enterprise", "on request", "")]):
            for c, text in enumerate(row):
                table.cell(r, c).text = text
        table.cell(3, 1).merge(table.cell(3, 2))  # "on request" spans two columns
    path = tmp_path / "plans.pptx"
    presentation.save(path)
    labelled, plain = read_document(path)[1].split("## Slide 2")
    assert labelled.split("\n\n")[1] == ("Plan | Price | Seats\nPlan: Team | Price: 12 EUR | Seats: 10\n"
                                         "Plan: Business | Seats: 50\nEnterprise | on request")
    assert plain.strip() == "Plan | Price | Seats\nTeam | 12 EUR | 10\nBusiness | 50\nEnterprise | on request"


def test_a_strip_of_a_slide_is_named_by_the_slide(tmp_path):
    path = tmp_path / "review.pptx"
    deck(path)
    chunk = next(c for c in chunk_text(read_document(path)[1], max_chars=300) if "Revenue grew" in c)
    assert ("Revenue grew 12% to 4.1 million euros.", "Q3 revenue") in strips_with_sections(chunk)


def test_a_file_that_is_not_a_presentation_is_an_error_naming_it(tmp_path):
    path = tmp_path / "old.pptx"
    path.write_bytes(b"\xd0\xcf\x11\xe0 an old binary .ppt renamed")
    with pytest.raises(DataError, match=r"old\.pptx: not a readable \.pptx file .* a PowerPoint 97-2003 file is "
                                       r"read from a file named \.ppt"):
        read_document(path)


def test_without_the_pptx_extra_the_error_names_it(tmp_path, monkeypatch):
    deck(tmp_path / "review.pptx")
    assert_needs_extra(tmp_path / "review.pptx", "pptx", "pptx", monkeypatch)


def test_a_smartart_diagram_reads_as_an_outline_of_its_nodes_in_its_place(tmp_path):
    presentation = pptx.Presentation()
    slide = presentation.slides.add_slide(presentation.slide_layouts[5])  # title only
    slide.shapes.title.text = "How a refund works"
    steps = [("Request", ["Online form", "or call 555-0100"]), ("Review|by the team", []),
             ("Refund", ["within 30 days"])]
    add_pptx_smartart(slide, smartart_data(steps), top=2_000_000)
    note = slide.shapes.add_textbox(Inches(0.5), Inches(6.5), Inches(8), Inches(0.5))
    note.text_frame.text = "Gift cards are not refunded."
    add_pptx_smartart(slide, b'<dgm:dataModel xmlns:dgm="http://schemas.openxmlformats.org/drawingml/2006/diagram">'
                             b"<dgm:ptLst/><dgm:cxnLst/></dgm:dataModel>", top=1_500_000)  # an empty one: nothing
    path = tmp_path / "refunds.pptx"
    presentation.save(str(path))
    assert read_document(path)[1] == ("## How a refund works\n\n* Request\n  * Online form\n  * or call 555-0100\n"
                                      "* Review by the team\n* Refund\n  * within 30 days\n\n"
                                      "Gift cards are not refunded.")


def test_a_damaged_smartart_diagram_is_an_error_naming_the_file(tmp_path):
    presentation = pptx.Presentation()
    slide = presentation.slides.add_slide(presentation.slide_layouts[6])
    add_pptx_smartart(slide, b"<dgm:dataModel", top=1_000_000)
    path = tmp_path / "broken.pptx"
    presentation.save(str(path))
    with pytest.raises(DataError, match=r"broken\.pptx: a SmartArt diagram's data is not well-formed XML"):
        read_document(path)


def one_slide_deck_saved(path, title: str, change) -> None:
    """A deck of one titled slide saved to ``path``, each member of its package passed through ``change(name,
    bytes)`` on the way (None leaves the member out)."""
    import zipfile

    presentation = pptx.Presentation()
    presentation.slides.add_slide(presentation.slide_layouts[5]).shapes.title.text = title
    whole = io.BytesIO()
    presentation.save(whole)
    with zipfile.ZipFile(io.BytesIO(whole.getvalue())) as source, zipfile.ZipFile(path, "w") as copy:
        for info in source.infolist():
            data = change(info.filename, source.read(info))
            if data is not None:
                copy.writestr(info, data)


def test_a_damaged_slide_is_an_error_naming_the_file(tmp_path):
    def without_shape_tree(name, data):  # well-formed XML, which python-pptx parses only when the slide is read
        return data.replace(b"p:cSld>", b"p:cSldX>") if name == "ppt/slides/slide1.xml" else data

    one_slide_deck_saved(tmp_path / "damaged.pptx", "Q3", without_shape_tree)
    with pytest.raises(DataError, match=r"damaged\.pptx: a damaged slide \(InvalidXmlError"):
        read_document(tmp_path / "damaged.pptx")


def test_a_deck_without_document_properties_is_titled_by_its_first_slide(tmp_path):
    def without_properties(name, data):  # python-pptx would title the deck "PowerPoint Presentation"
        if name == "docProps/core.xml":
            return None
        return data.replace(b"metadata/core-properties", b"metadata/none") if name == "_rels/.rels" else data

    one_slide_deck_saved(tmp_path / "deck.pptx", "Q3 review", without_properties)
    assert read_document(tmp_path / "deck.pptx")[0] == "Q3 review"
