"""PDF text lines become paragraphs: headings apart, hyphenated words joined, running headers left out."""

import pytest

from pipeline.retrieval.documents import chunk_text, read_document
from pipeline.retrieval.pdf_text import pdf_paragraphs
from pipeline.retrieval.strips import sentence_strips

PAGE = """Refunds are accepted within thirty
days of purchase when the product
was not used. Shipping costs are not
refunded under any circum-
stances whatsoever.
Exchanges
An exchange is possible for items of
equal value.
Call us."""


def test_line_lengths_end_paragraphs_and_mark_headings():
    assert pdf_paragraphs([PAGE]).split("\n\n") == [
        "Refunds are accepted within thirty days of purchase when the product was not used. Shipping costs are "
        "not refunded under any circumstances whatsoever.",
        "Exchanges",
        "An exchange is possible for items of equal value.",
        "Call us.",
    ]


def test_a_hyphen_between_words_that_are_not_split_stays():
    assert pdf_paragraphs(["The long-\nTerm plan is fixed here and that is all of it to say."]) == \
        "The long- Term plan is fixed here and that is all of it to say."


def test_running_headers_and_footers_are_left_out_from_three_pages_on():
    pages = [f"ACME Ltd - Handbook\nSection {n} text says something specific number {n} here.\nPage {n} of 3"
             for n in (1, 2, 3)]
    assert pdf_paragraphs(pages).split("\n\n") == [f"Section {n} text says something specific number {n} here."
                                                   for n in (1, 2, 3)]
    two = pdf_paragraphs(pages[:2])  # two pages cannot tell a running header from text
    assert "ACME Ltd - Handbook" in two and "Page 2 of 3" in two


def test_empty_pages_and_blank_lines_give_no_paragraphs():
    assert pdf_paragraphs([]) == "" and pdf_paragraphs(["", "  \n \n"]) == ""


def test_a_generated_pdf_reads_as_paragraphs(tmp_path):
    fpdf = pytest.importorskip("fpdf")
    pdf = fpdf.FPDF()
    pdf.set_font("Helvetica", size=12)
    for n, (head, body) in enumerate([("Refunds", "Refunds are accepted within thirty days of purchase when the "
                                       "product was not used. Shipping costs are not refunded."),
                                      ("Exchanges", "An exchange is possible for items of equal value. Contact "
                                       "our support team with your order number."),
                                      ("Warranty", "Warranty claims go through the manufacturer. Keep the "
                                       "receipt as proof of the purchase date.")], 1):
        pdf.add_page()
        for width, text in ((150, "Company Ltd - Returns handbook"), (100, head), (60, body),
                            (150, f"Page {n} of 3")):
            pdf.set_x(10)
            pdf.multi_cell(width, 8, text)
    pdf.output(str(tmp_path / "handbook.pdf"))
    _, text = read_document(tmp_path / "handbook.pdf")
    assert "Company Ltd" not in text and "Page 2" not in text
    strips = [s for chunk in chunk_text(text) for s in sentence_strips(chunk)]
    assert strips[2] == "An exchange is possible for items of equal value."  # not "Exchanges An exchange ..."
    assert len(strips) == 6


def test_the_dot_leaders_of_a_table_of_contents_are_not_text():
    page = "1 Introduction . . . . . . . . . 3\n2 Usage.......... 7\nWait... what? Version 1.2.3.4 here."
    text = pdf_paragraphs([page])
    assert ". ." not in text and "...." not in text
    assert "1 Introduction 3" in text and "2 Usage 7" in text and "Wait... what? Version 1.2.3.4 here." in text


def test_list_items_start_paragraphs_of_their_own():
    page = ("Refunds are accepted within thirty days of delivery of the order.\n"
            "\uf0b7 Bring the receipt.\n"  # a Symbol-font bullet, as LibreOffice's and Word's PDFs give it
            "\u2022 Keep the box and every accessory that came with the item you\n"
            "return to the store.\n"
            "1. Pack the item.\n"
            "(b) Print the label.\n"
            "2.1. Drop it off.\n"
            "A. Smith signs the returns form, 2.5 million forms a year and\n"
            "12 boxes a day, as set out in section 4 and in subsection\n"
            "(b) of the contract, which the store keeps on file for you.")
    assert pdf_paragraphs([page]).split("\n\n") == [
        "Refunds are accepted within thirty days of delivery of the order.", "- Bring the receipt.",
        "- Keep the box and every accessory that came with the item you return to the store.", "1. Pack the item.",
        "(b) Print the label.", "2.1. Drop it off.",
        "A. Smith signs the returns form, 2.5 million forms a year and 12 boxes a day, as set out in section 4 and in "
        "subsection (b) of the contract, which the store keeps on file for you."]  # a number mid-sentence runs on
