"""The SQLite hybrid index: persistence, re-indexing, removal, live readers, concurrent and killed writers."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from grader.bounded_cache import content_key
from models import ConfigError, DataError
from pipeline.retrieval.documents import Principal, chunk_text, read_document
from pipeline.retrieval.index import EXACT_SCAN_MAX, LocalHybridIndex
from pipeline.retrieval.ingest import ingest
from pipeline.retrieval.legacy_index import migrate_file_index
from tests.pipeline.conftest import CORPUS, TENANT_A, HashEmbedder, make_chunk

REPO = Path(__file__).resolve().parents[3]


def test_index_persists_and_checks_its_embedder(index, tmp_path):
    again = LocalHybridIndex(tmp_path / "idx", embedder=HashEmbedder())
    assert len(again) == len(CORPUS)
    assert again.search("capital of France", TENANT_A, k=1)[0][0].chunk_id == "a-paris"
    assert {c.chunk_id for c in again.iter_chunks("b")} == {"b-invoice", "b-falcon"}

    class OtherEmbedder(HashEmbedder):
        name = "another-model"

    with pytest.raises(DataError, match="built with the embedder 'hash'"):
        LocalHybridIndex(tmp_path / "idx", embedder=OtherEmbedder())
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "index.sqlite").write_bytes(b"not a database at all" * 100)
    with pytest.raises(DataError, match="cannot be opened"):
        LocalHybridIndex(junk).search("x", TENANT_A)
    with pytest.raises(DataError, match="is not an index"):
        LocalHybridIndex.open_existing(tmp_path / "nothing-here")


def test_filters_on_metadata_and_bad_filters(index):
    index.add([make_chunk("a-md", "Paris has many museums.", metadata={"format": "md", "lang": "en"})])
    hits = index.search("Paris museums", TENANT_A, filters={"format": "md"})
    assert [c.chunk_id for c, _ in hits] == ["a-md"]
    assert index.search("Paris", TENANT_A, filters={"lang": "fr"}) == []
    with pytest.raises(ConfigError, match="filter 'format'"):
        index.search("Paris", TENANT_A, filters={"format": ["md"]})
    with pytest.raises(ConfigError, match="k must be"):
        index.search("Paris", TENANT_A, k=0)
    with pytest.raises(ConfigError, match=r"filters must be a dict of field -> value.*got 'format=md'"):
        index.search("Paris", TENANT_A, filters="format=md")  # type: ignore[arg-type]  # was an AttributeError
    with pytest.raises(ConfigError, match="query must be a string, got NoneType"):
        index.search(None, TENANT_A)  # type: ignore[arg-type]


def test_tenants_counts_chunks_per_tenant_and_forgets_an_emptied_one(tmp_path):
    idx = LocalHybridIndex(tmp_path / "idx", embedder=HashEmbedder())
    assert idx.tenants() == {}
    idx.add([make_chunk("a1", "Alpha."), make_chunk("a2", "Beta.", roles=("ops",)), make_chunk("b1", "Gamma.",
                                                                                                tenant="b")])
    assert idx.tenants() == {"a": 2, "b": 1}
    idx.remove(tenant="b")
    assert idx.tenants() == {"a": 2}


def test_a_filter_of_the_wrong_type_for_its_field_is_refused_not_matched_against_nothing(index):
    index.add([make_chunk("a-v", "Paris has many museums.", position=3, metadata={"version": 1.5})])
    assert [c.chunk_id for c, _ in index.search("Paris museums", TENANT_A, filters={"position": 3})] == ["a-v"]
    assert [c.chunk_id for c, _ in index.search("Paris museums", TENANT_A, filters={"version": 1.5})] == ["a-v"]
    with pytest.raises(ConfigError, match=r"filter 'position' holds an integer, got str '3': pass \{'position': 3\}"):
        index.search("Paris", TENANT_A, filters={"position": "3"})  # as JSON from a form: used to match nothing
    with pytest.raises(ConfigError, match=r"filter 'status' holds text, got int 1: pass \{'status': '1'\}"):
        index.search("Paris", TENANT_A, filters={"status": 1})
    with pytest.raises(ConfigError, match="filter 'authority' holds an integer, got bool"):
        index.search("Paris", TENANT_A, filters={"authority": True})
    for field in ("text", "allowed_roles", "metadata"):
        with pytest.raises(ConfigError, match=f"filter '{field}' is not supported: .*roles come from the caller"):
            index.search("Paris", TENANT_A, filters={field: "x"})


def test_reindexing_a_folder_is_idempotent_and_replaces_changed_documents(tmp_path, monkeypatch):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "page.html").write_text("<html><title>Guide</title><script>x=1</script><p>Step one.</p>"
                                    "<p>Step two.</p></html>", encoding="utf-8")
    (docs / "notes.md").write_text("# Notes\n\nFirst paragraph.\n\nSecond paragraph.\n", encoding="utf-8")
    (docs / "empty.md").write_text("", encoding="utf-8")
    title, text = read_document(docs / "page.html")
    assert title == "Guide" and "x=1" not in text and "Step two." in text
    assert chunk_text("a " * 400, max_chars=300)[0].count("a") <= 150
    idx = LocalHybridIndex(tmp_path / "idx", embedder=HashEmbedder())
    first = ingest(idx, [docs], tenant="t", roles=["ops"])
    assert (first.files, first.chunks_added, first.chunks_unchanged) == (2, 2, 0)
    assert first.skipped == [{"path": str(docs / "empty.md"), "reason": "no text"}]
    assert first.unsupported_files == {}
    assert {c.title for c in idx.iter_chunks()} == {"Guide", "Notes"}
    assert all(c.allowed_roles == {"ops"} for c in idx.iter_chunks())
    again = ingest(idx, [docs], tenant="t", roles=["ops"])
    assert (again.chunks_added, again.chunks_updated, again.chunks_unchanged, len(idx)) == (0, 0, 2, 2)
    (docs / "notes.md").write_text("# Notes\n\nA rewritten paragraph.\n", encoding="utf-8")
    changed = ingest(idx, [docs], tenant="t", roles=["ops"])
    assert (changed.chunks_added, changed.chunks_removed, len(idx)) == (1, 1, 2)
    assert any("rewritten" in c.text for c in idx.iter_chunks()) and not any(
        "First paragraph" in c.text for c in idx.iter_chunks())
    narrowed = ingest(idx, [docs], tenant="t", roles=["admin"])
    assert narrowed.chunks_updated == 2 and all(c.allowed_roles == {"admin"} for c in idx.iter_chunks())
    monkeypatch.chdir(tmp_path)  # a document named by its path relative to here, as a user types it
    assert idx.remove(document="docs/notes.md") == 1 and {c.source for c in idx.iter_chunks()} == {"page.html"}


def test_unreadable_files_stop_the_run_unless_skipped(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.md").write_text("# Good\n\nReadable text.\n", encoding="utf-8")
    (docs / "broken.pdf").write_bytes(b"%PDF-1.4 this is not really a pdf")
    (tmp_path / "skip.bin").write_bytes(b"\x00")
    idx = LocalHybridIndex(tmp_path / "idx", embedder=HashEmbedder())
    with pytest.raises(DataError, match=r"broken\.pdf.*--skip-errors"):
        ingest(idx, [docs], tenant="t")
    assert not idx.path.exists()  # nothing written
    (docs / "deck.key").write_bytes(b"PK\x03\x04")  # Keynote
    (docs / "LICENSE").write_text("MIT", encoding="utf-8")
    (docs / ".git").mkdir()
    (docs / ".git" / "config").write_text("x", encoding="utf-8")
    report = ingest(idx, [docs], tenant="t", skip_errors=True)
    assert report.files == 1 and report.skipped[0]["path"].endswith("broken.pdf") and len(idx) == 1
    assert report.to_dict()["unsupported_files"] == {"(no extension)": 1, ".key": 1}  # said, not silently passed
    with pytest.raises(DataError, match="unsupported file type"):
        ingest(idx, [tmp_path / "skip.bin"], tenant="t")
    with pytest.raises(DataError, match="no such file"):
        ingest(idx, [tmp_path / "missing"], tenant="t")


def test_remove_by_document_tenant_and_chunk_id_and_stats(index):
    stats = index.stats()
    assert stats["chunks"] == 5 and stats["tenants"] == {"a": 3, "b": 2} and stats["embedder"] == "hash"
    assert index.remove(chunk_id="a-bananas") == 1
    assert index.remove(document="a-paris.md", tenant="b") == 0  # both conditions must hold
    assert index.remove(document="a-paris.md") == 1
    assert index.search("capital of France", TENANT_A, k=5) == []  # only the legal-only chunk is left in a
    assert index.remove(tenant="b") == 2
    assert index.stats()["tenants"] == {"a": 1}
    with pytest.raises(ConfigError, match="refusing to empty"):
        index.remove()


def test_a_second_reader_sees_a_narrowed_role_at_once(index, tmp_path):
    reader = LocalHybridIndex(tmp_path / "idx", embedder=HashEmbedder())
    assert "a-paris" in {c.chunk_id for c, _ in reader.search("capital of France", TENANT_A)}
    index.add([make_chunk("a-paris", CORPUS[0].text, roles=("legal",), title="France")])
    assert "a-paris" not in {c.chunk_id for c, _ in reader.search("capital of France", TENANT_A)}
    legal = Principal(tenant="a", roles=frozenset({"legal"}))
    assert "a-paris" in {c.chunk_id for c, _ in reader.search("capital of France", legal)}


def test_large_scopes_use_binary_candidates_and_never_cross_scopes(tmp_path):
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(3000)]
    public = [make_chunk(f"p{i}", " ".join(rng.choice(words, 12))) for i in range(EXACT_SCAN_MAX + 200)]
    secret = [make_chunk(f"s{i}", public[i].text, roles=("legal",)) for i in range(50)]
    idx = LocalHybridIndex(tmp_path / "idx", embedder=HashEmbedder())
    idx.add(public + secret)
    hits = idx.search(public[7].text, TENANT_A, k=5)
    assert hits[0][0].chunk_id == "p7" and not any(c.chunk_id.startswith("s") for c, _ in hits)


def test_old_file_format_is_refused_then_migrated_without_reembedding(tmp_path):
    old = tmp_path / "old"
    old.mkdir()
    vectors = HashEmbedder().embed([c.text for c in CORPUS])
    (old / "chunks.jsonl").write_text("".join(json.dumps(c.to_dict()) + "\n" for c in CORPUS), encoding="utf-8")
    np.save(old / "vectors.npy", vectors)
    (old / "index.json").write_text(json.dumps({"embedder": "hash", "format": 1}), encoding="utf-8")
    with pytest.raises(DataError, match="crag index migrate"):
        LocalHybridIndex(old)
    stats = migrate_file_index(old)
    assert stats["chunks"] == len(CORPUS) and stats["embedder"] == "hash"
    assert (old / "chunks.jsonl.migrated").is_file() and not (old / "chunks.jsonl").exists()
    migrated = LocalHybridIndex(old, embedder=HashEmbedder())
    assert migrated.search("capital of France", TENANT_A, k=1)[0][0].chunk_id == "a-paris"
    with pytest.raises(DataError, match="nothing to migrate"):
        migrate_file_index(old)


WRITER = """
import sys
from pipeline.retrieval.index import LocalHybridIndex
from tests.pipeline.conftest import HashEmbedder, make_chunk
root, prefix, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
index = LocalHybridIndex(root, embedder=HashEmbedder())
print("ready", flush=True)
index.add([make_chunk(f"{prefix}{i}", f"text {prefix} number {i} " * 20) for i in range(n)])
print("done", flush=True)
"""


def _writer(root, prefix, n):
    return subprocess.Popen([sys.executable, "-c", WRITER, str(root), prefix, str(n)], cwd=REPO,
                            stdout=subprocess.PIPE, text=True)


def test_two_concurrent_writer_processes_lose_nothing(tmp_path):
    root = tmp_path / "idx"
    LocalHybridIndex(root, embedder=HashEmbedder()).add([make_chunk("seed", "seed text")])
    writers = [_writer(root, prefix, 1500) for prefix in ("x", "y")]
    for w in writers:
        assert w.wait(timeout=300) == 0
    ids = {c.chunk_id for c in LocalHybridIndex(root).iter_chunks()}
    assert len(ids) == 3001 and {"x0", "x1499", "y0", "y1499", "seed"} <= ids


def test_a_writer_killed_mid_write_leaves_the_last_committed_state(tmp_path):
    root = tmp_path / "idx"
    LocalHybridIndex(root, embedder=HashEmbedder()).add([make_chunk("seed", "seed text")])
    writer = _writer(root, "k", 20000)
    assert writer.stdout.readline().strip() == "ready"
    wal = root / "index.sqlite-wal"
    deadline = time.monotonic() + 120
    while (not wal.exists() or wal.stat().st_size < 2_000_000) and writer.poll() is None:
        assert time.monotonic() < deadline, "the writer never started writing"
        time.sleep(0.01)
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait(timeout=30)
    index = LocalHybridIndex(root, embedder=HashEmbedder())
    conn = index._conn()
    conn.execute("INSERT INTO fts(fts) VALUES ('integrity-check')")
    counts = [conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("chunks", "vectors", "vec")]
    assert counts == [1, 1, 1]  # the interrupted transaction is gone entirely
    assert index.search("seed text", TENANT_A)[0][0].chunk_id == "seed"
    index.add([make_chunk("after", "written after the crash")])
    assert len(index) == 2


def test_search_shares_stored_vectors_only_when_they_are_bit_identical(tmp_path):
    from grader.embedder import OnnxMiniLMEmbedder

    embedder = OnnxMiniLMEmbedder()
    index = LocalHybridIndex(tmp_path / "idx", embedder=embedder)
    index.write(CORPUS)
    embedder.cache.clear()
    hits = [c for c, _ in index.search("capital of France", TENANT_A, k=2)]
    shared = {c.text: embedder.cache.get(content_key(c.text)) for c in hits}
    assert all(v is not None for v in shared.values())
    embedder.cache.clear()
    fresh = embedder.embed(list(shared))
    assert all(np.array_equal(v, fresh[i]) for i, v in enumerate(shared.values()))

    other = LocalHybridIndex(tmp_path / "other", embedder=HashEmbedder())  # no identity: nothing is shared
    other.write(CORPUS)
    embedder.cache.clear()
    other.search("capital of France", TENANT_A, k=2)
    assert len(embedder.cache) == 0


def test_searching_an_index_that_does_not_exist_says_so_once(tmp_path, caplog):
    index = LocalHybridIndex(tmp_path / "typo", embedder=HashEmbedder())
    with caplog.at_level("WARNING", logger="pipeline.retrieval.index"):
        assert index.search("Paris", TENANT_A) == [] and index.search("Lyon", TENANT_A) == []
    said = [r.getMessage() for r in caplog.records if "no documents yet" in r.getMessage()]
    assert len(said) == 1 and "crag index add --index" in said[0] and str(tmp_path / "typo") in said[0]
    assert not (tmp_path / "typo").exists()  # searching creates nothing
    with pytest.raises(DataError, match=r"is not an index.*crag index create --index"):
        LocalHybridIndex.open_existing(tmp_path / "typo")


def test_an_index_refuses_a_path_embedder_or_flag_of_the_wrong_kind_when_it_is_made(tmp_path):
    for args, kwargs, said in (((None,), {}, "root must be the index folder's path, got NoneType"),
                               ((tmp_path / "idx", "minilm"), {}, "embedder must have a name and embed"),
                               ((tmp_path / "idx",), {"strip_vectors": "yes"}, "strip_vectors must be True or False")):
        with pytest.raises(ConfigError, match=said):  # "minilm" failed only at the first write or search
            LocalHybridIndex(*args, **kwargs)


def test_ingest_takes_one_path_alone_as_that_path_and_refuses_a_missing_index(tmp_path, monkeypatch):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "apples.md").write_text("# Apples\n\nApples grow on trees in orchards.", encoding="utf-8")
    monkeypatch.chdir(tmp_path)  # "docs" as a string was walked as its letters, "/..." as the whole disk
    for one in ("docs", docs):
        report = ingest(LocalHybridIndex(tmp_path / f"idx-{type(one).__name__}", embedder=HashEmbedder()), one,
                        tenant="t")
        assert report.files == 1 and report.chunks_added == 1
    with pytest.raises(ConfigError, match="index must be a LocalHybridIndex or QdrantRetriever"):
        ingest(None, [docs], tenant="t")


def test_indexing_says_how_far_it_is_on_stderr_and_nothing_on_stdout(tmp_path, monkeypatch, capsys):
    import models.progress as progress_module
    import pipeline.retrieval.ingest as ingest_module

    docs = tmp_path / "docs"
    docs.mkdir()
    for n in range(3):
        (docs / f"d{n}.md").write_text(f"# Doc {n}\n\nParagraph number {n} of the corpus.", encoding="utf-8")
    monkeypatch.delenv("CRAG_NO_PROGRESS", raising=False)
    monkeypatch.setattr(ingest_module, "SAY_WRITE_FROM", 3)
    monkeypatch.setattr(progress_module, "FALLBACK_EVERY_S", 0.0)  # a line per file, as a slow read would write
    ingest(LocalHybridIndex(tmp_path / "idx", embedder=HashEmbedder()), [docs], tenant="t")
    out, err = capsys.readouterr()
    assert out == "" and "reading documents: 1/3 file\n" in err and "indexing 3 chunks" in err and "done in" in err
    monkeypatch.setenv("CRAG_NO_PROGRESS", "1")
    ingest(LocalHybridIndex(tmp_path / "idx", embedder=HashEmbedder()), [docs], tenant="t")
    assert capsys.readouterr() == ("", "")


def test_a_long_query_is_searched_by_its_two_ends_as_the_grader_reads_it(tmp_path):
    from grader.embedder import OnnxMiniLMEmbedder

    asked: list[str] = []

    class Recording(OnnxMiniLMEmbedder):  # the real embedder, remembering what it was asked to embed
        def embed(self, texts):
            asked.extend(texts)
            return super().embed(texts)

    embedder = Recording(batch_size=1)
    index = LocalHybridIndex(tmp_path / "idx", embedder=embedder)
    answer = make_chunk("a-normandy", "The Normans gave their name to Normandy, a region in northern France.")
    index.add([answer, make_chunk("a-trip", "We drove across Europe and visited castles, museums and harbours.")])
    story = "Last summer my family drove across Europe and we visited many castles, museums and old harbours. " * 16
    question = "In what country is Normandy located?"
    asked.clear()
    hits = index.search(story + question, TENANT_A, k=2)
    (embedded,) = asked
    assert embedded.endswith(question) and " ... " in embedded  # the question that ends the message was read
    assert embedded == embedder.fit_query(story + question)[0]  # the text the grader's cosine embeds: one vector
    assert {c.chunk_id for c, _ in hits} == {"a-normandy", "a-trip"}
    asked.clear()
    index.search(question, TENANT_A, k=1)
    assert asked == [question]  # a short query as it is
