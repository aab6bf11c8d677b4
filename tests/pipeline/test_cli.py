import json
import subprocess
import sys

import pytest

from pipeline.cli import main

QUERY = "In what country is Normandy located?"


def test_grade_json(capsys, tmp_path):
    chunks = tmp_path / "chunks.jsonl"
    chunks.write_text(json.dumps({"text": "Normandy is a region in France.", "chunk_id": "a"}) + "\n"
                      + json.dumps({"text": "Bananas are yellow.", "chunk_id": "b"}) + "\n", encoding="utf-8")
    assert main(["grade", "--query", QUERY, "--chunks", str(chunks), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["chunk_id"] for r in rows] == ["a", "b"]
    assert rows[0]["probability"] > rows[1]["probability"]
    assert {"verdict", "probability", "decided_by", "uncertain", "truncated"} <= set(rows[0])


def test_grade_table_and_text_chunks(capsys, tmp_path):
    chunks = tmp_path / "chunks.txt"
    chunks.write_text("Normandy is a region in France.\n\nBananas are yellow.\n", encoding="utf-8")
    assert main(["grade", "--query", QUERY, "--chunks", str(chunks), "--chunk", "Rouen is in Normandy."]) == 0
    out = capsys.readouterr().out
    assert "P(relevant)" in out and "Bananas" in out and "arg1" in out


def test_eval_writes_report_and_plots(capsys, tmp_path, squad_pairs_file):
    report = tmp_path / "r.json"
    code = main(["eval", "--model", "default", "--data", str(squad_pairs_file), "--json", str(report),
                 "--plots", str(tmp_path / "p")])
    assert code == 0
    data = json.loads(report.read_text(encoding="utf-8"))
    assert {"auroc", "auroc_strict", "accuracy", "macro_f1", "escalation_rate", "auto_error_rate", "ece", "brier",
            "n"} <= set(data)
    assert data["auroc"] > 0.8  # the shipped grader separates this SQuAD sample well
    assert (tmp_path / "p_reliability.png").is_file()


def test_calibrate_writes_a_new_bundle(capsys, tmp_path, squad_pairs_file):
    out = tmp_path / "recal"
    assert main(["calibrate", "--model", "default", "--data", str(squad_pairs_file), "--out", str(out),
                 "--target-escalation", "0.2", "--calibration", "platt"]) == 0
    from models import read_bundle

    m = read_bundle(out).manifest
    assert m.thresholds["target"]["max_escalation"] == 0.2 and "recalibration" in m.metrics
    assert main(["calibrate", "--model", "default", "--data", str(squad_pairs_file), "--out", str(out)]) == 2
    assert "exists" in capsys.readouterr().err


def test_convert_and_train_via_cli(capsys, tmp_path, fixtures):
    pairs = tmp_path / "pairs.jsonl"
    assert main(["convert", "squad", str(fixtures / "squad_mini.json"), "--out", str(pairs)]) == 0
    assert main(["train", "--data", str(pairs), "--out", str(tmp_path / "m"), "--max-steps", "2",
                 "--max-length", "48", "--batch-size", "8", "--no-progress", "--target-escalation", "0.5"]) == 0
    result = json.loads(capsys.readouterr().out.split("\n}\n")[-2] + "\n}")
    assert result["steps"] == 2 and "crag export" in result["next"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [(["grade", "--query", QUERY, "--chunks", "/nonexistent.jsonl"], "no such file"),
     (["grade", "--model", "defualt", "--query", QUERY, "--chunk", "x"], "did you mean 'default'"),
     (["grade", "--query", QUERY], "no chunks to grade"),
     (["eval", "--data", "/nonexistent.jsonl"], "no such file"),
     (["train", "--data", "/nonexistent.jsonl", "--out", "/tmp/x"], "no such file")],
)
def test_errors_are_one_line(capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and "Traceback" not in err


def test_console_script_has_no_traceback():
    out = subprocess.run([sys.executable, "-m", "pipeline.cli", "eval", "--data", "/nope.tsv"],
                         capture_output=True, text=True)
    assert out.returncode == 2 and "Traceback" not in out.stderr and "no such file" in out.stderr
