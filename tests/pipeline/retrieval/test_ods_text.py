"""An OpenDocument spreadsheet is read sheet by sheet as an Excel workbook is: one record per row."""

import zipfile

import pytest

from models.errors import DataError
from pipeline.retrieval.documents import chunk_text, read_document
from pipeline.retrieval.table_text import RECORD_SEPARATOR
from tests.pipeline.conftest import BILLING_RECORDS, OPENDOCUMENT_NS, write_opendocument

RS = f"\n{RECORD_SEPARATOR}\n"



def cell(text: str = "", repeat: int = 1, **attributes: str) -> str:
    extra = "".join(f' office:{name.replace("_", "-")}="{value}"' for name, value in attributes.items())
    repeated = f' table:number-columns-repeated="{repeat}"' if repeat > 1 else ""
    return f"<table:table-cell{repeated}{extra}>" + (f"<text:p>{text}</text:p>" if text else "") + "</table:table-cell>"


def row(*cells: str, repeat: int = 1) -> str:
    repeated = f' table:number-rows-repeated="{repeat}"' if repeat > 1 else ""
    return f"<table:table-row{repeated}>{''.join(cells)}</table:table-row>"


def write_ods(path, sheets: str, *, title: str | None = None) -> None:
    write_opendocument(path, "spreadsheet", sheets, title=title, styles='<style:style style:name="ta2" '
                       'style:family="table"><style:table-properties table:display="false"/></style:style>')


def test_each_visible_sheet_is_read_as_records_named_by_their_sheet(tmp_path):
    billing = ('<table:table table:name="Billing">'
               + row(cell("question"), cell("answer"), cell("updated"), cell(repeat=16380))
               + row(cell("Can I pay by invoice?"), cell("Yes, on the Business plan."),
                     cell("03/01/24", value_type="date", date_value="2024-03-01"))
               + row(cell(repeat=1024), repeat=1048570)  # the sheet's empty styled tail
               + row(cell("What is the refund window?"), cell("30 days"),
                     cell("05/02/24 09:30", value_type="date", date_value="2024-05-02T09:30:00"))
               + "</table:table>")
    prices = ('<table:table table:name="Prices">' + row(cell("plan"), cell("price"), cell("share"))
              + row(cell("Team"), cell("12.50 €", value_type="currency", value="12.5"),
                    cell("25%", value_type="percentage", value="0.25"))
              + row(cell("Business"), cell(), cell("<text:span>75</text:span>%", value_type="percentage", value="0.75")
                    .replace("</table:table-cell>", "<office:annotation><text:p>check</text:p></office:annotation>"
                                                    "</table:table-cell>"))
              + "</table:table>")
    hidden = '<table:table table:name="Internal" table:style-name="ta2">' + row(cell("note")) + row(
        cell("do not index")) + "</table:table>"
    path = tmp_path / "pricing.ods"
    write_ods(path, billing + prices + hidden, title="Pricing and billing")
    title, text = read_document(path)
    assert title == "Pricing and billing"
    assert text.split(RS) == [
        *BILLING_RECORDS,
        "sheet: Prices\nplan: Team\nprice: 12.50 €\nshare: 25%",
        "sheet: Prices\nplan: Business\nshare: 75%",
    ]
    assert "do not index" not in text and "check" not in text and chunk_text(text) == text.split(RS)


def test_one_sheet_needs_no_sheet_line_and_the_file_names_an_untitled_spreadsheet(tmp_path):
    path = tmp_path / "cities.ods"
    write_ods(path, '<table:table table:name="Sheet1">' + row(cell("city"), cell("note"))
              + row(cell("München"), cell("café open late"), repeat=2)
              + row(cell("Oslo"), cell("open")).replace("<table:table-row>", '<table:table-row table:number-rows-'
                                                        f'repeated="{"9" * 5000}">')  # past int()'s limit: read once
              + "</table:table>")
    assert read_document(path) == ("cities", "city: München\nnote: café open late" + RS
                                   + "city: München\nnote: café open late" + RS + "city: Oslo\nnote: open")


@pytest.mark.parametrize(("body", "error"), [
    ("not a zip", r"not a readable \.ods file"),
    ("<office:document-content", r"content\.xml is not well-formed XML"),
    (f"<office:document-content {OPENDOCUMENT_NS}><office:body><office:text/></office:body></office:document-content>",
     r"content\.xml holds no spreadsheet"),
], ids=["not a zip", "broken xml", "a text document"])
def test_damaged_and_false_files_are_errors_naming_them(tmp_path, body, error):
    path = tmp_path / "sheet.ods"
    if body == "not a zip":
        path.write_text(body, encoding="utf-8")
    else:
        with zipfile.ZipFile(path, "w") as document:
            document.writestr("content.xml", body)
    with pytest.raises(DataError, match=rf"sheet\.ods: {error}"):
        read_document(path)
