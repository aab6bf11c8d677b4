"""Qdrant as a document store: re-indexing replaces a document's chunks, as the local index does."""

import pytest

from models.errors import ConfigError
from pipeline.retrieval.documents import Principal
from pipeline.retrieval.ingest import ingest
from tests.pipeline.conftest import HashEmbedder, make_chunk

pytest.importorskip("qdrant_client")


@pytest.fixture
def qdrant():
    from pipeline.retrieval.qdrant_store import QdrantRetriever

    return QdrantRetriever("docs", location=":memory:", embedder=HashEmbedder())


def _texts(store, tenant="t"):
    points, _ = store.client.scroll(store.collection, limit=1000, with_payload=True)
    return sorted(p.payload["text"] for p in points if p.payload["tenant"] == tenant)


def test_reindexing_replaces_changed_documents_and_leaves_nothing_stale(tmp_path, qdrant):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "notes.md").write_text("# Notes\n\nFirst paragraph.\n\nSecond paragraph.\n", encoding="utf-8")
    (docs / "faq.md").write_text("Support is open on weekdays.", encoding="utf-8")
    first = ingest(qdrant, [docs], tenant="t", roles=["ops"])
    ingest(qdrant, [docs], tenant="other")  # the same files in another tenant: never touched below
    again = ingest(qdrant, [docs], tenant="t", roles=["ops"])
    assert (first.chunks_added, again.chunks_added, again.chunks_updated, again.chunks_unchanged) == (2, 0, 0, 2)
    (docs / "notes.md").write_text("# Notes\n\nA rewritten paragraph.\n", encoding="utf-8")
    changed = ingest(qdrant, [docs], tenant="t", roles=["ops"])
    assert (changed.chunks_added, changed.chunks_removed) == (1, 1)
    assert _texts(qdrant) == ["# Notes\n\nA rewritten paragraph.", "Support is open on weekdays."]
    narrowed = ingest(qdrant, [docs], tenant="t", roles=["admin"])
    assert narrowed.chunks_updated == 2
    ops = Principal(tenant="t", roles=frozenset({"ops"}))
    assert [c.text for c, _ in qdrant.search("rewritten paragraph", ops)] == []
    assert len(_texts(qdrant, "other")) == 2


def test_documents_are_listed_and_removed_by_name_with_an_archives_members(qdrant):
    qdrant.add([make_chunk("a1", "Alpha.", metadata={"path": "site.zip/a.md", "format": "md"}),
                make_chunk("a2", "Beta.", metadata={"path": "site.zip/b/c.md", "format": "md"}),
                make_chunk("g", "Guide.", roles=("ops",), metadata={"path": "guide.md", "format": "md"}),
                make_chunk("manual", "Added by source only."),  # no path: named by its source, manual.md
                make_chunk("o", "Other tenant.", tenant="b", metadata={"path": "guide.md", "format": "md"})])
    assert qdrant.documents("a") == [
        {"document": "guide.md", "chunks": 1, "roles": ["ops"], "format": "md"},
        {"document": "manual.md", "chunks": 1, "roles": [], "format": ""},
        {"document": "site.zip/a.md", "chunks": 1, "roles": [], "format": "md"},
        {"document": "site.zip/b/c.md", "chunks": 1, "roles": [], "format": "md"}]
    assert [d["document"] for d in qdrant.documents("a", after="manual.md", limit=1)] == ["site.zip/a.md"]
    assert qdrant.remove_document("a", "site.zip", with_members=True, keep=["site.zip/a.md"]) == 1
    assert qdrant.remove_document("a", "manual.md") == 1 and qdrant.remove_document("a", "manual.md") == 0
    assert qdrant.remove_document("a", "guide.md") == 1
    assert _texts(qdrant, "a") == ["Alpha."] and _texts(qdrant, "b") == ["Other tenant."]


def test_a_qdrant_server_that_cannot_be_reached_is_a_clear_error(tmp_path):
    import socket

    from models.errors import StoreError
    from pipeline.retrieval.qdrant_store import QdrantRetriever

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}"
    store = QdrantRetriever("docs", url=url, embedder=HashEmbedder())
    principal = Principal(tenant="t")
    for attempt in (lambda: store.search("refund window", principal), lambda: store.add([make_chunk("a", "A.")]),
                    lambda: store.documents("t"), lambda: store.remove_document("t", "a.md")):
        with pytest.raises(StoreError, match=rf"Qdrant at {url} failed .*check that it runs"):
            attempt()


