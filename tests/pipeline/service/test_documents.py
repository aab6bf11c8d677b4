"""Writer keys manage their tenant's documents over HTTP: upload, replace, list, delete, and what readers then find."""

import io
import sys
import zipfile

import pytest
from fastapi.testclient import TestClient

from pipeline.retrieval.documents import StoredChunk
from pipeline.retrieval.index import LocalHybridIndex
from pipeline.retrieval.ingest import ingest
from pipeline.service.app import ServiceConfig, create_app
from pipeline.service.keys import KeyStore
from pipeline.service.schemas import Limits
from tests.pipeline.conftest import HashEmbedder

REFUNDS = (b"# Refunds\n\nCustomers may return any item within 45 days of delivery for a full refund. "
           b"Shipping costs are not refunded.\n")
QUESTION = {"query": "How many days do customers have to return an item?"}


@pytest.fixture
def tokens(tmp_path):
    store = KeyStore.open(tmp_path / "keys.json", create=True)
    return store, {"writer": store.create("acme", writer=True), "reader": store.create("acme"),
                   "legal": store.create("acme", roles=frozenset({"legal"})),
                   "other": store.create("globex", writer=True)}


@pytest.fixture(params=["local", "qdrant"])
def backend(request):
    return request.param


def _client(tmp_path, tokens, grader, *, backend="local", retriever=None, **limits):
    if retriever is None and backend == "qdrant":
        from pipeline.retrieval.qdrant_store import QdrantRetriever

        retriever = QdrantRetriever("t", location=":memory:", embedder=HashEmbedder())
    index = retriever if retriever is not None else LocalHybridIndex(tmp_path / "idx", embedder=HashEmbedder())
    app = create_app(ServiceConfig(keys=tokens[0], retriever=index, grader=grader, limits=Limits(**limits)))
    return TestClient(app), index


def _stored_chunks(index):
    """Every stored chunk, in either backend."""
    if isinstance(index, LocalHybridIndex):
        return list(index.iter_chunks())
    points, _ = index.client.scroll(index.collection, limit=10_000, with_payload=True)
    return [StoredChunk.from_dict(p.payload) for p in points]


def _stored(index):
    """(tenant, document path, text) of every stored chunk, in either backend."""
    return sorted((c.tenant, c.metadata["path"], c.text) for c in _stored_chunks(index))


def _auth(tokens, who):
    return {"Authorization": f"Bearer {tokens[1][who]}"}


def _zip(members):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in members.items():
            archive.writestr(name, text)
    return buffer.getvalue()


def test_an_uploaded_document_is_answered_from_for_its_tenant_only(tmp_path, tokens, grader, backend):
    client, index = _client(tmp_path, tokens, grader, backend=backend)
    with client:
        put = client.put("/v1/documents/policies/refunds.md", content=REFUNDS, headers=_auth(tokens, "writer"))
        assert put.status_code == 200
        assert put.json() | {"skipped": [], "unsupported_files": {}} == {
            "document": "policies/refunds.md", "documents": 1, "chunks_added": 1, "chunks_updated": 0,
            "chunks_unchanged": 0, "chunks_removed": 0, "skipped": [], "unsupported_files": {}}
        ours = client.post("/v1/query", json=QUESTION, headers=_auth(tokens, "reader")).json()
        theirs = client.post("/v1/query", json=QUESTION, headers=_auth(tokens, "other")).json()
    assert "45 days" in (ours["answer"] or "") and ours["sources"]
    assert theirs["outcome"] == "abstention" and not theirs["sources"]
    assert [tenant for tenant, _, _ in _stored(index)] == ["acme"]


def test_sources_name_the_uploaded_document_so_same_named_files_are_told_apart(tmp_path, tokens, grader, backend):
    client, index = _client(tmp_path, tokens, grader, backend=backend)
    draft = REFUNDS.replace(b"45 days", b"45 days (draft of 2019)")
    with client:
        for name, body in (("policies/refunds.md", REFUNDS), ("archive/refunds.md", draft)):
            assert client.put(f"/v1/documents/{name}", content=body, headers=_auth(tokens, "writer")).status_code == 200
        sources = client.post("/v1/query", json=QUESTION, headers=_auth(tokens, "reader")).json()["sources"]
    assert sources and {s["source"] for s in sources} == {"refunds.md"}
    assert {s["document"] for s in sources} <= {"policies/refunds.md", "archive/refunds.md"}
    by_id = {s["chunk_id"]: s["document"] for s in sources}
    stored = {c.chunk_id: c.metadata["path"] for c in _stored_chunks(index)}
    assert all(stored[cid] == document for cid, document in by_id.items())


