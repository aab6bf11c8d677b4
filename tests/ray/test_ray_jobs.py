"""grade-file and label as Ray Data jobs on a real local Ray runtime (2 CPUs, started here on loopback):
their output equals the local commands', pair by pair; bad lines and failures are reported, not dropped."""

import json

import pytest

from pipeline.cli.main import main
from training.data import load_pairs

ray = pytest.importorskip("ray")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

QUESTIONS = ["When was the Eiffel Tower completed?", "Who wrote Hamlet?", "What is the capital of France?"]
TEXTS = ["The Eiffel Tower was completed in 1889.", "Hamlet was written by Shakespeare.", "Bananas are yellow.",
         "Paris is the capital and largest city of France. " * 200]  # long: read in windows, flagged truncated


@pytest.fixture(scope="module")
def runtime():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def _summary(capsys):
    """The command's JSON summary on stdout, wherever Ray's own log lines (if any) put it."""
    captured = capsys.readouterr()
    start = next((i for i, line in enumerate(captured.out.splitlines(keepends=True)) if line.startswith("{")), None)
    assert start is not None, f"no JSON summary on stdout: out={captured.out!r} err={captured.err[-2000:]!r}"
    text = "".join(captured.out.splitlines(keepends=True)[start:])
    return json.JSONDecoder().raw_decode(text)[0]


