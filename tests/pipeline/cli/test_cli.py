import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.cli.ask_commands import source_line
from pipeline.cli.main import main

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


def test_grade_reads_numeric_chunk_ids_as_text_and_names_the_line_of_a_bad_field(capsys, tmp_path):
    chunks = tmp_path / "chunks.jsonl"
    chunks.write_text(json.dumps({"text": "Normandy is a region in France.", "chunk_id": 17}) + "\n", encoding="utf-8")
    assert main(["grade", "--query", QUERY, "--chunks", str(chunks), "--json"]) == 0
    assert [r["chunk_id"] for r in json.loads(capsys.readouterr().out)] == ["17"]
    chunks.write_text(json.dumps({"text": "Bananas.", "chunk_id": "a"}) + "\n"
                      + json.dumps({"text": "Normandy.", "metadata": ["x"]}) + "\n", encoding="utf-8")
    assert main(["grade", "--query", QUERY, "--chunks", str(chunks)]) == 2
    assert f"{chunks}:2: Chunk.metadata must be a dict, got list" in capsys.readouterr().err


def test_a_bad_loop_option_is_named_as_the_user_typed_it(capsys, demo_cache):
    assert main(["ask", "--demo", "--max-rounds", "0", "--deadline", "-1", "What religion were the Normans?"]) == 2
    err = capsys.readouterr().err  # was "invalid RAGConfig: max_rounds must be >= 1 ..."
    assert "invalid option(s): --max-rounds must be >= 1, got 0; --deadline must be > 0 seconds, got -1.0" in err


def test_grade_table_and_text_chunks(capsys, tmp_path):
    chunks = tmp_path / "chunks.txt"
    chunks.write_text("Normandy is a region in France.\n\nBananas are yellow.\n", encoding="utf-8")
    assert main(["grade", "--query", QUERY, "--chunks", str(chunks), "--chunk", "Rouen is in Normandy."]) == 0
    out = capsys.readouterr().out
    assert "P(relevant)" in out and "Bananas" in out and "arg1" in out
    assert main(["grade", "--query", QUERY, "--chunk", QUERY]) == 0  # the table says why a rule decided
    assert "only repeats words of the" in " ".join(capsys.readouterr().out.split())


