"""A table file (.csv, .tsv) is read as one record per row, each value beside its column's name."""

import pytest

from models.errors import DataError
from pipeline.retrieval.documents import Principal, chunk_text, read_document
from pipeline.retrieval.index import LocalHybridIndex
from pipeline.retrieval.ingest import ingest
from pipeline.retrieval.table_text import RECORD_SEPARATOR, csv_to_text, row_line, tsv_to_text
from tests.pipeline.conftest import HashEmbedder

RS = f"\n{RECORD_SEPARATOR}\n"

# what pandas.DataFrame.to_csv writes: its index as a first column without a name
FAQ = """\
,question,answer,tags
0,How do I reset my password?,"Open Settings > Account and choose ""Reset password"".

We email you a link.",account
1,Can I pay by invoice?,"Yes, on the Business plan.",billing
2,,,
3,What is the refund window?,30 days,"billing,refunds",late extra cell
"""


def test_each_row_is_a_record_of_named_values(tmp_path):
    path = tmp_path / "support faq.csv"
    path.write_text(FAQ, encoding="utf-8")
    title, text = read_document(path)
    assert title == "support faq"
    assert text == ('question: How do I reset my password?\n'
                    'answer: Open Settings > Account and choose "Reset password".\nWe email you a link.\n'
                    'tags: account' + RS +
                    'question: Can I pay by invoice?\nanswer: Yes, on the Business plan.\ntags: billing' + RS +
                    'question: What is the refund window?\nanswer: 30 days\ntags: billing,refunds\n'
                    'column 5: late extra cell')
    # each record is a chunk of its own, however small (graded packed with its neighbours, a FAQ entry loses
    # much of its grade); one longer than a chunk is cut between its lines
    records = text.split(RS)
    assert chunk_text(text) == records
    assert chunk_text(text, max_chars=100) == [records[0].rsplit("\n", 2)[0], "We email you a link.\ntags: account",
                                               *records[1:]]


def test_the_separator_and_quoting_are_detected_and_a_tsv_is_tab_separated():
    semicolons = 'Produkt;Preis;Hinweis\nTisch;"12,50";"Holz; geölt"\nStuhl;8;\n'
    assert csv_to_text(semicolons)[1] == ("Produkt: Tisch\nPreis: 12,50\nHinweis: Holz; geölt" + RS +
                                          "Produkt: Stuhl\nPreis: 8")
    assert tsv_to_text("Question\tSentence\tLabel\nwho?\tA, B and C.\t1\n")[1] == (
        "Question: who?\nSentence: A, B and C.\nLabel: 1")
    # one column: nothing to detect, read as comma-separated
    assert csv_to_text("note\nfirst\nsecond\n")[1] == "note: first" + RS + "note: second"


def test_an_unnamed_column_is_kept_by_position_unless_it_counts_the_rows():
    ids = ",status\nA-17,open\nB-02,closed\n"
    assert csv_to_text(ids)[1] == "column 1: A-17\nstatus: open" + RS + "column 1: B-02\nstatus: closed"
    counted_from_one = ",status\n1,open\n2,closed\n"
    assert csv_to_text(counted_from_one)[1] == "status: open" + RS + "status: closed"
    middle = "id,,status\n7,x,open\n"
    assert csv_to_text(middle)[1] == "id: 7\ncolumn 2: x\nstatus: open"


def test_a_header_alone_or_an_empty_file_has_no_text(tmp_path):
    assert csv_to_text("a,b,c\n") == ("", "")
    assert csv_to_text("") == ("", "")
    assert csv_to_text("\n\n,,\n") == ("", "")


def test_an_unreadable_table_is_an_error_naming_the_file_and_line(tmp_path):
    path = tmp_path / "broken.csv"
    path.write_text('name,text\nok,"an opening quote never closed\n' + "x" * 140_000 + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"broken\.csv: not a readable table at line \d+ .*field larger"):
        read_document(path)


def test_an_indexed_table_answers_with_its_record(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "faq.csv").write_text(FAQ, encoding="utf-8")
    (docs / "cp1252.tsv").write_bytes("city\tnote\nMünchen\tcafé open late\n".encode("cp1252"))
    index = LocalHybridIndex(tmp_path / "idx", embedder=HashEmbedder())
    with pytest.raises(DataError, match=r"cp1252\.tsv: not UTF-8"):
        ingest(index, [docs], tenant="t")
    report = ingest(index, [docs], tenant="t", encoding="cp1252")
    assert report.files == 2 and report.chunks_added == 4  # one chunk a record
    hits = index.search("refund window", Principal(tenant="t"), k=1)
    assert "answer: 30 days" in hits[0][0].text and hits[0][0].title == "faq"
    assert "note: café open late" in index.search("München café", Principal(tenant="t"), k=1)[0][0].text


@pytest.mark.parametrize(("header", "cells", "line"), [
    (["Zone", "Days"], ["EU", " 3-5\n days "], "Zone: EU | Days: 3-5 days"),
    (["Zone", "Days"], ["UK", ""], "Zone: UK"),  # an empty cell is left out with its name
    (["", "2023", "2024"], ["Revenue", "5", "7"], "Revenue | 2023: 5 | 2024: 7"),  # the corner names no column
    (["Zone", ""], ["EU", "3"], "EU | 3"),  # a column without a name: the header names no columns
    (["A name as long as a whole sentence would ever be", "b"], ["x", "y"], "x | y"),
    (["Zone"], ["EU"], "EU"),  # one column: nothing to tell apart
    (["Zone", "Days"], ["EU", "3", "extra"], "EU | 3 | extra"),  # more cells than names (spans): unlabelled
    (["Zone", "Days"], ["Zone", "Days"], "Zone | Days"),  # the header row itself
    (None, ["a", "", "b"], "a | b"),
])
def test_a_document_table_row_is_led_by_its_column_names_only_when_the_header_names_them(header, cells, line):
    assert row_line(cells, header) == line
