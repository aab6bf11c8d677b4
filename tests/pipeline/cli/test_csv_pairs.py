"""crag grade-file on CSV and TSV: rows in, graded lines out equal to the JSONL path; bad rows named by number."""

import csv
import json

import pytest

from pipeline.cli.main import main

ROWS = [{"query": "Who wrote Hamlet?", "text": "Hamlet was written by Shakespeare, in about 1600.", "chunk_id": "a"},
        {"query": "Who wrote Hamlet?", "text": "Bananas are yellow;\nthey grow in bunches.", "chunk_id": "b"},
        {"query": "When was the Eiffel Tower completed?", "text": "It was completed in 1889.", "chunk_id": "c"}]


def _delimited(path, rows, delimiter):
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]), delimiter=delimiter)
        writer.writeheader()
        writer.writerows(rows)
    return path


@pytest.mark.parametrize(("name", "delimiter"), [("pairs.csv", ","), ("pairs.CSV", ";"), ("pairs.tsv", "\t")])
def test_a_delimited_file_grades_like_the_same_pairs_in_jsonl(tmp_path, capsys, name, delimiter):
    jsonl = tmp_path / "pairs.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    assert main(["grade-file", str(jsonl), "--out", str(tmp_path / "from_jsonl.jsonl")]) == 0
    source = _delimited(tmp_path / name, ROWS, delimiter)  # a quoted text holds the delimiter and a line break
    capsys.readouterr()
    assert main(["grade-file", str(source), "--out", str(tmp_path / "from_csv.jsonl")]) == 0
    assert json.loads(capsys.readouterr().out)["pairs"] == 3
    expected = [json.loads(line) for line in (tmp_path / "from_jsonl.jsonl").read_text().splitlines()]
    graded = [json.loads(line) for line in (tmp_path / "from_csv.jsonl").read_text().splitlines()]
    for row in expected:
        row["id"] += 1  # a spreadsheet's row number: the header is row 1
    assert graded == expected


def test_a_bad_row_is_named_by_its_row_and_skip_errors_grades_the_rest(tmp_path, capsys):
    source = tmp_path / "pairs.csv"
    source.write_text("query,text\nWho wrote Hamlet?,Shakespeare wrote it.\n,no query here\n"
                      "Who wrote Hamlet?,a,b\nWhen was the tower built?,In 1889.\n", encoding="utf-8")
    assert main(["grade-file", str(source), "--out", str(tmp_path / "out.jsonl")]) == 2
    assert "pairs.csv:3: each line needs a non-empty string 'query'" in capsys.readouterr().err
    assert main(["grade-file", str(source), "--out", str(tmp_path / "out.jsonl"), "--skip-errors"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["pairs"] == 2 and [s["line"] for s in summary["skipped_lines"]] == [3, 4]
    assert "3 fields where the header has 2" in summary["skipped_lines"][1]["reason"]
    assert [json.loads(x)["id"] for x in (tmp_path / "out.jsonl").read_text().splitlines()] == [2, 5]


def test_a_field_past_the_line_limit_and_a_csv_for_ray_are_refused(tmp_path, capsys):
    source = tmp_path / "pairs.csv"
    source.write_text("query,text\nWho wrote Hamlet?," + "x" * 5000 + "\n", encoding="utf-8")
    assert main(["grade-file", str(source), "--out", str(tmp_path / "out.jsonl"), "--max-line-chars", "1000"]) == 2
    assert "pairs.csv:2: field larger than field limit (1000)" in capsys.readouterr().err
    assert main(["grade-file", str(source), "--out", str(tmp_path / "ray.jsonl"), "--ray"]) == 2
    assert "--ray reads JSONL or Parquet" in capsys.readouterr().err