def test_filters_scope_every_search_of_a_query(tmp_path, tokens, grader, backend):
    """A document or status filter holds in the broader search too (it used to be dropped there)."""
    client, _ = _client(tmp_path, tokens, grader, backend=backend)
    draft = REFUNDS.replace(b"45 days", b"30 days")
    with client:
        for name, body, status in (("policies/refunds.md", REFUNDS, "active"),
                                   ("archive/refunds.md", draft, "superseded")):
            put = client.put(f"/v1/documents/{name}?status={status}", content=body, headers=_auth(tokens, "writer"))
            assert put.status_code == 200
        answers = {}
        for filters in ({"document": "archive/refunds.md"}, {"document": "policies/refunds.md"},
                        {"status": "active"}, {"document": "nowhere.md"}):
            body = {**QUESTION, "filters": filters}
            answers[str(filters)] = client.post("/v1/query", json=body, headers=_auth(tokens, "reader")).json()
        typo = client.post("/v1/query", json={**QUESTION, "filters": {"position": "3"}},
                           headers=_auth(tokens, "reader"))
    assert typo.status_code == 400 and "filter 'position' holds an integer, got str '3'" in typo.json()["detail"]
    assert {s["document"] for s in answers[str({"document": "archive/refunds.md"})]["sources"]} == {
        "archive/refunds.md"}
    for scoped in ({"document": "policies/refunds.md"}, {"status": "active"}):
        assert {s["document"] for s in answers[str(scoped)]["sources"]} == {"policies/refunds.md"}
        assert "30 days" not in (answers[str(scoped)]["answer"] or "")
    nowhere = answers[str({"document": "nowhere.md"})]
    assert nowhere["outcome"] == "abstention" and not nowhere["sources"]
    assert nowhere["message"].startswith("No document you can read matches the filters document='nowhere.md'")
    searches = [t["detail"] for t in nowhere["trace"] if t["action"] == "retrieve"]
    assert len(searches) >= 2 and all(s["filters"] == {"document": "nowhere.md"} for s in searches)


def test_a_file_indexed_by_its_server_path_shows_no_path(tmp_path, tokens, grader):
    client, index = _client(tmp_path, tokens, grader)
    folder = tmp_path / "srv" / "hr"
    folder.mkdir(parents=True)
    (folder / "refunds.md").write_bytes(REFUNDS)
    ingest(index, [folder], tenant="acme")
    with client:
        sources = client.post("/v1/query", json=QUESTION, headers=_auth(tokens, "reader")).json()["sources"]
    assert sources and all(s["source"] == "refunds.md" and s["document"] is None for s in sources)
    assert str(tmp_path) not in str(sources)


def test_roles_of_an_upload_decide_who_reads_it(tmp_path, tokens, grader):
    client, _ = _client(tmp_path, tokens, grader)
    with client:
        put = client.put("/v1/documents/legal/refunds.md?roles=legal", content=REFUNDS,
                         headers=_auth(tokens, "writer"))
        listed = client.get("/v1/documents", headers=_auth(tokens, "writer")).json()
        reader = client.post("/v1/query", json=QUESTION, headers=_auth(tokens, "reader")).json()
        legal = client.post("/v1/query", json=QUESTION, headers=_auth(tokens, "legal")).json()
    assert put.status_code == 200 and listed["documents"][0]["roles"] == ["legal"]
    assert "45 days" not in str(reader["answer"]) and "45 days" in (legal["answer"] or "")


def test_the_same_name_again_replaces_the_document(tmp_path, tokens, grader, backend):
    client, index = _client(tmp_path, tokens, grader, backend=backend)
    long_text = b"\n\n".join(b"Paragraph %d says the warehouse in Lyon ships parcels on weekday %d." % (i, i)
                             for i in range(40))
    with client:
        first = client.put("/v1/documents/shipping.md", content=long_text, headers=_auth(tokens, "writer")).json()
        again = client.put("/v1/documents/shipping.md", content=long_text, headers=_auth(tokens, "writer")).json()
        shorter = client.put("/v1/documents/shipping.md", content=b"Parcels ship from Lyon within two days.",
                             headers=_auth(tokens, "writer")).json()
        listed = client.get("/v1/documents", headers=_auth(tokens, "writer")).json()
    assert first["chunks_added"] > 1 and again["chunks_unchanged"] == first["chunks_added"]
    assert again["chunks_added"] == again["chunks_updated"] == 0
    assert shorter["chunks_added"] + shorter["chunks_updated"] == 1
    assert shorter["chunks_removed"] == first["chunks_added"] - shorter["chunks_updated"]
    assert _stored(index) == [("acme", "shipping.md", "Parcels ship from Lyon within two days.")]
    assert listed == {"documents": [{"document": "shipping.md", "chunks": 1, "roles": [], "format": "md"}],
                      "next_after": None}


