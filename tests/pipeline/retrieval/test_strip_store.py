"""Stored sentence-strip vectors: written with the chunks, kept in step with them, shared with a fused grader."""

import numpy as np
import pytest

from grader.bounded_cache import content_key
from grader.embedder import OnnxMiniLMEmbedder
from models import ConfigError
from pipeline.retrieval.index import LocalHybridIndex
from pipeline.retrieval.strips import sentence_strips
from tests.pipeline.conftest import TENANT_A, HashEmbedder, make_chunk

DOCS = [
    make_chunk("a-paris", "# France\nParis is the capital of France. It lies on the Seine. See map.", title="France"),
    make_chunk("a-bananas", "Bananas are rich in potassium. They grow in tropical regions!", title="Bananas"),
]


def _stored(index):
    conn = index._conn()
    return {bytes(k): np.frombuffer(v, dtype=np.float32).copy()
            for k, v in conn.execute("SELECT key, vector FROM strip_vectors").fetchall()}


@pytest.fixture(scope="module")
def embedder():
    return OnnxMiniLMEmbedder()


def test_sentence_strips_leave_out_headings_and_fragments():
    assert sentence_strips(DOCS[0].text) == ["Paris is the capital of France.", "It lies on the Seine."]
    assert sentence_strips("# Title only\n") == []


def test_a_search_puts_the_hits_strip_vectors_into_the_cache_bit_identical(tmp_path, embedder):
    index = LocalHybridIndex(tmp_path / "idx", embedder=embedder, strip_vectors=True)
    index.write(DOCS)
    assert index.stats()["strip_vectors"] == 4
    embedder.cache.clear()
    hits = [c for c, _ in index.search("capital of France", TENANT_A, k=1)]
    strips = sentence_strips(hits[0].text)
    shared = [embedder.cache.get(content_key(s)) for s in strips]
    assert all(v is not None for v in shared)
    assert embedder.cache.get(content_key(sentence_strips(DOCS[1].text)[0])) is None  # not a hit: not shared
    embedder.cache.clear()
    fresh = embedder.embed(strips)
    assert all(np.array_equal(v, fresh[i]) for i, v in enumerate(shared))


def test_strip_vectors_follow_updates_removals_and_later_writers(tmp_path, embedder):
    index = LocalHybridIndex(tmp_path / "idx", embedder=embedder, strip_vectors=True)
    index.write(DOCS)
    before = _stored(index)
    # roles change only: the same vectors stay, under the chunk's new row, and nothing is embedded again
    embedder.cache.clear()
    index.write([make_chunk("a-paris", DOCS[0].text, roles=("staff",), title="France"), DOCS[1]])
    after = _stored(index)
    assert set(after) == set(before) and all(np.array_equal(before[k], v) for k, v in after.items())
    assert len(embedder.cache) == 0
    # a writer that did not ask for strip vectors still keeps them up to date
    later = LocalHybridIndex(tmp_path / "idx", embedder=embedder)
    later.write([make_chunk("a-paris", "Paris has about two million inhabitants.", title="France")])
    keys = set(_stored(later))
    assert content_key("Paris has about two million inhabitants.") in keys
    assert content_key("It lies on the Seine.") not in keys  # the old text's strips went with it
    later.remove(chunk_id="a-bananas")
    assert keys - set(_stored(later)) == {content_key(s) for s in sentence_strips(DOCS[1].text)}
    assert later.stats()["strip_vectors"] == 1


def test_asking_for_strip_vectors_fills_in_an_existing_index(tmp_path, embedder):
    plain = LocalHybridIndex(tmp_path / "idx", embedder=embedder)
    plain.write(DOCS)
    assert plain.stats()["strip_vectors"] is None
    report = LocalHybridIndex(tmp_path / "idx", embedder=embedder, strip_vectors=True).write(DOCS)
    assert report.unchanged == 2
    assert plain.stats()["strip_vectors"] == 4
    assert set(_stored(plain)) == {content_key(s) for d in DOCS for s in sentence_strips(d.text)}