def _pairs_file(path, bad_line=False):
    lines = []
    for i in range(40):
        record = {"query": QUESTIONS[i % 3], "text": TEXTS[i % 4] + f" (variant {i})"}
        if i % 5 == 0:
            record["chunk_id"] = f"c{i}"
        if i % 9 == 0:
            record["id"] = f"row-{i}"
        lines.append(json.dumps(record))
        if i == 7:
            lines.append("")  # blank lines still count in line numbers
        if bad_line and i == 20:
            lines.append('{"query": "", "text": "an empty query"}')
    path.write_text("\r\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_ray_grading_equals_the_local_command_pair_by_pair(runtime, tmp_path, capsys):
    pairs = _pairs_file(tmp_path / "pairs.jsonl")
    assert main(["grade-file", str(pairs), "--out", str(tmp_path / "local.jsonl")]) == 0
    local_summary = _summary(capsys)
    assert main(["grade-file", str(pairs), "--out", str(tmp_path / "ray.jsonl"), "--ray", "--ray-actors", "2",
                 "--block", "8"]) == 0
    summary = _summary(capsys)
    assert summary["pairs"] == 40 and summary["uncertain"] == local_summary["uncertain"]
    assert summary["ray"] == {"actors": 2, "threads_per_actor": 1, "address": "local"}
    local = (tmp_path / "local.jsonl").read_text().splitlines()
    remote = (tmp_path / "ray.jsonl").read_text().splitlines()
    assert len(local) == len(remote) == 40
    assert remote == local  # ids (line numbers), probability, verdict, uncertainty, truncation: all equal
    assert any(json.loads(line)["truncated"] for line in remote) and json.loads(remote[0])["id"] == "row-0"
    assert not (tmp_path / "ray.jsonl.partial").exists()
    # Parquet in and out (two files of several row groups): rows equal the local command's, row by row
    folder = tmp_path / "parquet"
    folder.mkdir()
    records = [json.loads(line) for line in pairs.read_text().splitlines() if line.strip()]
    for part, rows in enumerate((records[:25], records[25:])):
        pq.write_table(pa.Table.from_pylist([{"chunk_id": None, "id": None, **r} for r in rows]),
                       folder / f"part-{part}.parquet", row_group_size=7)
    assert main(["grade-file", str(folder), "--out", str(tmp_path / "local.parquet")]) == 0
    assert main(["grade-file", str(folder), "--out", str(tmp_path / "ray.parquet"), "--ray", "--block", "8"]) == 0
    capsys.readouterr()
    local_rows = pq.read_table(tmp_path / "local.parquet").to_pylist()
    assert pq.read_table(tmp_path / "ray.parquet").to_pylist() == local_rows and len(local_rows) == 40


def test_bad_lines_stop_the_ray_job_or_are_reported(runtime, tmp_path, capsys):
    pairs = _pairs_file(tmp_path / "pairs.jsonl", bad_line=True)
    assert main(["grade-file", str(pairs), "--out", str(tmp_path / "out.jsonl"), "--ray", "--block", "8"]) != 0
    assert "pairs.jsonl:23: each line needs a non-empty string 'query'" in capsys.readouterr().err
    assert not (tmp_path / "out.jsonl").exists()
    assert main(["grade-file", str(pairs), "--out", str(tmp_path / "out.jsonl"), "--ray", "--block", "8",
                 "--skip-errors"]) == 0
    summary = _summary(capsys)
    assert summary["pairs"] == 40 and summary["skipped"] == 1 and summary["skipped_lines"][0]["line"] == 23


def test_ray_grading_says_when_a_file_holds_no_pairs_as_the_local_command_does(runtime, tmp_path, capsys, caplog):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n", encoding="utf-8")
    assert main(["grade-file", str(empty), "--out", str(tmp_path / "out.jsonl"), "--ray"]) == 0
    assert _summary(capsys)["pairs"] == 0
    assert f"{empty} holds no pairs: nothing was graded" in caplog.text


def test_ray_grading_reads_a_files_own_field_names(runtime, tmp_path, capsys):
    pairs = _pairs_file(tmp_path / "pairs.jsonl")
    theirs = tmp_path / "theirs.jsonl"
    theirs.write_text("".join(json.dumps({"question": r["query"], "passage": r["text"]}) + "\n" for r in
                              (json.loads(line) for line in pairs.read_text().splitlines() if line.strip())))
    assert main(["grade-file", str(theirs), "--out", str(tmp_path / "local.jsonl"),
                 "--columns", "query=question,text=passage"]) == 0
    assert main(["grade-file", str(theirs), "--out", str(tmp_path / "ray.jsonl"), "--ray", "--block", "8",
                 "--columns", "query=question,text=passage"]) == 0
    capsys.readouterr()
    remote = (tmp_path / "ray.jsonl").read_text().splitlines()
    assert len(remote) == 40 and remote == (tmp_path / "local.jsonl").read_text().splitlines()


def test_ray_labelling_equals_the_local_command(runtime, server, tmp_path, capsys):
    data = tmp_path / "unlabelled.jsonl"
    data.write_text("".join(json.dumps({"query": QUESTIONS[i % 3], "text": TEXTS[i % 3] + f" ({i})"}) + "\n"
                            for i in range(12)), encoding="utf-8")
    common = ["--data", str(data), "--llm-model", "fake", "--llm-base-url", server.base_url, "--no-progress"]
    assert main(["label", *common, "--out", str(tmp_path / "local.jsonl")]) == 0
    local = _summary(capsys)
    assert main(["label", *common, "--out", str(tmp_path / "ray.jsonl"), "--ray", "--ray-actors", "2"]) == 0
    remote = _summary(capsys)
    assert remote["labelled"] == local["labelled"] == 12 and remote["llm_calls"] == local["llm_calls"] == 12
    assert len(server.requests) == 24  # one call per pair each time: the cluster asked nothing twice
    assert [p.to_dict() for p in load_pairs(tmp_path / "ray.jsonl").pairs] == \
        [p.to_dict() for p in load_pairs(tmp_path / "local.jsonl").pairs]
    server.script = ["500"] * 3  # three calls fail: their pairs are reported with the reason, never dropped
    assert main(["label", *common, "--out", str(tmp_path / "partial.jsonl"), "--ray", "--llm-retries", "1"]) == 0
    partial = _summary(capsys)
    assert partial["labelled"] == 9 and partial["failed"] == 3 and all(f["reason"] for f in partial["failures"])