def test_an_archive_is_indexed_by_member_and_replaced_and_deleted_whole(tmp_path, tokens, grader, backend):
    client, index = _client(tmp_path, tokens, grader, backend=backend)
    writer = _auth(tokens, "writer")
    with client:
        client.put("/v1/documents/faq.md", content=b"Support is open Monday to Friday.", headers=writer)
        first = client.put("/v1/documents/export.zip", headers=writer, content=_zip({
            "a.md": "# A\n\nThe warehouse is in Lyon.", "b.txt": "Invoices are sent monthly.", "c.bin": "xx"})).json()
        second = client.put("/v1/documents/export.zip", headers=writer,
                            content=_zip({"a.md": "# A\n\nThe warehouse is in Lyon."})).json()
        names = [d["document"] for d in client.get("/v1/documents", headers=writer).json()["documents"]]
        removed = client.delete("/v1/documents/export.zip", headers=writer)
        gone = client.delete("/v1/documents/export.zip", headers=writer)
        member = client.delete("/v1/documents/faq.md/a.md", headers=writer)
    assert first["documents"] == 2 and first["unsupported_files"] == {".bin": 1}
    assert second["documents"] == 1 and second["chunks_unchanged"] == 1 and second["chunks_removed"] == 1
    assert names == ["export.zip/a.md", "faq.md"]
    assert removed.json() == {"document": "export.zip", "chunks_removed": 1}
    assert gone.status_code == 404 and "GET /v1/documents" in gone.json()["detail"]
    assert member.status_code == 404  # only an archive's name reaches the documents under it
    assert [path for _, path, _ in _stored(index)] == ["faq.md"]


class SearchOnly:
    """A retriever of a user's own that can search but not replace or delete documents by name."""

    def search(self, query, principal, *, k=8, filters=None):
        return []

    def hidden_matches(self, query, principal, **_):
        return 0


def test_only_writer_keys_of_a_document_store_may_change_documents(tmp_path, tokens, grader):
    client, index = _client(tmp_path, tokens, grader)
    with client:
        client.put("/v1/documents/faq.md", content=REFUNDS, headers=_auth(tokens, "writer"))
        anonymous = client.put("/v1/documents/faq.md", content=b"x")
        reader = [client.put("/v1/documents/faq.md", content=b"Nothing.", headers=_auth(tokens, "reader")),
                  client.get("/v1/documents", headers=_auth(tokens, "reader")),
                  client.delete("/v1/documents/faq.md", headers=_auth(tokens, "reader"))]
        other_tenant = client.delete("/v1/documents/faq.md", headers=_auth(tokens, "other"))
        other_list = client.get("/v1/documents", headers=_auth(tokens, "other")).json()
    assert anonymous.status_code == 401
    assert [r.status_code for r in reader] == [403, 403, 403]
    assert "crag keys create --writer --tenant acme" in reader[0].json()["detail"]
    assert other_tenant.status_code == 404 and other_list == {"documents": [], "next_after": None}
    assert "45 days" in next(index.iter_chunks()).text  # nothing above changed it
    client, _ = _client(tmp_path, tokens, grader, retriever=SearchOnly())
    with client:
        own = client.put("/v1/documents/faq.md", content=REFUNDS, headers=_auth(tokens, "writer"))
    assert own.status_code == 501 and "SearchOnly" in own.json()["detail"]