def test_strip_vectors_are_refused_for_an_embedder_whose_vectors_cannot_be_shared(tmp_path):
    index = LocalHybridIndex(tmp_path / "idx", embedder=HashEmbedder(), strip_vectors=True)
    with pytest.raises(ConfigError, match="strip vectors need the shipped ONNX embedder"):
        index.write(DOCS)
    assert not index.path.exists() or len(index) == 0


def test_a_paragraph_without_a_full_stop_ends_its_strip():
    text = "Billing questions for your account\n\nInvoices are issued on the first day.\nPast invoices are PDF files."
    assert sentence_strips(text) == ["Billing questions for your account", "Invoices are issued on the first day.",
                                     "Past invoices are PDF files."]
    assert sentence_strips("Title line without a stop\r\n\r\nThe body says things.") == [
        "Title line without a stop", "The body says things."]  # Windows line ends
    assert sentence_strips("Lines wrapped\nin the middle of a sentence stay one strip.") == [
        "Lines wrapped in the middle of a sentence stay one strip."]


def test_list_items_and_table_rows_are_strips_of_their_own():
    steps = ("To reset your password:\n1. Open the account page\n   and choose the security tab.\n"
             "2. Click Reset password now.\n* Use at least twelve characters\n- Never share it with anyone")
    assert sentence_strips(steps) == ["To reset your password:", "Open the account page and choose the security tab.",
                                      "Click Reset password now.", "Use at least twelve characters",
                                      "Never share it with anyone"]
    assert sentence_strips("| Plan | Price |\n| Team | $25 per month |\nProse after the table.") == [
        "| Plan | Price |", "| Team | $25 per month |", "Prose after the table."]  # Markdown rows
    assert sentence_strips("Zone | Days\nNorth | 3 days by post") == ["Zone | Days", "North | 3 days by post"]  # HTML


def test_a_wrapped_line_that_only_looks_like_a_list_item_stays_in_its_sentence():
    text = "The duchy was founded in\n1066. The Normans came from Normandy and\n- as is known - spoke French."
    assert sentence_strips(text) == ["The duchy was founded in 1066.",
                                     "The Normans came from Normandy and - as is known - spoke French."]


def test_a_fenced_code_block_is_one_strip_with_its_line_breaks():
    text = ("Split a path with parse.\n\n```js\npath.parse('/home/user/file.txt');\n\n"
            "// Returns: { ext: '.txt' }\n```\nAfter the code comes prose.\n\n```\nx\n```")
    assert sentence_strips(text) == [
        "Split a path with parse.",
        "```js\npath.parse('/home/user/file.txt');\n\n// Returns: { ext: '.txt' }\n```",  # a blank line inside too
        "After the code comes prose."]  # a block of fewer than three words is no strip, like a short sentence


def test_each_strip_knows_the_section_heading_it_sits_under():
    from pipeline.retrieval.strips import strips_with_sections

    text = ("# Vec\n\nA growable array type.\n\n#### pub fn dedup(&mut self)\nRemoves consecutive repeated elements."
            "\n\n```rust\nlet mut v = vec![1, 1];\nv.dedup();\n```\n\n## Other\n\nMore text goes here.")
    assert strips_with_sections(text) == [
        ("A growable array type.", None),  # a level-1 heading titles the document, not a section
        ("Removes consecutive repeated elements.", "pub fn dedup(&mut self)"),
        ("```rust\nlet mut v = vec![1, 1];\nv.dedup();\n```", "pub fn dedup(&mut self)"),
        ("More text goes here.", "Other")]
    assert [s for s, _ in strips_with_sections(text)] == sentence_strips(text)


