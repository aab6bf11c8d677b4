"""An Excel workbook is read sheet by sheet as a table file is: one record per row, values as Excel shows them."""

import datetime as dt

import pytest

from models.errors import DataError
from pipeline.retrieval.documents import chunk_text, read_document
from pipeline.retrieval.table_text import RECORD_SEPARATOR
from pipeline.retrieval.xlsx_text import cell_text
from tests.pipeline.conftest import BILLING_RECORDS, assert_needs_extra

openpyxl = pytest.importorskip("openpyxl")

RS = f"\n{RECORD_SEPARATOR}\n"


def workbook(path, *, title=None):
    book = openpyxl.Workbook()
    faq = book.active
    faq.title = "Billing"
    faq.append(["question", "answer", "updated"])
    faq.append(["Can I pay by invoice?", "Yes, on the Business plan.", dt.date(2024, 3, 1)])
    faq.append([None, None, None])
    faq.append(["What is the refund window?", "  30 days  ", dt.datetime(2024, 5, 2, 9, 30)])
    prices = book.create_sheet("Prices")
    prices.append([None, None])  # a blank first row: the header is the first row with something in it
    prices.append(["plan", "price per seat", "annual", "total"])
    prices.append(["Team", 12.5, True, "=B3*10"])  # a formula Excel never computed reads empty
    prices.append(["Business", 30.0, False, None])
    secret = book.create_sheet("Internal notes")
    secret.append(["note"])
    secret.append(["do not index"])
    secret.sheet_state = "hidden"
    if title:
        book.properties.title = title
    book.save(path)


def test_each_visible_sheet_is_read_as_records_named_by_their_sheet(tmp_path):
    path = tmp_path / "pricing.xlsx"
    workbook(path, title="Pricing and billing")
    title, text = read_document(path)
    assert title == "Pricing and billing"
    assert text.split(RS) == [
        *BILLING_RECORDS,
        "sheet: Prices\nplan: Team\nprice per seat: 12.5\nannual: TRUE",
        "sheet: Prices\nplan: Business\nprice per seat: 30\nannual: FALSE",
    ]
    assert "do not index" not in text and chunk_text(text) == text.split(RS)


def test_one_sheet_needs_no_sheet_line_and_the_file_names_an_untitled_workbook(tmp_path):
    book = openpyxl.Workbook()
    book.active.append(["city", "note"])
    book.active.append(["München", "café open late"])
    path = tmp_path / "cities.xlsx"
    book.save(path)
    assert read_document(path) == ("cities", "city: München\nnote: café open late")


def test_values_read_as_excel_shows_them():
    assert [cell_text(v) for v in (None, 3, 2.0, 0.1 + 0.2, 1e20, -7.25, True, "x", dt.time(14, 5))] == \
        ["", "3", "2", "0.3", "1e+20", "-7.25", "TRUE", "x", "14:05"]


def test_a_file_that_is_not_a_workbook_is_an_error_naming_it(tmp_path):
    path = tmp_path / "old.xlsx"
    path.write_bytes(b"\xd0\xcf\x11\xe0 an old binary .xls renamed")
    with pytest.raises(DataError, match=r"old\.xlsx: not a readable \.xlsx file .* read from a file named \.xls"):
        read_document(path)


def test_without_the_xlsx_extra_the_error_names_it(tmp_path, monkeypatch):
    workbook(tmp_path / "pricing.xlsx")
    assert_needs_extra(tmp_path / "pricing.xlsx", "openpyxl", "xlsx", monkeypatch)