def test_bad_uploads_are_refused_by_name_and_keep_what_is_stored(tmp_path, tokens, grader):
    client, index = _client(tmp_path, tokens, grader)
    writer = _auth(tokens, "writer")
    with client:
        client.put("/v1/documents/manual.pdf.md", content=REFUNDS, headers=writer)
        refused = {
            "type": client.put("/v1/documents/setup.exe", content=b"MZ", headers=writer),
            "empty": client.put("/v1/documents/empty.md", content=b"", headers=writer),
            "blank": client.put("/v1/documents/blank.md", content=b" \n\n ", headers=writer),
            "pdf": client.put("/v1/documents/manual.pdf", content=b"%PDF-1.4 cut short", headers=writer),
            "zip": client.put("/v1/documents/export.zip", content=b"PK\x03\x04 not a zip", headers=writer),
            "member": client.put("/v1/documents/mixed.zip", headers=writer, content=_zip(
                {"ok.md": "Fine.", "broken.pdf": "%PDF-1.4 cut short"})),
            "role": client.put("/v1/documents/x.md?roles=no%20spaces", content=b"Hi.", headers=writer),
            "date": client.put("/v1/documents/x.md?effective_date=last%20week", content=b"Hi.", headers=writer),
            "no_such_day": client.put("/v1/documents/x.md?effective_date=2024-13-45", content=b"Hi.", headers=writer),
            "status": client.put("/v1/documents/x.md?status=draft", content=b"Hi.", headers=writer),
            "encoding": client.put("/v1/documents/x.txt?encoding=klingon", content=b"Hi.", headers=writer),
            "latin1": client.put("/v1/documents/x.txt", content="Café crème".encode("latin-1"), headers=writer)}
        skipped = client.put("/v1/documents/mixed.zip?skip_errors=true", headers=writer,
                             content=_zip({"ok.md": "Fine.", "broken.pdf": "%PDF-1.4 cut short"}))
        latin1 = client.put("/v1/documents/x.txt?encoding=latin-1", content="Café crème".encode("latin-1"),
                            headers=writer)
    assert {k: r.status_code for k, r in refused.items()} == dict.fromkeys(refused, 422)
    detail = {k: str(r.json()["detail"]) for k, r in refused.items()}
    assert ".exe" in detail["type"] and ".docx" in detail["type"]
    assert "empty" in detail["empty"] and "no text" in detail["blank"]
    assert detail["pdf"].startswith("manual.pdf: not a readable PDF") and "skip_errors" not in detail["pdf"]
    assert "export.zip" in detail["zip"] and "crag-upload" not in detail["zip"]  # the upload's name, not a temp path
    assert "mixed.zip/broken.pdf" in detail["member"] and "pass skip_errors=true" in detail["member"]
    assert "role name 'no spaces'" in detail["role"] and "effective_date" in detail["date"]
    assert "effective_date must be a calendar date YYYY-MM-DD (or empty), got '2024-13-45'" in detail["no_such_day"]
    assert "status" in detail["status"] and "klingon" in detail["encoding"] and "--encoding" in detail["latin1"]
    assert skipped.status_code == 200 and skipped.json()["skipped"][0]["path"] == "mixed.zip/broken.pdf"
    assert latin1.status_code == 200
    stored = sorted(c.metadata["path"] for c in index.iter_chunks())
    assert stored == ["manual.pdf.md", "mixed.zip/ok.md", "x.txt"]


def test_upload_limits_are_their_own(tmp_path, tokens, grader):
    client, index = _client(tmp_path, tokens, grader, max_body_bytes=2048, max_document_bytes=4096,
                            max_document_chunks=4)
    writer = _auth(tokens, "writer")
    paragraphs = b"\n\n".join(b"Paragraph %d: " % i + b"the warehouse ships parcels every day. " * 20
                              for i in range(6))
    with client:
        fits = client.put("/v1/documents/a.md", content=b"Parcels ship daily. " * 150, headers=writer)  # 3,000 bytes
        grade = client.post("/v1/grade", json={"query": "q", "chunks": ["x" * 2100]}, headers=writer)
        too_big = client.put("/v1/documents/b.md", content=b"x" * 5000, headers=writer)
        too_many = client.put("/v1/documents/c.md", content=paragraphs[:4000], headers=writer)
    assert fits.status_code == 200 and grade.status_code == 413
    assert too_big.status_code == 413 and "4096-byte limit" in too_big.json()["detail"]
    assert too_many.status_code == 422 and "more than 4 chunks" in too_many.json()["detail"]
    assert {c.metadata["path"] for c in index.iter_chunks()} == {"a.md"}  # 4 chunks, nothing of the refused


