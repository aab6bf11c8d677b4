"""An Excel 97-2003 workbook (.xls) is read as an .xlsx one is: sheet by sheet, one record per row, values as Excel
shows them. The files are written by xlwt, another implementation of the format."""

import datetime as dt
import subprocess
import sys
from pathlib import Path

import pytest

from models.errors import DataError
from pipeline.retrieval.documents import chunk_text, read_document
from pipeline.retrieval.table_text import RECORD_SEPARATOR
from tests.pipeline.conftest import BILLING_RECORDS, assert_needs_extra, damaged_copies_read

xlwt = pytest.importorskip("xlwt")

RS = f"\n{RECORD_SEPARATOR}\n"
DATE, DATE_TIME, TIME = (xlwt.easyxf(num_format_str=f) for f in ("YYYY-MM-DD", "YYYY-MM-DD HH:MM", "HH:MM"))


def workbook(path):
    book = xlwt.Workbook()
    faq = book.add_sheet("Billing")
    for row, values in enumerate([("question", "answer", "updated"),
                                  ("Can I pay by invoice?", "Yes, on the Business plan.", dt.datetime(2024, 3, 1)),
                                  (),
                                  ("What is the refund window?", "  30 days  ", dt.datetime(2024, 5, 2, 9, 30))]):
        for column, value in enumerate(values):
            style = DATE_TIME if isinstance(value, dt.datetime) and value.hour else DATE
            faq.write(row, column, value, *([style] if isinstance(value, dt.datetime) else []))
    prices = book.add_sheet("Prices")  # its first row is blank: the header is the first row with something in it
    for row, values in enumerate([("plan", "price per seat", "annual", "total", "opens"),
                                  ("Team", 12.5, True, xlwt.Formula("B3*10"), dt.time(9, 30)),
                                  ("Business", 30.0, False, None, None)], start=1):
        for column, value in enumerate(values):
            if value is not None:
                prices.write(row, column, value, *([TIME] if isinstance(value, dt.time) else []))
    prices.row(3).set_cell_error(4, "#DIV/0!")  # a formula's error value, as Excel stores it
    secret = book.add_sheet("Internal notes")
    secret.write(0, 0, "note")
    secret.write(1, 0, "do not index")
    secret.visibility = 1  # hidden
    book.save(str(path))


def test_each_visible_sheet_is_read_as_records_named_by_their_sheet(tmp_path):
    path = tmp_path / "pricing.xls"
    workbook(path)
    title, text = read_document(path)
    assert title == "pricing"  # the file names it: xlrd does not read a workbook's Title property
    assert text.split(RS) == [
        *BILLING_RECORDS,
        "sheet: Prices\nplan: Team\nprice per seat: 12.5\nannual: TRUE\nopens: 09:30",  # a formula never computed
        "sheet: Prices\nplan: Business\nprice per seat: 30\nannual: FALSE\nopens: #DIV/0!",
    ]
    assert "do not index" not in text and chunk_text(text) == text.split(RS)


def test_files_that_are_not_workbooks_are_errors_naming_them(tmp_path):
    path = tmp_path / "report.xls"
    path.write_bytes(b"\x09\x00\x04\x00 neither an OLE file, nor a package, nor text")  # (HTML would be read)
    with pytest.raises(DataError, match=r"report\.xls: not a readable \.xls workbook"):
        read_document(path)
    workbook(tmp_path / "good.xls")
    whole = (tmp_path / "good.xls").read_bytes()
    (tmp_path / "cut.xls").write_bytes(whole[: len(whole) // 2])
    with pytest.raises(DataError, match=r"cut\.xls: not a readable \.xls workbook"):
        read_document(tmp_path / "cut.xls")
    damaged_copies_read(whole, ".xls", tmp_path, copies=80, seed=3)
    # xlrd's warnings about the damage ("File is truncated") are not printed on the reading program's stdout (a
    # fresh process: xlrd took the stdout of the moment it was imported as its default)
    read = ("from models.errors import DataError\nfrom pipeline.retrieval.documents import read_document\n"
            f"try:\n    read_document({str(tmp_path / 'cut.xls')!r})\nexcept DataError:\n    pass\n")
    done = subprocess.run([sys.executable, "-c", read], capture_output=True, text=True, check=True,
                          cwd=Path(__file__).parents[3])
    assert done.stdout == ""


def test_without_the_xlsx_extra_the_error_names_it(tmp_path, monkeypatch):
    workbook(tmp_path / "pricing.xls")
    assert_needs_extra(tmp_path / "pricing.xls", "xlrd", "xlsx", monkeypatch)
