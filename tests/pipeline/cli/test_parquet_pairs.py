"""crag grade-file on Parquet: rows in, graded rows out, equal to the JSONL path; bad rows named."""

import json

import pytest

from pipeline.cli.main import main

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

ROWS = [{"query": "Who wrote Hamlet?", "text": "Hamlet was written by Shakespeare.", "chunk_id": "a"},
        {"query": "Who wrote Hamlet?", "text": "Bananas are yellow.", "chunk_id": None},
        {"query": "When was the Eiffel Tower completed?", "text": "It was completed in 1889.", "chunk_id": "c"}]


def _write(path, rows, row_group_size=2):
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=row_group_size)
    return path


def test_parquet_in_and_out_equals_the_jsonl_command(tmp_path, capsys):
    folder = tmp_path / "pairs"
    folder.mkdir()
    _write(folder / "part-0.parquet", ROWS)
    _write(folder / "part-1.parquet", ROWS[:2])  # rows are numbered across files, in name order
    (folder / "_SUCCESS").write_bytes(b"")  # what Spark writes beside its output: not data
    (folder / ".part-1.parquet.crc").write_bytes(b"crc")
    jsonl = tmp_path / "pairs.jsonl"
    jsonl.write_text("".join(json.dumps({k: v for k, v in r.items() if v is not None}) + "\n"
                             for r in ROWS + ROWS[:2]), encoding="utf-8")
    assert main(["grade-file", str(folder), "--out", str(tmp_path / "graded.parquet")]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["pairs"] == 5
    assert main(["grade-file", str(jsonl), "--out", str(tmp_path / "graded.jsonl")]) == 0
    expected = [json.loads(line) for line in (tmp_path / "graded.jsonl").read_text().splitlines()]
    graded = pq.read_table(tmp_path / "graded.parquet").to_pylist()
    assert [r["id"] for r in graded] == [1, 2, 3, 4, 5]
    assert [{k: v for k, v in r.items() if v is not None} for r in graded] == expected
    assert graded[0]["probability"] > graded[1]["probability"]


def test_a_bad_row_is_named_and_the_rows_before_it_stay_readable(tmp_path, capsys):
    bad = _write(tmp_path / "bad.parquet", [*ROWS, {"query": "", "text": "empty query", "chunk_id": "d"}])
    assert main(["grade-file", str(bad), "--out", str(tmp_path / "out.parquet"), "--block", "2"]) == 2
    assert "bad.parquet:4: each line needs a non-empty string 'query'" in capsys.readouterr().err
    assert not (tmp_path / "out.parquet").exists()
    assert len(pq.read_table(tmp_path / "out.parquet.partial")) == 3  # graded before the bad row, readable
    assert main(["grade-file", str(bad), "--out", str(tmp_path / "out.jsonl"), "--skip-errors"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["pairs"] == 3 and summary["skipped_lines"][0]["line"] == 4


@pytest.mark.parametrize(("rows", "message"), [
    ([{"question": "q", "text": "t"}], "need columns 'query' and 'text'; missing ['query']"),
    (b"PAR1 but not parquet at all", "not a readable Parquet file"),
])
def test_parquet_files_that_cannot_be_graded_name_the_fix(tmp_path, capsys, rows, message):
    path = tmp_path / "in.parquet"
    if isinstance(rows, bytes):
        path.write_bytes(rows)
    else:
        _write(path, rows)
    assert main(["grade-file", str(path), "--out", str(tmp_path / "out.jsonl")]) == 2
    assert message in capsys.readouterr().err