def test_a_url_without_a_scheme_or_an_empty_collection_is_refused_when_the_store_is_made():
    from pipeline.retrieval.qdrant_store import QdrantRetriever

    with pytest.raises(ConfigError, match=r"QdrantRetriever url must be an http:// or https:// URL .*'localhost:6333'"):
        QdrantRetriever("docs", url="localhost:6333")  # was accepted, and every call failed later
    with pytest.raises(ConfigError, match="collection must be a non-empty name"):
        QdrantRetriever("", location=":memory:")


def test_qdrant_refuses_bad_search_arguments_as_the_local_index_does(qdrant):
    who = Principal(tenant="t")
    with pytest.raises(ConfigError, match="filter 'format' must match a string or number, got \\['md'\\]"):
        qdrant.search("Paris", who, filters={"format": ["md"]})  # used to reach Qdrant's own model validation
    with pytest.raises(ConfigError, match="filters must be a dict"):
        qdrant.search("Paris", who, filters="format=md")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="k must be an int >= 1, got 0"):
        qdrant.search("Paris", who, k=0)
    with pytest.raises(ConfigError, match="filter 'position' holds an integer, got str"):
        qdrant.search("Paris", who, filters={"position": "3"})


def test_qdrant_matches_a_float_metadata_value_as_the_local_index_does(qdrant):
    qdrant.add([make_chunk("v15", "Release notes for Paris.", tenant="t", metadata={"version": 1.5}),
                make_chunk("v2", "Release notes for Paris, again.", tenant="t", metadata={"version": 2})])
    who = Principal(tenant="t")
    assert [c.chunk_id for c, _ in qdrant.search("Paris release notes", who, filters={"version": 1.5})] == ["v15"]
    assert [c.chunk_id for c, _ in qdrant.search("Paris release notes", who, filters={"version": 2})] == ["v2"]


def test_a_collection_of_another_embedder_is_refused_until_it_is_reembedded(qdrant):
    import numpy as np

    from models.errors import DataError
    from pipeline.retrieval.qdrant_store import DENSE, QdrantRetriever

    class Other(HashEmbedder):
        name = "other-model"

        def embed(self, texts):
            return -super().embed(texts)  # other vectors, same dimension

    qdrant.add([make_chunk("p", "Paris is the capital of France."), make_chunk("b", "Bananas are yellow.")])
    other = QdrantRetriever("docs", client=qdrant.client._client, embedder=Other())
    reader = Principal(tenant="a", roles=frozenset())
    for act in (lambda: other.search("capital of France", reader), lambda: other.add([make_chunk("x", "X.")])):
        with pytest.raises(DataError, match=r"built with the embedder 'hash', not 'other-model'.*crag index reembed"):
            act()
    assert other.reembed(batch_size=1) == {"collection": "docs", "chunks": 2, "embedder_before": "hash",
                                           "embedder": "other-model"}
    points, _ = other.client.scroll("docs", limit=10, with_payload=True, with_vectors=True)
    assert all(np.allclose(p.vector[DENSE], Other().embed([p.payload["text"]])[0], atol=1e-6) for p in points)
    assert [c.chunk_id for c, _ in other.search("capital of France", reader, k=1)] == ["p"]
    with pytest.raises(DataError, match="built with the embedder 'other-model', not 'hash'"):
        QdrantRetriever("docs", client=qdrant.client._client, embedder=HashEmbedder()).search("France", reader)
    with pytest.raises(DataError, match="has no collection 'nothing'"):
        QdrantRetriever("nothing", client=qdrant.client._client, embedder=Other()).reembed()


def test_a_collection_that_records_no_embedder_was_made_with_all_minilm_l6_v2():
    from qdrant_client import QdrantClient, models

    from models.errors import DataError
    from pipeline.retrieval.qdrant_store import DENSE, SPARSE, QdrantRetriever

    client = QdrantClient(location=":memory:")  # as earlier releases made it: no metadata
    client.create_collection("old", vectors_config={DENSE: models.VectorParams(size=384,
                                                                               distance=models.Distance.COSINE)},
                             sparse_vectors_config={SPARSE: models.SparseVectorParams(modifier=models.Modifier.IDF)})
    reader = Principal(tenant="a", roles=frozenset())
    with pytest.raises(DataError, match="built with the embedder 'all-MiniLM-L6-v2', not 'hash'"):
        QdrantRetriever("old", client=client, embedder=HashEmbedder()).search("France", reader)

    class Legacy(HashEmbedder):
        name = "all-MiniLM-L6-v2"

    assert QdrantRetriever("old", client=client, embedder=Legacy()).search("France", reader) == []
