"""The operator's commands: keys, streaming batch grading, PDF ingestion, and a real `crag serve` process that
finishes in-flight requests when told to stop."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

from models.errors import ConfigError
from pipeline.cli.main import main
from pipeline.retrieval.documents import read_document
from pipeline.service.keys import KeyStore
from tests import llama_server


def test_keys_create_list_revoke(capsys, tmp_path):
    store = tmp_path / "keys.json"
    assert main(["keys", "create", "--store", str(store), "--tenant", "acme", "--roles", "ops,legal"]) == 0
    created = json.loads(capsys.readouterr().out)
    assert created["api_key"].startswith("crag_") and created["roles"] == ["legal", "ops"]
    assert main(["keys", "list", "--store", str(store)]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed[0]["tenant"] == "acme" and "sha256" not in listed[0] and created["api_key"] not in str(listed)
    key_id = listed[0]["key_id"]
    assert main(["keys", "revoke", "--store", str(store), key_id]) == 0
    assert main(["keys", "revoke", "--store", str(store), "nope"]) == 2
    assert "no key with id" in capsys.readouterr().err
    assert main(["keys", "create", "--store", str(store), "--tenant", "bad tenant!"]) == 2
    store.write_text("{broken", encoding="utf-8")
    assert main(["keys", "list", "--store", str(store)]) == 2
    assert "not a valid API key store" in capsys.readouterr().err


def test_grade_file_streams_pairs_and_validates_lines(capsys, tmp_path):
    pairs = tmp_path / "pairs.jsonl"
    lines = [{"id": f"p{i}", "query_id": "q1", "chunk_id": f"c{i}", "query": "What is the capital of France?",
              "text": "Paris is the capital of France." if i % 2 else "Bananas are yellow."} for i in range(7)]
    pairs.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    out = tmp_path / "graded.jsonl"
    assert main(["grade-file", str(pairs), "--out", str(out), "--block", "3"]) == 0
    summary = json.loads(capsys.readouterr().out)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert summary["pairs"] == 7 and [r["id"] for r in rows] == [f"p{i}" for i in range(7)]
    assert [(r["query_id"], r["chunk_id"]) for r in rows] == [("q1", f"c{i}") for i in range(7)]
    assert rows[1]["probability"] > rows[0]["probability"]
    pairs.write_text(json.dumps(lines[0]) + "\n" + '{"query": "q"}\n', encoding="utf-8")
    assert main(["grade-file", str(pairs), "--out", str(tmp_path / "bad.jsonl")]) == 2
    error = capsys.readouterr().err
    assert "pairs.jsonl:2" in error and "--skip-errors" in error and not (tmp_path / "bad.jsonl").exists()
    kept = (tmp_path / "bad.jsonl.partial").read_text().splitlines()
    assert [json.loads(line)["id"] for line in kept] == ["p0"]  # graded before the bad line, not lost


def test_grade_file_says_when_a_file_holds_no_pairs(capsys, caplog, tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n", encoding="utf-8")
    assert main(["grade-file", str(empty), "--out", str(tmp_path / "graded.jsonl")]) == 0
    assert json.loads(capsys.readouterr().out)["pairs"] == 0
    assert f"{empty} holds no pairs: nothing was graded" in caplog.text  # was a silent success


def test_grade_file_reads_a_files_own_field_names(capsys, tmp_path):
    ours = tmp_path / "ours.jsonl"
    theirs = tmp_path / "theirs.jsonl"
    rows = [{"query": "What is the capital of France?", "text": t, "chunk_id": f"c{i}"}
            for i, t in enumerate(["Paris is the capital of France.", "Bananas are yellow."])]
    ours.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    theirs.write_text("".join(json.dumps({"question": r["query"], "passage": r["text"], "doc": r["chunk_id"]})
                              + "\n" for r in rows), encoding="utf-8")
    assert main(["grade-file", str(theirs), "--out", str(tmp_path / "x.jsonl")]) == 2
    assert "the record has ['doc', 'passage', 'question']: map yours with --columns" in capsys.readouterr().err
    assert main(["grade-file", str(ours), "--out", str(tmp_path / "ours.out.jsonl")]) == 0
    assert main(["grade-file", str(theirs), "--out", str(tmp_path / "theirs.out.jsonl"),
                 "--columns", "query=question,text=passage,chunk_id=doc"]) == 0
    capsys.readouterr()
    assert (tmp_path / "theirs.out.jsonl").read_text() == (tmp_path / "ours.out.jsonl").read_text()
    assert main(["grade-file", str(theirs), "--out", str(tmp_path / "y.jsonl"), "--columns", "label=grade"]) == 2
    assert "bad --columns entry 'label=grade'" in capsys.readouterr().err


def test_grade_file_withholds_swapped_opposites_as_grade_does(capsys, tmp_path):
    from grader import load_grader

    query = "left ventricular hypertrophy treatment"
    texts = ["Right ventricular hypertrophy is treated by addressing the pulmonary cause.",
             "Left ventricular hypertrophy is treated by lowering blood pressure."]
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps({"query": query, "text": t}) + "\n" for t in texts), encoding="utf-8")
    assert main(["grade-file", str(pairs), "--out", str(tmp_path / "g.jsonl")]) == 0
    rows = [json.loads(line) for line in (tmp_path / "g.jsonl").read_text().splitlines()]
    grades = load_grader("default").grade(query, texts)
    assert [r["uncertain"] for r in rows] == [g.uncertain for g in grades] == [True, False]
    assert json.loads(capsys.readouterr().out)["uncertain"] == 1


def test_grade_file_gives_echoes_the_verdict_grade_gives(capsys, tmp_path):
    from grader import load_grader

    query, echo, answer = "Is there an IKEA in Dubai?", "So is there an IKEA there?", "IKEA Dubai is at Festival City."
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps({"query": query, "text": t}) + "\n" for t in (echo, answer, "- -")),
                     encoding="utf-8")
    assert main(["grade-file", str(pairs), "--out", str(tmp_path / "graded.jsonl")]) == 0
    capsys.readouterr()
    rows = [json.loads(line) for line in (tmp_path / "graded.jsonl").read_text().splitlines()]
    library = load_grader("default").grade(query, [echo, answer, "- -"])
    assert [(r["verdict"], r["probability"], r["uncertain"], r["windows"]) for r in rows] == \
        [(g.verdict.value, round(g.probability, 6), g.uncertain, g.windows) for g in library]
    assert [r["windows"] for r in rows] == [0, 1, 0]  # a rule-decided pair is not read by the model
    assert rows[0]["probability"] == rows[2]["probability"] == 0.0 and rows[1]["probability"] > 0.0


def test_grade_file_skips_bad_and_oversized_lines_with_bounded_memory(capsys, tmp_path):
    import tracemalloc

    good = {"query": "What is the capital of France?", "text": "Paris is the capital of France."}
    pairs = tmp_path / "pairs.jsonl"
    with pairs.open("w", encoding="utf-8") as out:
        out.write(json.dumps(good) + "\n")
        out.write(json.dumps({"query": "huge", "text": "word " * 10_000_000}) + "\n")  # one 50 MB line
        out.write("{not json\n")
        out.write(json.dumps({"text": "no query"}) + "\n")
        out.write(json.dumps(good) + "\n")
    assert main(["grade-file", str(pairs), "--out", str(tmp_path / "g.jsonl"), "--skip-errors"]) == 0
    from grader.factory import load_cross_encoder
    from pipeline.cli.batch_grade import grade_stream

    grader = load_cross_encoder("default")  # loaded outside the measurement: every `crag grade-file` loads its own
    with (tmp_path / "again.jsonl").open("w", encoding="utf-8") as out:
        tracemalloc.start()  # Python's own allocations; the process's RSS also moves with onnxruntime's arenas
        try:
            again = grade_stream(grader, pairs, out, skip_errors=True)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert peak < 10e6, peak  # the 50 MB line was never held whole (a str of it alone would be 50 MB)
    assert again["pairs"] == 2 and again["skipped"] == 3
    summary = json.loads(capsys.readouterr().out)
    assert summary["pairs"] == 2 and summary["skipped"] == 3
    assert [s["line"] for s in summary["skipped_lines"]] == [2, 3, 4]
    assert "longer than 1,000,000 characters" in summary["skipped_lines"][0]["reason"]


def test_pdf_ingestion(tmp_path):
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_title("Refund policy")
    for text in ("Refunds are accepted within 30 days of purchase.", "Shipping costs are not refunded."):
        pdf.add_page()
        pdf.set_font("Helvetica", size=12)
        pdf.multi_cell(0, 10, text)
    pdf.output(str(tmp_path / "policy.pdf"))
    title, text = read_document(tmp_path / "policy.pdf")
    assert title == "Refund policy" and "30 days" in text and "not refunded" in text
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.4 garbage")
    from models import DataError

    with pytest.raises(DataError, match=r"broken\.pdf"):
        read_document(tmp_path / "broken.pdf")


def _get(url, **kw):
    with urllib.request.urlopen(url, timeout=30, **kw) as response:
        return response.status, json.loads(response.read() or b"null")


def _serve(args, port, env):
    """A real `crag serve` process, returned once /readyz answers 200."""
    proc = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "serve", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 120
    while True:
        try:
            if _get(f"http://127.0.0.1:{port}/readyz")[0] == 200:
                return proc
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                why = proc.stdout.read() if proc.poll() is not None else "not ready in time"
                proc.kill()
                raise AssertionError(why) from None
            time.sleep(0.5)


def _ask(port, key, query):
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/query", method="POST", data=json.dumps({"query": query}).encode(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    return _get(request)


def test_a_running_service_sees_narrowed_roles_and_removals_without_a_restart(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "falcon.md").write_text("# Project Falcon\n\nThe merger code name for Project Falcon is BLUEBIRD-7, "
                                    "agreed by the board in March.\n", encoding="utf-8")
    (docs / "paris.md").write_text("# Paris\n\nParis is the capital and largest city of France.\n",
                                   encoding="utf-8")
    index = tmp_path / "idx"
    add = [sys.executable, "-m", "pipeline.cli", "index", "add", str(docs), "--index", str(index), "--tenant", "acme"]
    subprocess.run(add, check=True, capture_output=True)
    store = tmp_path / "keys.json"
    keys = KeyStore.open(store, create=True)
    plain, legal = keys.create("acme"), keys.create("acme", roles=frozenset({"legal"}))
    port = llama_server.free_port()
    proc = _serve(["--keys", str(store), "--index", str(index), "--port", str(port)], port,
                  {**os.environ, "CRAG_CACHE": str(tmp_path / "cache")})
    question = "What is the merger code name for Project Falcon?"
    try:
        status, body = _ask(port, plain, question)
        assert status == 200 and "falcon.md" in {s["source"] for s in body["sources"]}
        subprocess.run([*add[:-2], "--tenant", "acme", "--roles", "legal"], check=True, capture_output=True)
        status, body = _ask(port, plain, question)  # the same running process, no restart
        assert status == 200 and "falcon.md" not in {s["source"] for s in body["sources"]}
        assert "BLUEBIRD" not in (body.get("answer") or "") + body["message"]
        assert "falcon.md" in {s["source"] for s in _ask(port, legal, question)[1]["sources"]}
        subprocess.run([sys.executable, "-m", "pipeline.cli", "index", "remove", "--index", str(index),
                        "--document", "falcon.md"], check=True, capture_output=True)
        assert "falcon.md" not in {s["source"] for s in _ask(port, legal, question)[1]["sources"]}
        with pytest.raises(urllib.error.HTTPError):  # a key in the query string is not accepted, nor logged
            _get(f"http://127.0.0.1:{port}/v1/query?api_key={plain}&x=1")
    finally:
        proc.terminate()
        proc.wait(30)
    logs = proc.stdout.read()
    assert "/v1/query?api_key=[redacted]&x=1" in logs and plain not in logs


def test_serve_finishes_in_flight_requests_on_sigterm(tmp_path, server):
    """A real uvicorn process: a slow /v1/query (the LLM takes 1.5 s) still completes after SIGTERM."""
    store = tmp_path / "keys.json"
    key = KeyStore.open(store, create=True).create("demo")
    server.default, server.sleep_s = "sleep", 1.5
    port = llama_server.free_port()
    env = {**os.environ, "CRAG_CACHE": str(tmp_path / "cache"), "OPENAI_API_KEY": "sk-never-logged"}
    proc = _serve(["--keys", str(store), "--demo", "--port", str(port), "--llm-model", "fake", "--llm-base-url",
                   server.base_url, "--llm-timeout", "5", "--llm-retries", "1", "--graceful-timeout", "20"], port, env)
    try:
        result = {}

        def ask():
            result["status"], result["body"] = _ask(port, key, "What religion were the Normans?")

        thread = threading.Thread(target=ask)
        thread.start()
        while not server.requests:  # the request is in flight, waiting on the LLM
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        thread.join(60)
        assert result["status"] == 200 and result["body"]["outcome"]
        assert proc.wait(30) in (0, -signal.SIGTERM)  # uvicorn re-raises the signal after a clean shutdown
    finally:
        if proc.poll() is None:
            proc.kill()
    logs = proc.stdout.read()
    assert "Shutting down" in logs and "Finished server process" in logs
    assert key not in logs and "sk-never-logged" not in logs


def test_parallel_key_creates_lose_nothing_and_revocations_stay(tmp_path):
    store = tmp_path / "keys.json"
    command = [sys.executable, "-m", "pipeline.cli", "keys", "create", "--store", str(store), "--tenant", "acme"]
    procs = [subprocess.Popen(command, stdout=subprocess.PIPE, text=True) for _ in range(10)]
    created = [json.loads(p.communicate(timeout=120)[0])["key_id"] for p in procs]
    assert all(p.returncode == 0 for p in procs)
    stored = KeyStore.open(store)
    assert set(stored.keys) == set(created)
    revoke = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "keys", "revoke", "--store", str(store),
                               created[0]])
    more = [subprocess.Popen(command, stdout=subprocess.PIPE, text=True) for _ in range(3)]
    assert revoke.wait(120) == 0 and all(p.wait(120) == 0 for p in more)
    final = KeyStore.open(store).keys
    assert len(final) == 13 and final[created[0]].revoked
    assert not [p for p in tmp_path.iterdir() if p.suffix == ".tmp"]


def test_a_key_made_through_the_library_is_checked_and_never_breaks_the_store(tmp_path):
    store = KeyStore.open(tmp_path / "keys.json", create=True)
    store.create("acme", roles=frozenset({"support"}))
    for fields, said in (({"roles": "admin"}, "not one string"),  # was stored as the roles a, d, i, m, n
                         ({"writer": "yes"}, "writer must be True or False"),  # was written, and then no read of the
                         ({"rate_per_minute": "10"}, "rate_per_minute must be an int >= 1"),  # store succeeded
                         ({"label": 5}, "label must be a string")):
        with pytest.raises(ConfigError, match=said):
            store.create("acme", **fields)
    assert [k.roles for k in KeyStore.open(tmp_path / "keys.json").keys.values()] == [frozenset({"support"})]


@pytest.mark.parametrize("tenant", ["", "../x y", "_hidden", "a" * 65])
def test_tenant_names_follow_one_rule_for_keys_and_index(capsys, tmp_path, tenant):
    (tmp_path / "d.md").write_text("# D\n\nSome text.\n", encoding="utf-8")
    assert main(["keys", "create", "--store", str(tmp_path / "k.json"), "--tenant", tenant]) == 2
    assert "tenant name" in capsys.readouterr().err
    assert main(["index", "add", str(tmp_path / "d.md"), "--index", str(tmp_path / "idx"), "--tenant", tenant]) == 2
    assert "tenant name" in capsys.readouterr().err and not (tmp_path / "idx").exists()
    assert main(["index", "add", str(tmp_path / "d.md"), "--index", str(tmp_path / "idx"), "--tenant", "ok",
                 "--roles", "bad role"]) == 2


def test_serve_takes_the_corrective_loop_options_that_ask_takes(tmp_path, monkeypatch):
    from pipeline.cli.main import build_parser
    from pipeline.cli.serve_commands import SETTINGS_ENV, app_from_env, serve_settings

    store = tmp_path / "keys.json"
    assert main(["keys", "create", "--store", str(store), "--tenant", "acme"]) == 0
    options = ["--answer-floor", "0.3", "--strip-relative-floor", "0.5", "--max-rounds", "1", "--min-answer-p",
               "0.2", "--max-llm-calls", "3", "--deadline", "7", "--min-query-words", "1"]
    ask = build_parser().parse_args(["ask", "--demo", "question", *options])
    serve = build_parser().parse_args(["serve", "--keys", str(store), "--demo", *options])
    settings = serve_settings(serve)
    monkeypatch.setenv(SETTINGS_ENV, json.dumps(settings))
    config = app_from_env().state.crag.rag.config
    assert (config.answer_floor, config.strip_relative_floor, config.max_rounds, config.min_answer_probability,
            config.max_llm_calls, config.deadline_s, config.min_query_words) == (0.3, 0.5, 1, 0.2, 3, 7.0, 1)
    assert {k: v for k, v in settings["rag"].items() if k != "access_denied_min_coverage"} == \
        {"max_llm_calls": ask.max_llm_calls, "deadline_s": ask.deadline, "max_rounds": ask.max_rounds,
         "min_answer_probability": ask.min_answer_p, "answer_floor": ask.answer_floor,
         "strip_relative_floor": ask.strip_relative_floor, "min_query_words": ask.min_query_words}


@pytest.mark.parametrize(("options", "named"), [
    (["--graceful-timeout", "-1"], "--graceful-timeout must be >= 0 seconds, got -1.0"),  # used to start serving
    (["--workers", "0"], "--workers must be >= 1, got 0"),
    (["--port", "70000"], "--port must be in [0, 65535], got 70000"),  # was an OverflowError traceback
    (["--grade-deadline", "0"], "--grade-deadline must be greater than 0, got 0.0"),  # was pydantic's traceback
    (["--max-chunks", "0", "--max-body-bytes", "-1"],
     "--max-chunks must be greater than or equal to 1, got 0; --max-body-bytes must be greater than or equal to 1024"),
    (["--access-denied-coverage", "2", "--workers", "2"], "--access-denied-coverage must be in [0, 1] (0: never)"),
    (["--web-url", "http://127.0.0.1:8888", "--workers", "2"], "given without a provider; pass --web searxng"),
    (["--llm-model", "m", "--workers", "2"], "no LLM endpoint: set base_url (--llm-base-url)"),  # a worker traceback
])
def test_serve_refuses_options_out_of_range_by_name_before_starting(capsys, tmp_path, monkeypatch, options, named):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    store = tmp_path / "keys.json"
    assert main(["keys", "create", "--store", str(store), "--tenant", "demo"]) == 0
    capsys.readouterr()
    assert main(["serve", "--keys", str(store), "--demo", *options]) == 2  # returns: no server was started
    assert named in capsys.readouterr().err


def test_serve_refuses_at_start_an_index_of_another_embedder_naming_the_fix(capsys, tmp_path):
    from pipeline.retrieval.index import LocalHybridIndex
    from tests.pipeline.conftest import HashEmbedder, make_chunk

    store = tmp_path / "keys.json"
    assert main(["keys", "create", "--store", str(store), "--tenant", "a"]) == 0
    index = tmp_path / "idx"  # as an index of an earlier release's embedder
    LocalHybridIndex(index, embedder=HashEmbedder()).write([make_chunk("p", "Paris is the capital of France.")])
    capsys.readouterr()
    assert main(["serve", "--keys", str(store), "--index", str(index)]) == 2  # returns: no server was started
    assert f"`crag index reembed --index {index}`" in capsys.readouterr().err


def test_keys_take_the_store_under_the_name_serve_gives_it(capsys, tmp_path):
    store = tmp_path / "keys.json"
    assert main(["keys", "create", "--keys", str(store), "--tenant", "acme"]) == 0
    capsys.readouterr()
    assert main(["keys", "list", "--keys", str(store)]) == 0
    assert json.loads(capsys.readouterr().out)[0]["tenant"] == "acme"


def test_serve_warns_at_start_of_keys_whose_tenant_has_no_documents(tmp_path, caplog):
    from pipeline.cli.ask_commands import DEMO_TENANT, demo_index
    from pipeline.cli.serve_commands import _warn_tenants_without_documents

    store = KeyStore.open(tmp_path / "keys.json", create=True)
    store.create(DEMO_TENANT)
    index = str(demo_index())
    with caplog.at_level("WARNING", logger="pipeline.cli.serve_commands"):
        _warn_tenants_without_documents(store, index, demo=True)
    assert not caplog.records  # every key can read the demo corpus
    store.create("acme")
    with caplog.at_level("WARNING", logger="pipeline.cli.serve_commands"):
        _warn_tenants_without_documents(store, index, demo=True)
    warning = caplog.records[-1].getMessage()
    assert "['acme']" in warning and f"--tenant {DEMO_TENANT}" in warning


def test_writer_keys_are_created_on_request_and_stored_as_booleans(capsys, tmp_path):
    store = tmp_path / "keys.json"
    assert main(["keys", "create", "--store", str(store), "--tenant", "acme", "--writer"]) == 0
    assert json.loads(capsys.readouterr().out)["writer"] is True
    assert main(["keys", "create", "--store", str(store), "--tenant", "acme"]) == 0
    assert json.loads(capsys.readouterr().out)["writer"] is False
    assert main(["keys", "list", "--store", str(store)]) == 0
    assert sorted(k["writer"] for k in json.loads(capsys.readouterr().out)) == [False, True]
    records = json.loads(store.read_text())
    del records["keys"][1]["writer"]  # a store written before writer keys existed: its keys read only
    store.write_text(json.dumps(records))
    assert sorted(k.writer for k in KeyStore.open(store).keys.values()) == [False, True]
    records["keys"][1]["writer"] = "yes"  # hand-edited: never a truthy string granting writes
    store.write_text(json.dumps(records))
    assert main(["keys", "list", "--store", str(store)]) == 2
    assert "not a valid API key store" in capsys.readouterr().err
