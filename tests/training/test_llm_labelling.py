"""crag label and crag eval --cascade against the scripted OpenAI-compatible server on loopback."""

import json

import pytest

from grader import load_grader
from grader.llm import LLMConfig, LLMGrader
from grader.resilience import RetryPolicy
from models import Verdict
from pipeline.cli.main import main
from training.cascade_eval import evaluate_cascade
from training.data import load_pairs


def _unlabelled(tmp_path):
    path = tmp_path / "unlabelled.jsonl"
    rows = [{"query": "When was the Eiffel Tower completed?", "text": "The Eiffel Tower was completed in 1889."},
            {"query": "When was the Eiffel Tower completed?", "text": "Bananas are rich in potassium."},
            {"query": "Who wrote Hamlet?", "text": "Hamlet was written by Shakespeare."}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_crag_label_records_reasons(server, tmp_path, capsys):
    out = tmp_path / "labelled.jsonl"
    code = main(["label", "--data", str(_unlabelled(tmp_path)), "--out", str(out), "--llm-model", "fake",
                 "--llm-base-url", server.base_url, "--no-progress", "--llm-chunks-per-call", "2"])
    assert code == 0
    pairs = load_pairs(out).pairs
    assert [p.label for p in pairs] == [Verdict.RELEVANT, Verdict.IRRELEVANT, Verdict.RELEVANT]
    assert all(p.metadata["labelled_by"] == "llm" and p.metadata["reason"] for p in pairs)
    assert len(server.requests) == 2  # one call per query, chunks batched


def test_crag_label_never_overwrites_labels_or_its_input(server, tmp_path, capsys):
    data = _unlabelled(tmp_path)
    earlier = tmp_path / "labelled.jsonl"
    earlier.write_text("labels from last week\n", encoding="utf-8")
    for out, message in ((earlier, "exists; it may hold labels an LLM was paid for"), (data, "is the input file")):
        code = main(["label", "--data", str(data), "--out", str(out), "--llm-model", "fake",
                     "--llm-base-url", server.base_url, "--no-progress"])
        assert code == 2 and message in capsys.readouterr().err
    assert earlier.read_text(encoding="utf-8") == "labels from last week\n" and server.requests == []  # no LLM call
    assert "Eiffel" in data.read_text(encoding="utf-8")


@pytest.mark.parametrize(("fault", "cause"), [
    ("500", "first: failed after 1 attempt: server error (500)"),
    ("invalid_json", "first: failed after 1 attempt: invalid JSON answer (Invalid"),
])
def test_crag_label_fails_fast_naming_the_server_and_the_cause_and_writes_nothing(server, tmp_path, capsys, fault,
                                                                                   cause):
    server.default = fault
    data = tmp_path / "six.jsonl"  # enough queries for the circuit to open before the last one is tried
    data.write_text("".join(json.dumps({"query": f"What is item {i}?", "text": f"Item {i} is a thing."}) + "\n"
                            for i in range(6)), encoding="utf-8")
    out = tmp_path / "labelled.jsonl"
    code = main(["label", "--data", str(data), "--out", str(out), "--llm-model", "fake",
                 "--llm-base-url", server.base_url, "--no-progress", "--llm-retries", "1"])
    assert code == 2
    err = capsys.readouterr().err
    assert server.base_url in err and "Nothing was written" in err
    assert cause in err  # the first failure, not "circuit open" of the last query
    assert not out.exists() and not list(tmp_path.glob("labelled.jsonl*"))


def test_crag_label_with_the_server_down_names_its_url(tmp_path, capsys):
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    out = tmp_path / "labelled.jsonl"
    code = main(["label", "--data", str(_unlabelled(tmp_path)), "--out", str(out), "--llm-model", "fake",
                 "--llm-base-url", f"http://127.0.0.1:{port}/v1", "--no-progress", "--llm-retries", "1"])
    assert code == 2
    assert f"127.0.0.1:{port}" in capsys.readouterr().err and not out.exists()


def test_cascade_eval_real_and_simulated(server, squad_pairs_file):
    primary = load_grader("default")
    pairs = load_pairs(squad_pairs_file).pairs[:30]
    llm = LLMGrader(LLMConfig(model="fake", base_url=server.base_url, mode="json_object",
                              retry=RetryPolicy(attempts=1)))
    report = evaluate_cascade(primary, pairs, llm=llm, levels=[0.0, 0.2, 0.5], simulated_accuracy=[1.0, 0.5])
    rows = report["real_llm"]["rows"]
    assert [r["escalation_rate"] for r in rows] == [0.0, 0.2, 0.5]
    assert rows[0]["llm_calls_per_query"] == 0 and rows[2]["llm_calls_per_query"] > rows[1]["llm_calls_per_query"]
    assert len(server.requests) == 15  # the widest band (50% of 30) judged once, one chunk per call
    perfect = report["simulated"]["llm_accuracy_1.00"]
    assert "SIMULATION" in perfect["note"]
    accs = [r["accuracy"] for r in perfect["rows"]]
    assert accs[0] <= accs[1] <= accs[2]  # a perfect LLM only helps
    assert perfect["rows"][2]["auto_error_rate"] <= perfect["rows"][0]["auto_error_rate"] + 1e-9