def test_a_table_record_stores_no_strip_vectors_of_its_own(tmp_path, embedder):
    record = make_chunk("faq-1", "question: What is the refund window?\nanswer: 30 days. Ask support.",
                        metadata={"format": "csv"})
    written = LocalHybridIndex(tmp_path / "idx", embedder=embedder, strip_vectors=True)
    written.write([*DOCS, record])
    expected = {content_key(s) for d in DOCS for s in sentence_strips(d.text)}
    assert set(_stored(written)) == expected  # the record is refined whole, by its chunk vector
    plain = LocalHybridIndex(tmp_path / "later", embedder=embedder)
    plain.write([*DOCS, record])
    LocalHybridIndex(tmp_path / "later", embedder=embedder, strip_vectors=True).write([*DOCS, record])
    assert set(_stored(plain)) == expected  # filled in later: the same


def test_reembed_moves_an_index_of_another_embedder_onto_the_shipped_one_keeping_its_chunks(tmp_path, embedder):
    from models import DataError

    root = tmp_path / "idx"
    old = LocalHybridIndex(root, embedder=HashEmbedder(), strip_vectors=False)
    old.write(DOCS)
    old.close()
    LocalHybridIndex(root, embedder=HashEmbedder(), strip_vectors=False)._conn().execute(
        "INSERT OR REPLACE INTO meta VALUES ('strip_vectors', '1')")  # as an index of an earlier release with strips
    with pytest.raises(DataError, match=r"built with the embedder 'hash'.*crag index reembed --index"):
        LocalHybridIndex(root, embedder=embedder)
    index = LocalHybridIndex(root)
    report = index.reembed(embedder)
    assert report == {"index": str(root), "chunks": 2, "chunks_with_strip_vectors": 2, "embedder_before": "hash",
                      "embedder": embedder.name}
    moved = LocalHybridIndex(root, embedder=embedder)  # no longer refused
    assert moved.stats()["embedder"] == embedder.name and len(moved) == 2
    conn = moved._conn()
    stored = dict(conn.execute("SELECT c.text, v.vector FROM chunks c JOIN vectors v ON v.rowid = c.rowid"))
    for doc in DOCS:  # the shipped embedder's vectors, bit-identical (a fused grader may reuse them)
        assert np.array_equal(np.frombuffer(stored[doc.text], dtype=np.float32), embedder.embed([doc.text])[0])
    strips = _stored(moved)
    assert len(strips) == 4 and all(np.array_equal(strips[content_key(s)], embedder.embed([s])[0])
                                    for doc in DOCS for s in sentence_strips(doc.text))
    assert [c.chunk_id for c, _ in moved.search("capital of France", TENANT_A, k=1)] == ["a-paris"]
    embedder.cache.clear()
    moved.search("capital of France", TENANT_A, k=1)  # the index again shares its vectors with the grader
    assert embedder.cache.get(content_key(DOCS[0].text)) is not None
    with pytest.raises(DataError, match="is not an index"):
        LocalHybridIndex(tmp_path / "none").reembed(embedder)
    assert not (tmp_path / "none" / "index.sqlite").exists()


def test_reembed_refuses_an_embedder_of_another_dimension_and_changes_nothing(tmp_path, embedder):
    from models import DataError

    class Narrow(HashEmbedder):
        name = "narrow"

        def embed(self, texts):
            return super().embed(texts)[:, :128].copy()

    index = LocalHybridIndex(tmp_path / "idx", embedder=embedder)
    index.write(DOCS)
    before = index._conn().execute("SELECT vector FROM vectors ORDER BY rowid").fetchall()
    with pytest.raises(DataError, match=r"gives 128 dimensions, the index .* 384"):
        LocalHybridIndex(tmp_path / "idx").reembed(Narrow())
    again = LocalHybridIndex(tmp_path / "idx", embedder=embedder)
    assert again._conn().execute("SELECT vector FROM vectors ORDER BY rowid").fetchall() == before
    with pytest.raises(ConfigError, match="batch_size must be a positive int"):
        again.reembed(embedder, batch_size=0)