def test_grade_sends_only_the_uncertain_chunks_to_the_llm_and_prints_the_decision(capsys, server):
    chunks = ["Normandy is a region in France.", "Bananas are yellow.", "Rouen is the capital of Normandy."]
    args = ["grade", "--query", QUERY, *[a for c in chunks for a in ("--chunk", c)]]
    assert main([*args, "--json"]) == 0
    alone = json.loads(capsys.readouterr().out)
    assert main([*args, "--json", "--llm-model", "m", "--llm-base-url", server.base_url]) == 0
    cascaded = json.loads(capsys.readouterr().out)
    band = [i for i, g in enumerate(alone) if g["uncertain"] and g["decided_by"] == "model"]
    assert band and len(server.requests) == len(band)  # one call per uncertain chunk, none for the sure ones
    assert [i for i, g in enumerate(cascaded) if g["decided_by"] == "llm"] == band
    same = [{k: v for k, v in g.items() if k != "latency_ms"} for g in (*alone, *cascaded)]
    assert all(same[i] == same[len(chunks) + i] for i in range(len(chunks)) if i not in band)
    assert main([*args, "--llm-model", "m", "--llm-base-url", server.base_url]) == 0
    assert f"decision: correct ({len(band)} chunk(s) decided by the LLM, 0 it could not judge)" in \
        capsys.readouterr().out  # the fake calls a chunk sharing the question's words relevant
    assert main(args) == 0
    small_alone = capsys.readouterr().out.splitlines()[-1]
    server.default = "500"
    assert main([*args, "--llm-model", "m2", "--llm-base-url", server.base_url, "--llm-retries", "1"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == \
        f"{small_alone} (0 chunk(s) decided by the LLM, {len(band)} it could not judge)"  # flagged, never guessed
    assert main([*args, "--llm-model", "m", "--llm-retries", "0"]) == 2
    assert "--llm-retries must be >= 1" in capsys.readouterr().err


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
    assert isinstance(data["shift"]["shifted"], bool) and 0 <= data["shift"]["length_p_value"] <= 1
    assert "data_shift" in json.loads(capsys.readouterr().out)


def test_bench_grades_new_texts_every_repeat(capsys, monkeypatch):
    from grader.embedder import EMBEDDER_DIR, OnnxMiniLMEmbedder

    monkeypatch.setenv("CRAG_ONNX_REWRITES", "none")

    embedder_cache = OnnxMiniLMEmbedder(EMBEDDER_DIR, batch_size=1).cache  # the process's cache for that model
    embedder_cache.clear()  # (bounded: a full cache would not grow)
    assert main(["bench", "--model", "fast", "--chunks", "3", "--repeats", "2", "--tokens", "12"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["chunks"] == 3 and result["p50_ms"] > 0 and "new texts every repeat" in result["caches"]
    assert result["onnx_rewrites"] == "none: as exported"  # how the model ran is part of the figure
    assert len(embedder_cache) == (1 + 2) * (3 + 1)  # warm-up + 2 repeats, each 3 new chunks and a new query


def test_eval_reports_each_group_and_mean_probabilities(capsys, tmp_path, squad_pairs_file):
    rows = [json.loads(line) for line in squad_pairs_file.read_text(encoding="utf-8").splitlines()]
    tagged = tmp_path / "tagged.jsonl"  # two made-up domains, alternating by query
    queries = sorted({r["query"] for r in rows})
    tagged.write_text("".join(json.dumps({**r, "metadata": {"domain": "a" if queries.index(r["query"]) % 2 else "b"}})
                              + "\n" for r in rows), encoding="utf-8")
    assert main(["eval", "--data", str(tagged), "--group-by", "domain", "--json", str(tmp_path / "r.json")]) == 0
    summary = json.loads(capsys.readouterr().out)
    full = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert set(summary["per_group"]) == {"a", "b"}
    assert sum(g["n"] for g in summary["per_group"].values()) == summary["n"] == len(rows)
    assert 0 <= summary["mean_p_irrelevant"] < summary["mean_p_relevant"] <= 1
    for name, group in full["per_group"].items():  # each group's figures are the pairs of that group alone
        mine = [r for r in rows if ("a" if queries.index(r["query"]) % 2 else "b") == name]
        assert group["n"] == len(mine) and group["positives"] == sum(r["label"] != "irrelevant" for r in mine)
    for command in (["eval"], ["calibrate", "--out", str(tmp_path / "c")],  # every --group-by names the fields
                    ["answerability", "--out", str(tmp_path / "a")], ["reference", "--out", str(tmp_path / "r")]):
        assert main([*command, "--data", str(tagged), "--group-by", "domian"]) == 2
        assert "no pair has that field; fields in the metadata: domain" in capsys.readouterr().err


def test_eval_reports_a_data_shift_naming_the_fix(capsys, tmp_path, squad_pairs_file):
    rows = [json.loads(line) for line in squad_pairs_file.read_text(encoding="utf-8").splitlines()]
    shifted = tmp_path / "long.jsonl"  # the same pairs with chunks ten times longer than anything calibrated on
    shifted.write_text("".join(json.dumps({**r, "text": (r["text"] + " ") * 10}) + "\n" for r in rows),
                       encoding="utf-8")
    assert main(["eval", "--model", "default", "--data", str(shifted)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert "recalibrate with `crag calibrate`" in summary["data_shift"]


def test_commands_read_a_files_own_field_and_label_names(capsys, tmp_path, squad_pairs_file):
    rows = [json.loads(line) for line in squad_pairs_file.read_text(encoding="utf-8").splitlines()]
    theirs = tmp_path / "theirs.jsonl"
    theirs.write_text("".join(json.dumps({"question": r["query"], "passage": r["text"],
                                          "grade": "Good" if r["label"] == "relevant" else "Bad"}) + "\n"
                              for r in rows if r["label"] != "partial"), encoding="utf-8")
    assert main(["eval", "--data", str(theirs)]) == 2
    assert "map yours with --columns 'query=question,text=passage,label=grade'" in capsys.readouterr().err  # its names
    assert main(["eval", "--data", str(theirs), "--columns", "query=question,text=passage,label=grade",
                 "--label-map", "good=relevant,bad=irrelevant"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["n"] == sum(r["label"] != "partial" for r in rows) and summary["auroc"] > 0.8
    assert main(["calibrate", "--data", str(theirs), "--columns", "query=question,text=passage,label=grade",
                 "--label-map", "Good=relevant,Bad=irrelevant", "--target-escalation", "0.5",
                 "--out", str(tmp_path / "c")]) == 0
    card = (tmp_path / "c" / "MODEL_CARD.md").read_text(encoding="utf-8")
    assert "--columns 'query=question,text=passage,label=grade' --label-map 'Good=relevant,Bad=irrelevant'" in card


def test_calibrate_writes_a_new_bundle(capsys, tmp_path, squad_pairs_file):
    out = tmp_path / "recal"
    assert main(["calibrate", "--model", "default", "--data", str(squad_pairs_file), "--out", str(out),
                 "--target-escalation", "0.2", "--calibration", "platt"]) == 0
    from models import read_bundle

    m = read_bundle(out).manifest
    assert m.thresholds["target"]["max_escalation"] == 0.2 and "recalibration" in m.metrics
    assert m.reference["n"] == 90 and m.reference["design_effect"]["logit"] >= 1.0  # the shift alarm's reference
    assert main(["calibrate", "--model", "default", "--data", str(squad_pairs_file), "--out", str(out)]) == 2
    assert "exists" in capsys.readouterr().err


def test_mine_says_why_it_mined_nothing(capsys, tmp_path):
    pairs = tmp_path / "pairs.jsonl"
    rows = [{"query": "Who founded Normandy?", "text": "Rollo founded Normandy.", "label": "relevant"},
            {"query": "Who founded Normandy?", "text": "Bananas are yellow.", "label": "irrelevant"},
            {"query": "When was Rollo baptised?", "text": "Rollo was baptised in 912.", "label": "relevant"}]
    pairs.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert main(["mine", "--data", str(pairs), "--out", str(tmp_path / "mined.jsonl")]) == 0
    mined = json.loads(capsys.readouterr().out)  # the second query's one candidate shares its words: mined
    assert mined["mined"] == 1 and "note" not in mined
    assert main(["mine", "--data", str(pairs), "--out", str(tmp_path / "none.jsonl"), "--margin", "0.01"]) == 0
    nothing = json.loads(capsys.readouterr().out)  # 0 used to stand alone, like a failure of the method
    assert nothing["mined"] == 0 and nothing["note"].startswith("nothing mined: only queries whose pairs are all")


def test_convert_and_train_via_cli(capsys, tmp_path, fixtures):
    pairs = tmp_path / "pairs.jsonl"
    assert main(["convert", "squad", str(fixtures / "squad_mini.json"), "--out", str(pairs)]) == 0
    assert main(["train", "--data", str(pairs), "--out", str(tmp_path / "m"), "--max-steps", "2",
                 "--max-length", "48", "--batch-size", "8", "--no-progress", "--target-escalation", "0.5"]) == 0
    result = json.loads(capsys.readouterr().out.split("\n}\n")[-2] + "\n}")
    assert result["steps"] == 2 and "crag export" in result["next"]
    compared = result["compared_with"]  # the shipped default scored on the same validation pairs
    assert compared["model"] == "default" and compared["pairs"] >= result["thresholds"]["n"] > 0
    assert 0.0 <= compared["auroc"] <= 1.0 and 0.0 <= compared["this_grader_auroc"] <= 1.0
    assert ("advice" in compared) == (compared["this_grader_auroc"] < compared["auroc"])
    assert main(["train", "--data", str(pairs), "--out", str(tmp_path / "m2"), "--max-steps", "1", "--max-length",
                 "48", "--no-progress", "--target-escalation", "0.5", "--compare-with", "none"]) == 0
    assert "compared_with" not in capsys.readouterr().out
    assert main(["train", "--data", str(pairs), "--out", str(tmp_path / "m3"), "--compare-with", "defualt"]) == 2
    assert "did you mean 'default'" in capsys.readouterr().err and not (tmp_path / "m3").exists()


def test_train_can_start_from_the_default(capsys, tmp_path, fixtures):
    pairs = tmp_path / "pairs.jsonl"
    assert main(["convert", "squad", str(fixtures / "squad_mini.json"), "--out", str(pairs)]) == 0
    capsys.readouterr()
    assert main(["train", "--data", str(pairs), "--out", str(tmp_path / "m"), "--init", "defualt"]) == 2
    assert "did you mean 'default'" in capsys.readouterr().err and not (tmp_path / "m").exists()
    assert main(["train", "--data", str(pairs), "--out", str(tmp_path / "m"), "--init", "default", "--max-steps", "1",
                 "--batch-size", "8", "--no-progress", "--target-escalation", "0.5", "--compare-with", "none"]) == 0
    result = json.loads(capsys.readouterr().out.split("\n}\n")[-2] + "\n}")
    assert result["steps"] == 1 and result["next"].endswith("-onnx")  # fp32: such a grader does not survive int8
    manifest = json.loads((tmp_path / "m" / "manifest.json").read_text())
    assert manifest["training"]["config"]["learning_rate"] == 2e-5
    assert manifest["training"]["config"]["extra"]["init_bundle"]["name"] == "default"
    from models import read_bundle
    from training.export import _int8_start_hint

    # a failed int8 gate says why such a grader cannot be int8; one trained from the base gets no such hint
    assert "trained on from the int8 weights of 'default'" in _int8_start_hint(read_bundle(tmp_path / "m"))
    assert main(["train", "--data", str(pairs), "--out", str(tmp_path / "b"), "--max-steps", "1", "--batch-size", "8",
                 "--no-progress", "--target-escalation", "0.5", "--compare-with", "none"]) == 0
    assert _int8_start_hint(read_bundle(tmp_path / "b")) == ""


def test_an_output_is_never_written_over_the_input(tmp_path, capsys, fixtures):
    pairs = tmp_path / "pairs.jsonl"
    assert main(["convert", "squad", str(fixtures / "squad_mini.json"), "--out", str(pairs)]) == 0
    capsys.readouterr()
    before = pairs.read_bytes()
    for argv in (["mine", "--data", str(pairs), "--out", str(pairs)],
                 ["grade-file", str(pairs), "--out", str(pairs)],
                 ["convert", "squad", str(pairs), "--out", str(pairs)]):
        assert main(argv) == 2
        assert f"--out {pairs} is the input file" in capsys.readouterr().err
    assert pairs.read_bytes() == before


@pytest.mark.parametrize(
    ("argv", "message"),
    [(["grade", "--query", QUERY, "--chunks", "/nonexistent.jsonl"], "no such file"),
     (["grade", "--model", "defualt", "--query", QUERY, "--chunk", "x"], "did you mean 'default'"),
     (["grade", "--query", QUERY], "no chunks to grade"),
     (["eval", "--data", "/nonexistent.jsonl"], "no such file"),
     (["train", "--data", "/nonexistent.jsonl", "--out", "/tmp/x"], "no such file"),
     (["eval", "--data", "/"], "/ is a folder; pass one file of pairs"),  # was "no such file"
     (["grade", "--query", QUERY, "--chunks", "/"], "/ is a folder; pass one file of chunks"),  # was a traceback
     (["grade-file", "/nonexistent.jsonl", "--out", "/tmp/never-made.jsonl"], "no such file or folder of pairs"),
     (["ask", "What religion were the Normans?"], "pass --index DIR (built with `crag index add`), --qdrant-url"),
     (["index", "add", "https://example.com/faq.html", "--index", "/tmp/never-made", "--tenant", "acme"],
      "https://example.com/faq.html: a URL; indexing reads files and folders, never the network: save the page "
      "first (e.g. curl -o page.html 'https://example.com/faq.html')")],  # was "https:/example.com/...: no such"
)
def test_errors_are_one_line(capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and "Traceback" not in err
    assert not Path("/tmp/never-made.jsonl.partial").exists()  # grade-file looked at its input before its output


def test_one_place_to_retrieve_from(capsys):
    with pytest.raises(SystemExit) as exited:  # both used to mean the demo, silently
        main(["ask", "--demo", "--index", "/tmp", "What religion were the Normans?"])
    assert exited.value.code == 2 and "--index: not allowed with argument --demo" in capsys.readouterr().err


def test_console_script_has_no_traceback():
    out = subprocess.run([sys.executable, "-m", "pipeline.cli", "eval", "--data", "/nope.tsv"],
                         capture_output=True, text=True)
    assert out.returncode == 2 and "Traceback" not in out.stderr and "no such file" in out.stderr


@pytest.fixture
def demo_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CRAG_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_ask_demo_answers_with_citations_and_a_trace(capsys, demo_cache):
    assert main(["ask", "--demo", "When did Herve serve as a Byzantine general?", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["outcome"] in ("answer", "partial_answer") and result["sources"][0]["source"] == "Normans.md"
    assert "1050s" in result["answer"] and "[Normans.md#" in result["answer"] and result["llm_calls"] == 0
    assert [t["action"] for t in result["trace"]][:3] == ["retrieve", "check", "grade"]
    compose = next(t["detail"] for t in result["trace"] if t["action"] == "compose")
    assert compose["outcome"] == result["outcome"] and compose["sources"] == [s["chunk_id"] for s in result["sources"]]
    if result["outcome"] == "partial_answer":  # the message names exactly the aspects the trace says are missing
        assert ("do not clearly cover" in result["message"]) == bool(compose["missing_aspects"])
        assert all(a in result["message"] for a in compose["missing_aspects"])
    assert main(["ask", "--demo", "Who won the 2018 FIFA World Cup?", "--trace"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("[abstention]") and "trace:" in text and "retrieve" in text


def test_ask_filters_every_search_and_refuses_a_bad_filter_before_opening_the_index(capsys, tmp_path, demo_cache):
    question = "When did Herve serve as a Byzantine general?"
    assert main(["ask", "--demo", question, "--json", "--filter", "source=Warsaw.md"]) == 0
    scoped = json.loads(capsys.readouterr().out)
    assert scoped["outcome"] == "abstention" and not scoped["sources"]
    searches = [t["detail"] for t in scoped["trace"] if t["action"] == "retrieve"]
    assert len(searches) >= 2 and all(s["filters"] == {"source": "Warsaw.md"} for s in searches)
    assert all(h.startswith("Warsaw.md#") for s in searches for h in s["hits"])
    assert main(["ask", "--demo", question, "--json", "--filter", "source=Normans.md", "--filter", "authority=0"]) == 0
    assert "1050s" in json.loads(capsys.readouterr().out)["answer"]
    assert main(["ask", "--demo", question, "--filter", "source=Nowhere.md"]) == 0
    assert capsys.readouterr().out.startswith("[abstention] No document you can read matches the filters "
                                              "source='Nowhere.md'")
    missing = tmp_path / "never-made"
    for bad, says in (("status", "KEY=VALUE"), ("=active", "KEY=VALUE"), ("authority=high", "an integer")):
        assert main(["ask", "--index", str(missing), question, "--filter", bad]) == 2
        assert says in capsys.readouterr().err and not missing.exists()


def test_ask_shows_each_source_by_its_url_or_document_and_title():
    assert source_line({"url": "https://x.org/a", "title": "A", "source": "web"}) == "https://x.org/a - A"
    assert source_line({"document": "policies/refunds.md", "title": "Refunds"}) == "policies/refunds.md - Refunds"
    assert source_line({"document": None, "title": "Refunds", "source": "refunds.md"}) == "Refunds"
    assert source_line({"document": None, "title": "", "source": "refunds.md"}) == "refunds.md"


def test_index_add_reads_legacy_text_files_in_the_encoding_named(capsys, tmp_path, demo_cache):
    legacy = tmp_path / "legacy.txt"
    legacy.write_bytes("Le café ouvre à 8 h.".encode("cp1252"))
    index = str(tmp_path / "idx")
    assert main(["index", "add", str(legacy), "--index", index, "--tenant", "acme"]) == 2
    assert "--encoding cp1252" in capsys.readouterr().err
    assert main(["index", "add", str(legacy), "--index", index, "--tenant", "acme", "--encoding", "cp1252"]) == 0
    assert json.loads(capsys.readouterr().out)["chunks_added"] == 1


def test_index_search_reads_a_long_message_as_crag_ask_first_searches_it(capsys, caplog, tmp_path, demo_cache):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "reset.md").write_text("# Password reset\n\nTo reset your password, open Settings, choose Security "
                                   "and press Reset password.\n", encoding="utf-8")
    (docs / "holiday.md").write_text("# Our holiday\n\nWe spent a week of our holiday by the lake with the "
                                     "children, hiking every morning, swimming every afternoon and cooking fish "
                                     "over the fire every evening of that summer week.\n", encoding="utf-8")
    index = str(tmp_path / "idx")
    assert main(["index", "add", str(docs), "--index", index, "--tenant", "acme"]) == 0
    story = ("Last summer we spent a week of our holiday by the lake with the children, hiking every morning, "
             "swimming every afternoon and cooking fish over the fire every evening, and when we came back from "
             "that week by the lake with the children nothing worked any more. How do I reset my password?")
    search = ["index", "search", story, "--index", index, "--tenant", "acme", "-k", "1", "--json"]
    capsys.readouterr()
    assert main(search) == 0
    assert json.loads(capsys.readouterr().out)[0]["title"] == "Password reset"
    assert "searching the message's question, as crag ask's first round does: 'How do I reset my password?'" \
        in caplog.text
    assert main([*search, "--as-given"]) == 0  # the story's words outweigh the question's
    assert json.loads(capsys.readouterr().out)[0]["title"] == "Our holiday"


def test_index_add_then_ask_with_roles(capsys, tmp_path, demo_cache):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "reset.md").write_text("# Password reset\n\nTo reset your password, open Settings, choose Security "
                                   "and press Reset password. A link is e-mailed to you.\n", encoding="utf-8")
    index = str(tmp_path / "idx")
    assert main(["index", "add", str(docs), "--index", index, "--tenant", "acme", "--roles", "support"]) == 0
    assert json.loads(capsys.readouterr().out)["chunks_added"] == 1
    assert main(["ask", "--index", index, "--tenant", "acme", "--roles", "support", "--json",
                 "How do I reset my password?"]) == 0
    allowed = json.loads(capsys.readouterr().out)
    assert allowed["outcome"] != "access_denied" and allowed["trace"][0]["detail"]["hits"][0].startswith("reset.md")
    assert main(["ask", "--index", index, "--tenant", "acme", "--json", "How do I reset my password?"]) == 0
    assert json.loads(capsys.readouterr().out)["outcome"] == "access_denied"
    assert main(["ask", "--index", str(tmp_path / "nope"), "--json", "How do I reset my password?"]) == 2
    assert "is not an index" in capsys.readouterr().err
    search = ["index", "search", "reset my password", "--index", index, "--tenant", "acme", "--json"]
    assert main([*search, "--roles", "support"]) == 0  # what retrieval finds, before any grading
    hits = json.loads(capsys.readouterr().out)
    assert [(h["rank"], h["document"], h["title"]) for h in hits] == [(1, str(docs / "reset.md"), "Password reset")]
    assert hits[0]["text"].startswith("# Password reset") and hits[0]["score"] > 0
    assert main(search) == 0 and json.loads(capsys.readouterr().out) == []  # the roles' scope, as `ask` has it
    assert main([*search, "--roles", "support", "--filter", "status=superseded"]) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert main([*search[:-1], "--roles", "support"]) == 0
    assert "1 hit(s) for: reset my password" in capsys.readouterr().out
    assert main(["index", "search", "x", "--index", str(tmp_path / "nope"), "--filter", "position=top"]) == 2
    assert "takes an integer" in capsys.readouterr().err and not (tmp_path / "nope").exists()
    for forgot in (["ask", "--index", index, "How do I reset my password?"],  # the demo's tenant, silently
                   ["index", "search", "reset my password", "--index", index, "--tenant", "acmee"],
                   ["index", "list", "--index", index, "--tenant", "acmee"]):  # was [], as for an empty tenant
        assert main(forgot) == 2  # was an abstention / no hits, as if the documents did not say
        assert f"has no documents in {index}; it holds tenant(s) acme: pass --tenant NAME" in capsys.readouterr().err
    empty = str(tmp_path / "empty")
    assert main(["index", "create", "--index", empty]) == 0
    capsys.readouterr()
    assert main(["ask", "--index", empty, "--tenant", "acme", "How do I reset my password?"]) == 2
    assert f"it is empty: add documents with `crag index add --index {empty}" in capsys.readouterr().err
    assert main(["index", "remove", "--index", index, "--tenant", "acme", "--document", "resett.md"]) == 0
    mistyped = json.loads(capsys.readouterr().out)  # 0 removed used to read like a success
    assert mistyped["chunks_removed"] == 0 and f"nothing matched; `crag index list --index {index} --tenant acme`" \
        in mistyped["note"]
    assert main(["index", "remove", "--index", index, "--tenant", "acme", "--document", "reset.md"]) == 0
    removed = json.loads(capsys.readouterr().out)
    assert removed["chunks_removed"] == 1 and "note" not in removed


def test_index_add_can_store_strip_vectors_locally_only(capsys, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "reset.md").write_text("To reset your password, open Settings. A link is e-mailed to you.\n",
                                   encoding="utf-8")
    index = str(tmp_path / "idx")
    assert main(["index", "add", str(docs), "--index", index, "--tenant", "acme", "--strip-vectors"]) == 0
    capsys.readouterr()
    assert main(["index", "stats", "--index", index]) == 0
    assert json.loads(capsys.readouterr().out)["strip_vectors"] == 2
    assert main(["index", "add", str(docs), "--qdrant-url", "http://127.0.0.1:9", "--tenant", "acme",
                 "--strip-vectors"]) == 2
    assert "--strip-vectors is an option of the local index" in capsys.readouterr().err


def test_index_reembed_moves_an_index_of_an_earlier_embedder_onto_the_shipped_one(capsys, tmp_path):
    from pipeline.retrieval.embedding import default_embedder
    from pipeline.retrieval.index import LocalHybridIndex
    from tests.pipeline.conftest import HashEmbedder, make_chunk

    index = str(tmp_path / "idx")
    LocalHybridIndex(index, embedder=HashEmbedder()).write([make_chunk("p", "Paris is the capital of France.")])
    assert main(["ask", "What is the capital of France?", "--index", index, "--tenant", "a"]) == 2
    assert f"re-embed it with `crag index reembed --index {index}`" in capsys.readouterr().err
    assert main(["index", "stats", "--index", index]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert (stats["embedder"], stats["embedder_in_use"], stats["embedder_matches"]) == \
        ("hash", default_embedder().name, False)
    assert main(["index", "reembed", "--index", index]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["chunks"], report["embedder_before"], report["embedder"]) == (1, "hash", default_embedder().name)
    assert main(["index", "stats", "--index", index]) == 0
    assert json.loads(capsys.readouterr().out)["embedder_matches"] is True
    assert main(["index", "search", "capital of France", "--index", index, "--tenant", "a", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["chunk_id"] == "p"
    assert main(["index", "reembed", "--index", str(tmp_path / "typo")]) == 2
    assert "is not an index" in capsys.readouterr().err and not (tmp_path / "typo").exists()


def test_index_create_makes_an_empty_index_to_fill_over_http_and_never_overwrites(capsys, tmp_path):
    index = str(tmp_path / "idx")
    assert main(["index", "create", "--index", index, "--strip-vectors"]) == 0
    created = json.loads(capsys.readouterr().out)
    assert (created["chunks"], created["strip_vectors"], created["embedder"]) == (0, 0, None)
    from pipeline.retrieval.index import LocalHybridIndex
    from pipeline.retrieval.ingest import ChunkFields
    from pipeline.retrieval.uploads import ingest_upload

    opened = LocalHybridIndex.open_existing(index)  # what `crag serve --index` opens
    ingest_upload(opened, "reset.md", b"To reset your password, open Settings. A link is e-mailed to you.",
                  ChunkFields(tenant="acme"))
    assert main(["index", "create", "--index", index]) == 2
    assert "already holds an index (1 chunks)" in capsys.readouterr().err
    assert main(["index", "stats", "--index", index]) == 0
    assert json.loads(capsys.readouterr().out)["strip_vectors"] == 2  # kept for what was written after
    ingest_upload(opened, "a/b.md", b"Another page.", ChunkFields(tenant="acme", roles=frozenset({"ops"})))
    assert main(["index", "list", "--index", index, "--tenant", "acme", "--limit", "1"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"document": "a/b.md", "chunks": 1, "roles": ["ops"],
                                                    "format": "md"}]
    assert main(["index", "list", "--index", index, "--tenant", "acme", "--after", "a/b.md"]) == 0
    assert [d["document"] for d in json.loads(capsys.readouterr().out)] == ["reset.md"]
    assert main(["index", "list", "--index", index, "--tenant", "acme", "--limit", "0"]) == 2
    assert "--limit must be >= 1" in capsys.readouterr().err


def test_eval_pipeline_reports_and_validates_the_golden_set(capsys, tmp_path, demo_cache):
    golden = tmp_path / "golden.jsonl"
    golden.write_text("\n".join(json.dumps(x) for x in [
        {"query": "When did Herve serve as a Byzantine general?", "expected_action": "answer",
         "expected_sources": ["Normans.md"], "must_abstain": False, "answers": ["1050s"]},
        {"query": "Who won the 2018 FIFA World Cup?", "expected_action": "abstain", "expected_sources": [],
         "must_abstain": True},
    ]) + "\n", encoding="utf-8")
    assert main(["eval-pipeline", "--demo", "--golden", str(golden)]) == 0
    table = capsys.readouterr().out
    assert "2 golden questions" in table and "abstention fidelity" in table and "FIFA" in table
    assert main(["eval-pipeline", "--demo", "--golden", str(golden), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["n"] == 2 and report["abstention_fidelity"] == 1.0 and report["answer_rate_when_answerable"] == 1.0
    assert report["llm_calls_per_query"] == 0.0 and report["latency_ms_p50"] > 0
    assert report["gold_answer_in_answer"] == 1.0 and report["sources_accuracy_when_answered"] == 1.0
    assert {"recovery_rate", "wrong_answer_rate", "expected_action_accuracy", "degraded_rate"} <= set(report)
    from grader.factory import load_grader

    assert report["answer_floor"] == load_grader("default").answer_floor > 0  # the bundle's fitted floor
    assert main(["eval-pipeline", "--demo", "--golden", str(golden), "--json", "--answer-floor", "0"]) == 0
    assert json.loads(capsys.readouterr().out)["answer_floor"] == 0.0
    golden.write_text('{"query": "x y z", "must_abstain": "no"}\n', encoding="utf-8")
    assert main(["eval-pipeline", "--demo", "--golden", str(golden)]) == 2
    assert "golden.jsonl:1" in capsys.readouterr().err
    for key in ("expected_sources", "answers"):  # one string: answers matched letter by letter, sources as substrings
        golden.write_text(json.dumps({"query": "Who were the Normans?", "must_abstain": False, key: "Normans.md"})
                          + "\n", encoding="utf-8")
        assert main(["eval-pipeline", "--demo", "--golden", str(golden)]) == 2
        assert f"golden.jsonl:1: '{key}' must be a list of non-empty strings" in capsys.readouterr().err
    golden.write_text('{"query": "Who were the Normans?", "must_abstain": false}\n', encoding="utf-8")
    assert main(["eval-pipeline", "--demo", "--golden", str(golden), "--json"]) == 0
    no_golds = json.loads(capsys.readouterr().out)  # no gold answers given: not measured, rather than 0% found
    assert no_golds["gold_answer_in_answer"] is None and no_golds["rows"][0]["answer_contains_gold"] is None


@pytest.mark.parametrize(("command", "target", "named"), [
    ("calibrate", ["--target-error", "1.5"], "max_error (--target-error) must be strictly between 0 and 1, got 1.5"),
    ("calibrate", ["--target-error", "0"], "--target-error) must be strictly between 0 and 1, got 0.0"),
    ("calibrate", ["--target-error=-0.1"], "got -0.1"),  # used to write a bundle
    ("calibrate", ["--target-error", "nan"], "got nan"),
    ("calibrate", ["--target-escalation", "2"], "max_escalation (--target-escalation) must be in [0, 1], got 2.0"),
    ("adapt", ["--delta", "1"], "delta (--delta) must be strictly between 0 and 1, got 1.0"),
    ("fuse", ["--target-error", "1"], "got 1.0"),
    ("train", ["--delta", "0", "--target-error", "0.05"], "delta (--delta) must be strictly between 0 and 1"),
    ("train", ["--lr", "0"], "learning_rate must be in (0, 1); got learning_rate=0.0"),  # used to train at 4e-5
])
def test_a_target_out_of_range_is_refused_by_name_and_nothing_is_written(capsys, tmp_path, squad_pairs_file,
                                                                         command, target, named):
    out = tmp_path / "out"
    model = [] if command == "train" else ["--model", "default"]
    assert main([command, *model, "--data", str(squad_pairs_file), "--out", str(out), *target]) == 2
    assert named in capsys.readouterr().err  # a message, not a traceback (0 divided by zero, 1.5 a math error)
    assert not out.exists()


def test_an_output_that_cannot_be_written_is_one_line_naming_it(capsys, tmp_path, squad_pairs_file):
    blocker = tmp_path / "a-file"
    blocker.write_text("", encoding="utf-8")
    for argv, named in (
        (["eval", "--model", "default", "--json", str(blocker / "r.json")], "--json"),  # checked before scoring
        (["eval", "--model", "default", "--plots", str(blocker / "p")], "--plots"),
        (["calibrate", "--model", "default", "--suggest", "5", "--out", str(blocker / "s.jsonl")], "--out"),
    ):
        assert main([*argv, "--data", str(squad_pairs_file)]) == 2
        assert f"{named} {blocker}/" in (err := capsys.readouterr().err) and "is a file, not a folder" in err
    # a write the checks let through (root may "write" in /proc) still fails as one line, not a traceback
    assert main(["convert", "squad", str(squad_pairs_file.parent / "squad_mini.json"), "--out", "/proc/x.jsonl"]) == 2
    assert capsys.readouterr().err.startswith("error: ")


def test_calibrate_refuses_an_unreachable_guarantee_and_writes_nothing(capsys, tmp_path, squad_pairs_file):
    out = tmp_path / "recal"
    assert main(["calibrate", "--model", "default", "--data", str(squad_pairs_file), "--out", str(out),
                 "--target-error", "0.01", "--delta", "0.05"]) == 2
    err = capsys.readouterr().err
    assert "Nothing was written" in err and ("labelled pairs" in err or "will not help" in err)
    assert not out.exists()


def test_calibrate_suggests_a_seeded_random_sample_without_rule_decided_pairs(capsys, tmp_path, squad_pairs_file):
    pool = [json.loads(line) for line in squad_pairs_file.read_text(encoding="utf-8").splitlines()]
    echoes = [{**r, "text": f"Same problem here. {r['query']} Any ideas?"} for r in pool[:: 10]]
    data = tmp_path / "pool.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in pool + echoes), encoding="utf-8")
    out = tmp_path / "to_label.jsonl"

    reports = []

    def suggested(*extra: str) -> list[dict]:
        assert main(["calibrate", "--data", str(data), "--out", str(out), "--suggest", *extra]) == 0
        reports.append(json.loads(capsys.readouterr().out))
        return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]

    first = suggested("12")
    assert len(first) == 12 and suggested("12") == first  # the same sample again: reproducible
    assert all(r["text"] != p["text"] or r["query"] != p["query"] for r in first for p in echoes)
    others = [suggested("12", "--seed", str(seed)) for seed in range(1, 6)]
    assert any(rows != first for rows in others)  # another seed, another sample
    texts = {(r["query"], r["text"]) for rows in [first, *others] for r in rows}
    assert len(texts) > 24  # drawn from the whole pool, not always its same corner
    everything = suggested("500")
    assert len(everything) == len(pool)  # every pair but the echoes: decided by rule, their labels would reach nothing
    assert not any(r["text"].startswith("Same problem here.") for r in everything)
    assert reports[-1]["suggested"] == len(pool) and reports[-1]["seed"] == 0
    assert [r["seed"] for r in reports[2:7]] == [1, 2, 3, 4, 5]


def test_version_is_printed(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.startswith("crag 0.")


@pytest.mark.parametrize(("command", "shown"), [
    ("grade-file", "'fast' (the calibrated cosine alone: no cross-encoder pass, about 10x faster in the pipeline, "
                   "lower AUROC) (default: default)"),
    ("ask", "(default: 20.0)"),
    ("calibrate", "(default: 0.1)"),
])
def test_help_shows_every_default(capsys, command, shown):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert shown in text and not re.search(r"\(default: [^)]*\) \(default:", text)


def test_help_never_states_a_default_twice(capsys):
    with pytest.raises(SystemExit):
        main(["ask", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "(default: the lower threshold)" in text and "the lower threshold) (default" not in text


def test_trace_lines_are_cut_at_a_word_with_an_ellipsis():
    from pipeline.cli.ask_commands import _clip

    assert _clip("short", 20) == "short"
    clipped = _clip('{"query": "What religion were the Normans?", "k": 6}', 30)
    assert clipped.endswith("…") and len(clipped) <= 30 and clipped[:-1] == '{"query": "What religion were'


def test_eval_cascade_prints_tables_and_writes_json(capsys, tmp_path, squad_pairs_file):
    out = tmp_path / "cascade.json"
    assert main(["eval", "--cascade", "--data", str(squad_pairs_file), "--simulate-accuracy", "0.9",
                 "--levels", "0,0.5", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "SIMULATION" in text and "escalation rate" in text and "auto error rate" in text
    assert json.loads(out.read_text())["simulated"]["llm_accuracy_0.90"]["rows"][1]["escalation_rate"] == 0.5
    for option, value, named in (("--levels", "0,a", "--levels takes numbers separated by commas"),  # a traceback
                                 ("--simulate-accuracy", "1.5", "simulated LLM accuracies must lie in [0, 1]"),
                                 ("--levels", "0,2", "escalation levels must lie in [0, 1]")):
        assert main(["eval", "--cascade", "--data", str(squad_pairs_file), option, value]) == 2
        assert named in capsys.readouterr().err


@pytest.mark.slow
def test_the_whole_demo_golden_set_end_to_end(capsys, demo_cache):
    """All 26 demo questions through the real pipeline (about a minute): answerable ones are answered from
    the right document. Opt in with `python -m pytest -m slow`."""
    assert main(["eval-pipeline", "--demo", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["n"] == 26 and report["answer_rate_when_answerable"] >= 0.9
    assert report["sources_accuracy_when_answered"] >= 0.9 and report["degraded_rate"] == 0.0
    assert report["abstention_fidelity"] >= 0.6  # the answerability floor (issue 10's grader-only target)


def test_the_demo_index_is_one_per_installed_corpus_and_never_grows(tmp_path, monkeypatch):
    import shutil

    from pipeline.cli import ask_commands
    from pipeline.retrieval.index import LocalHybridIndex

    monkeypatch.setenv("CRAG_CACHE", str(tmp_path / "cache"))
    first = ask_commands.demo_index()
    chunks = sum(1 for _ in LocalHybridIndex.open_existing(first).iter_chunks())
    assert ask_commands.demo_index() == first and chunks > 0
    assert sum(1 for _ in LocalHybridIndex.open_existing(first).iter_chunks()) == chunks
    other = tmp_path / "other-install" / "demo"  # the same corpus installed elsewhere: its own index
    shutil.copytree(ask_commands.DEMO_DIR, other)
    monkeypatch.setattr(ask_commands, "DEMO_DIR", other)
    second = ask_commands.demo_index()
    assert second != first
    assert sum(1 for _ in LocalHybridIndex.open_existing(second).iter_chunks()) == chunks
    assert sum(1 for _ in LocalHybridIndex.open_existing(first).iter_chunks()) == chunks


def test_bench_text_is_not_taken_for_a_data_shift(capsys, caplog, recwarn):
    import warnings

    filters = list(warnings.filters)
    with caplog.at_level("WARNING"):
        assert main(["bench", "--model", "fast", "--chunks", "25", "--repeats", "10", "--tokens", "30"]) == 0
    assert warnings.filters == filters  # the command's warning filter does not outlive it
    capsys.readouterr()
    assert not [r for r in caplog.records if "differ from" in r.getMessage()]  # 275 synthetic chunks: no alarm
    assert not [w for w in recwarn if "differ from" in str(w.message)]


def test_a_data_shift_is_said_once_on_the_command_line(tmp_path, capsys):
    import subprocess
    import sys

    pairs = tmp_path / "pairs.jsonl"  # 250 chunks far from any calibration domain: the monitor's alarm fires
    pairs.write_text("".join(json.dumps({"text": f"PN-{i:05d} " * 40}) + "\n" for i in range(250)), encoding="utf-8")
    script = ("import sys; from grader import load_grader; from pipeline.cli.main import main; "
              "sys.exit(main(['grade', '--model', 'fast', '--query', 'what is the part number?', '--chunks', "
              f"{str(pairs)!r}, '--json']))")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stderr.count("differ from") == 1, run.stderr  # the log line with its fix, not a warning again