def test_listing_pages_in_name_order(tmp_path, tokens, grader, backend):
    client, _ = _client(tmp_path, tokens, grader, backend=backend)
    writer = _auth(tokens, "writer")
    with client:
        for name in ("c.md", "a.md", "b/b.md"):
            client.put(f"/v1/documents/{name}", content=f"Document {name} text.".encode(), headers=writer)
        first = client.get("/v1/documents?limit=2", headers=writer).json()
        second = client.get(f"/v1/documents?limit=2&after={first['next_after']}", headers=writer).json()
        bad = client.get("/v1/documents?limit=0", headers=writer)
    assert [d["document"] for d in first["documents"]] == ["a.md", "b/b.md"] and first["next_after"] == "b/b.md"
    assert [d["document"] for d in second["documents"]] == ["c.md"] and second["next_after"] is None
    assert bad.status_code == 422


def test_a_file_sent_as_a_form_is_refused_before_it_is_stored_garbled(tmp_path, tokens, grader):
    client, index = _client(tmp_path, tokens, grader)
    writer = _auth(tokens, "writer")
    with client:
        form = client.put("/v1/documents/refunds.md", files={"file": ("refunds.md", REFUNDS)}, headers=writer)
        stored = _stored(index)
        # what curl --data-binary @refunds.md sends: the file's bytes, labelled as a URL-encoded form
        curl = client.put("/v1/documents/refunds.md", content=REFUNDS,
                          headers={**writer, "Content-Type": "application/x-www-form-urlencoded"})
    assert form.status_code == 415 and stored == []
    assert "--data-binary" in form.json()["detail"] and "multipart/form-data" in form.json()["detail"]
    assert curl.status_code == 200 and [c.text for c in index.iter_chunks()] == [REFUNDS.decode().strip()]


def _outlook_message() -> bytes:
    from aspose.email_foss.msg import MapiMessage  # another implementation's MSG writer (dev)

    return MapiMessage.create("Refunds", REFUNDS.decode()).to_bytes()


@pytest.mark.parametrize(("name", "content", "module", "extra"), [
    ("contract.docx", lambda: _zip({"word/document.xml": "<w/>"}), "docx", "docx"),
    ("mail/refunds.msg", _outlook_message, "olefile", "msg"),
])
def test_a_type_the_server_cannot_read_is_415_naming_the_extra(tmp_path, tokens, grader, monkeypatch, name, content,
                                                               module, extra):
    client, index = _client(tmp_path, tokens, grader)
    with client:
        monkeypatch.setitem(sys.modules, module, None)  # as if the extra were not installed
        response = client.put(f"/v1/documents/{name}", content=content(), headers=_auth(tokens, "writer"))
        assert response.status_code == 415 and f"crag-grader[{extra}]" in response.json()["detail"]
        assert _stored(index) == []
        monkeypatch.undo()  # installed: the same upload is read
        response = client.put(f"/v1/documents/{name}", content=content(), headers=_auth(tokens, "writer"))
    assert response.status_code == (200 if extra == "msg" else 422)  # that .docx is no Word document, only a zip
    assert [c.text for c in index.iter_chunks()] == ([REFUNDS.decode().strip()] if extra == "msg" else [])


def test_metrics_name_the_route_never_the_document(tmp_path, tokens, grader):
    client, _ = _client(tmp_path, tokens, grader)
    with client:
        client.put("/v1/documents/secret-merger-plan.md", content=REFUNDS, headers=_auth(tokens, "writer"))
        client.delete("/v1/documents/secret-merger-plan.md", headers=_auth(tokens, "writer"))
        client.get("/v1/no-such-route-secret", headers=_auth(tokens, "writer"))
        text = client.get("/metrics").text
    assert "secret" not in text
    assert 'crag_requests_total{endpoint="/v1/documents/{name}",status="200"} 2.0' in text
    assert 'crag_document_chunks_total{action="put"} 1.0' in text
    assert 'crag_document_chunks_total{action="delete"} 1.0' in text
    assert 'endpoint="/v1/(unknown)",status="404"' in text


def test_a_qdrant_server_that_is_down_is_503_with_retry_after(tmp_path, tokens, grader):
    import socket

    from pipeline.retrieval.qdrant_store import QdrantRetriever

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}"
    client, _ = _client(tmp_path, tokens, grader, retriever=QdrantRetriever("t", url=url, embedder=HashEmbedder()))
    with client:
        answers = [client.put("/v1/documents/faq.md", content=REFUNDS, headers=_auth(tokens, "writer")),
                   client.get("/v1/documents", headers=_auth(tokens, "writer")),
                   client.post("/v1/query", json=QUESTION, headers=_auth(tokens, "reader"))]
    assert [a.status_code for a in answers] == [503, 503, 503]
    assert all(a.headers["retry-after"] and f"Qdrant at {url} failed" in a.json()["detail"] for a in answers)
