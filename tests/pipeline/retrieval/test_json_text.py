"""JSON data files (.jsonl, .json) are read one record per object, keys beside their values."""

import json

import pytest

from models.errors import DataError
from pipeline.retrieval.documents import chunk_text, read_document
from pipeline.retrieval.index import LocalHybridIndex
from pipeline.retrieval.ingest import ingest
from pipeline.retrieval.json_text import LIST_ITEMS, json_to_text, jsonl_to_text
from pipeline.retrieval.table_text import RECORD_SEPARATOR
from tests.pipeline.conftest import HashEmbedder

RS = f"\n{RECORD_SEPARATOR}\n"
TICKET = {"id": 7, "title": "Refund for a damaged chair", "status": None, "urgent": True, "score": 0.5,
          "author": {"name": "Ada", "plan": {"tier": "Business"}}, "tags": ["billing", "refunds", ""],
          "steps": [{"text": "Photo received."}, {"text": "Refund sent.\n\n\nClosed."}], "notes": ""}
READ = ("id: 7\ntitle: Refund for a damaged chair\nurgent: true\nscore: 0.5\nauthor.name: Ada\n"
        "author.plan.tier: Business\ntags: billing, refunds\nsteps.1.text: Photo received.\n"
        "steps.2.text: Refund sent.\nClosed.")


def test_each_line_of_json_lines_is_a_record_of_keys_and_values(tmp_path):
    path = tmp_path / "tickets.jsonl"
    path.write_text(json.dumps(TICKET) + "\n\n" + json.dumps({"question": "Hours?", "answer": "9 to 5"}) + "\n"
                    + json.dumps("A plain line of text.") + "\n", encoding="utf-8")
    title, text = read_document(path)
    assert title == "tickets"
    assert text.split(RS) == [READ, "question: Hours?\nanswer: 9 to 5", "A plain line of text."]
    assert chunk_text(text) == text.split(RS)  # a chunk a record


def test_a_json_array_or_an_object_holding_arrays_of_objects_is_records():
    assert json_to_text(json.dumps([TICKET, {"question": "Hours?"}]))[1].split(RS) == [READ, "question: Hours?"]
    export = {"exported": "2024-03-01", "source": "helpdesk", "faqs": [{"q": "Hours?", "a": "9 to 5"}],
              "tickets": [TICKET]}
    assert json_to_text(json.dumps(export))[1].split(RS) == [
        "exported: 2024-03-01\nsource: helpdesk", "q: Hours?\na: 9 to 5", READ]


def test_configuration_files_are_no_records_and_are_reported_as_without_text(tmp_path):
    package = {"name": "site", "version": "1.0.0", "scripts": {"build": "vite build"}, "files": ["dist"]}
    assert json_to_text(json.dumps(package)) == ("", "")
    assert json_to_text("42") == ("", "") and json_to_text("[]") == ("", "")
    (tmp_path / "package.json").write_text(json.dumps(package), encoding="utf-8")
    (tmp_path / "faq.json").write_text(json.dumps([{"q": "Hours?", "a": "9 to 5"}]), encoding="utf-8")
    index = LocalHybridIndex(tmp_path / "idx", embedder=HashEmbedder())
    report = ingest(index, [tmp_path], tenant="t")
    assert report.files == 1 and report.chunks_added == 1
    assert report.skipped == [{"path": str(tmp_path / "package.json"), "reason": "no text"}]


def test_a_long_list_is_cut_and_says_how_many_more():
    text = jsonl_to_text(json.dumps({"ids": list(range(LIST_ITEMS + 5))}))[1]
    assert text.endswith(f"{LIST_ITEMS - 1} (and 5 more)")


def test_invalid_json_is_an_error_naming_the_file_and_place(tmp_path):
    lines = tmp_path / "bad.jsonl"
    lines.write_text('{"a": 1}\n{"a": 2,}\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"bad\.jsonl: line 2 is not JSON .*one JSON value a line"):
        read_document(lines)
    whole = tmp_path / "bad.json"
    whole.write_text('[{"a": 1}\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"bad\.json: not valid JSON \(.* at line 2"):
        read_document(whole)
    for name, crafted in (("deep.json", "[" * 100_000 + "]" * 100_000),
                          ("deep.jsonl", '{"a":' * 5_000 + "1" + "}" * 5_000)):
        path = tmp_path / name
        path.write_text(crafted, encoding="utf-8")  # json and the flattening recurse once a level
        with pytest.raises(DataError, match=rf"{name.replace('.', '[.]')}: values nested too deeply to read"):
            read_document(path)


def test_escaped_utf16_halves_are_read_as_characters_and_indexed(tmp_path):
    path = tmp_path / "faq.jsonl"
    path.write_text('{"question": "Emoji \\ud83d\\ude00 allowed?", "answer": "Yes, but not \\ud83d alone."}\n',
                    encoding="utf-8")
    text = read_document(path)[1]
    assert "Emoji \U0001f600 allowed?" in text and "not \ufffd alone" in text
    idx = LocalHybridIndex(tmp_path / "idx", embedder=HashEmbedder())
    assert ingest(idx, [path], tenant="t").chunks_added == 1  # was a UnicodeEncodeError while hashing the chunk
