"""A :class:`Retriever` on Qdrant: hybrid dense + sparse (BM25-weighted) search fused with RRF.

The same code runs against Qdrant's local mode (``location=":memory:"`` or ``path=...``, for tests and
single machines) and a Qdrant server or cluster (``url=...``) in production. Tenant and role filters
are Qdrant payload filters inside every query, so nothing outside the caller's scope is ever scored.
"""

from __future__ import annotations

import functools
import hashlib
import uuid
from collections import Counter
from collections.abc import Collection, Iterable
from typing import Any

from grader.resilience import check_http_url
from models.deps import require
from models.errors import ConfigError, DataError, StoreError
from pipeline.retrieval.documents import (
    ACCESS_DENIED_MIN_COVERAGE,
    FILTER_FIELDS,
    Principal,
    StoredChunk,
    check_hidden,
    check_page,
    check_search,
    chunks_to_write,
    reveals_access_denied,
)
from pipeline.retrieval.embedding import OTHER_EMBEDDER_FIX, Embedder, default_embedder, query_text
from pipeline.retrieval.index import WriteReport, query_tokens
from pipeline.retrieval.words import content_terms

__all__ = ["QdrantRetriever"]

DENSE, SPARSE = "dense", "bm25"
LEGACY_EMBEDDER = "all-MiniLM-L6-v2"  # what a collection that records no embedder was built with (earlier releases)
K1, B, AVG_TOKENS = 1.2, 0.75, 120.0


def _term_id(token: str) -> int:
    return int.from_bytes(hashlib.blake2b(token.encode("utf-8"), digest_size=4).digest(), "big")


def sparse_terms(text: str, *, query: bool = False) -> tuple[list[int], list[float]]:
    """Hashed term ids and BM25 term-frequency weights (Qdrant's IDF modifier supplies the IDF)."""
    counts = Counter(query_tokens(text))
    if not counts:
        return [], []
    length = sum(counts.values())
    weights: dict[int, float] = {}
    for token, tf in counts.items():
        weight = 1.0 if query else tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / AVG_TOKENS))
        term = _term_id(token)
        weights[term] = weights.get(term, 0.0) + weight
    return list(weights), list(weights.values())


class _ReportedClient:
    """The Qdrant client, whose failures (server down or refusing, an error response) are raised as StoreError
    naming the server and what to check, instead of the client's own exceptions."""

    def __init__(self, client: Any, where: str) -> None:
        self._client = client
        self._where = where
        self._failures: tuple[type[BaseException], ...] = (
            require("qdrant_client", "qdrant").http.exceptions.ApiException, OSError)

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._client, name)
        if not callable(attribute):
            return attribute

        @functools.wraps(attribute)
        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return attribute(*args, **kwargs)
            except self._failures as exc:
                raise StoreError(f"Qdrant at {self._where} failed ({name}: {type(exc).__name__}: {exc}); check that it "
                                 "runs and answers at that URL, and $QDRANT_API_KEY") from exc

        return call


class QdrantRetriever:
    """Qdrant-backed retriever; pass ``client`` or one of ``location`` / ``path`` / ``url``."""

    def __init__(self, collection: str = "crag", *, client: Any = None, location: str | None = None,
                 path: str | None = None, url: str | None = None, api_key: str | None = None,
                 embedder: Embedder | None = None, prefetch_factor: int = 4) -> None:
        if not isinstance(collection, str) or not collection.strip():
            raise ConfigError(f"collection must be a non-empty name such as 'crag', got {collection!r}")
        self._qm = require("qdrant_client", "qdrant").models
        if client is None:
            if sum(x is not None for x in (location, path, url)) != 1:
                raise ConfigError("QdrantRetriever needs exactly one of location=':memory:', path=DIR or url=URL")
            if url is not None:  # 'localhost:6333' fails every call, each retried, long after start-up
                check_http_url(url, "QdrantRetriever url", "http://localhost:6333")
            client = require("qdrant_client", "qdrant").QdrantClient(location=location, path=path, url=url,
                                                                      api_key=api_key)
        client = _ReportedClient(client, url or path or location or "the given client")
        if prefetch_factor < 1:
            raise ConfigError(f"prefetch_factor must be >= 1, got {prefetch_factor}")
        self.client = client
        self.collection = collection
        self.prefetch_factor = prefetch_factor
        self._embedder = embedder
        self._embedder_checked = False

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = default_embedder()
        return self._embedder

    def _built_with(self) -> str:
        """The embedder the existing collection records (one without the record was made by an earlier release)."""
        return str((self.client.get_collection(self.collection).config.metadata or {}).get("embedder",
                                                                                          LEGACY_EMBEDDER))

    def check_embedder(self) -> Embedder:
        """As :meth:`LocalHybridIndex.check_embedder`: the embedder, a collection whose vectors another one made
        refused (before any search or write, once per retriever)."""
        if self._embedder_checked or not self.client.collection_exists(self.collection):
            return self.embedder
        built_with = self._built_with()
        if built_with != self.embedder.name:
            raise DataError(f"Qdrant collection {self.collection!r} was built with the embedder {built_with!r}, not "
                            f"{self.embedder.name!r}: its vectors are not comparable; re-embed it with `crag index "
                            f"reembed --qdrant-url URL --collection {self.collection}` (its chunks are kept), "
                            f"{OTHER_EMBEDDER_FIX}")
        self._embedder_checked = True
        return self.embedder

    def reembed(self, *, batch_size: int = 256) -> dict[str, Any]:
        """Replace every point's dense vector with this retriever's embedder's and record it in the collection's
        metadata (as :meth:`LocalHybridIndex.reembed`). Qdrant has no transactions: searches meanwhile mix old and new
        vectors, and after a failure run it again (it re-embeds everything, records the embedder last)."""
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise ConfigError(f"batch_size must be a positive int, got {batch_size!r}")
        if not self.client.collection_exists(self.collection):
            raise DataError(f"Qdrant has no collection {self.collection!r}; create it with `crag index add`")
        before = self._built_with()
        models, offset, done = self._qm, None, 0
        while True:
            points, offset = self.client.scroll(self.collection, limit=batch_size, offset=offset,
                                                with_payload=["text"], with_vectors=False)
            if points:
                vectors = self.embedder.embed([str((p.payload or {}).get("text", "")) for p in points])
                self.client.update_vectors(self.collection, wait=True, points=[
                    models.PointVectors(id=p.id, vector={DENSE: v.tolist()}) for p, v in zip(points, vectors,
                                                                                             strict=True)])
                done += len(points)
            if offset is None:
                break
        self.client.update_collection(self.collection, metadata={"embedder": self.embedder.name})
        self._embedder_checked = True
        return {"collection": self.collection, "chunks": done, "embedder_before": before,
                "embedder": self.embedder.name}

    def _ensure_collection(self, size: int) -> None:
        client, models = self.client, self._qm
        if client.collection_exists(self.collection):
            self.check_embedder()
            return
        client.create_collection(
            self.collection, vectors_config={DENSE: models.VectorParams(size=size, distance=models.Distance.COSINE)},
            sparse_vectors_config={SPARSE: models.SparseVectorParams(modifier=models.Modifier.IDF)},
            metadata={"embedder": self.embedder.name})
        self._embedder_checked = True
        for key in ("tenant", "allowed_roles", "status", "metadata.path", "source"):
            client.create_payload_index(self.collection, key, models.PayloadSchemaType.KEYWORD)

    def add(self, chunks: Iterable[StoredChunk], *, batch_size: int = 256) -> int:
        """Upsert chunks (the same chunk_id replaces); returns how many were written."""
        report = self.write(chunks, batch_size=batch_size)
        return report.added + report.updated

    def write(self, chunks: Iterable[StoredChunk], *, replace_documents: bool = False,
              batch_size: int = 256) -> WriteReport:
        """Upsert the chunks that are new or changed (unchanged ones are neither embedded nor written); with
        ``replace_documents`` the other chunks of each written document (tenant + document path) are then
        deleted, so a re-indexed file that shrank or changed leaves nothing stale. Qdrant has no transactions:
        a failure between the two steps leaves the new chunks written and the stale ones still there."""
        new = chunks_to_write(chunks)
        stored = self._stored_payloads(new, batch_size)
        changed = [c for c in new if stored.get(self._point_id(c)) != c.to_dict()]
        updated = sum(1 for c in changed if self._point_id(c) in stored)
        self._upsert(changed, batch_size)
        removed = 0
        if replace_documents:
            keep: dict[tuple[str, str], list[str]] = {}
            for chunk in new:
                keep.setdefault((chunk.tenant, chunk.document), []).append(self._point_id(chunk))
            for (tenant, document), ids in keep.items():
                removed += self._delete(self._qm.Filter(must=[self._tenant_is(tenant), self._document_is(document)],
                                                        must_not=[self._qm.HasIdCondition(has_id=ids)]))
        return WriteReport(added=len(changed) - updated, updated=updated, unchanged=len(new) - len(changed),
                           removed=removed)

    @staticmethod
    def _point_id(chunk: StoredChunk) -> str:
        return str(uuid.uuid5(uuid.NAMESPACE_URL, chunk.chunk_id))

    def _stored_payloads(self, chunks: list[StoredChunk], batch_size: int) -> dict[str, Any]:
        """Point id -> stored payload, for the chunks that are already in the collection."""
        if not chunks or not self.client.collection_exists(self.collection):
            return {}
        found: dict[str, Any] = {}
        ids = [self._point_id(c) for c in chunks]
        for start in range(0, len(ids), batch_size):
            for point in self.client.retrieve(self.collection, ids=ids[start : start + batch_size], with_payload=True,
                                              with_vectors=False):
                found[str(point.id)] = point.payload
        return found

    def _upsert(self, items: list[StoredChunk], batch_size: int) -> None:
        models = self._qm
        for start in range(0, len(items), batch_size):
            batch = items[start : start + batch_size]
            vectors = self.embedder.embed([c.text for c in batch])
            self._ensure_collection(int(vectors.shape[1]))
            points = []
            for chunk, vector in zip(batch, vectors, strict=True):
                indices, values = sparse_terms(f"{chunk.title}\n{chunk.text}")
                points.append(models.PointStruct(
                    id=self._point_id(chunk), payload=chunk.to_dict(),
                    vector={DENSE: vector.tolist(), SPARSE: models.SparseVector(indices=indices, values=values)}))
            self.client.upsert(self.collection, points=points, wait=True)

    def _delete(self, selector: Any) -> int:
        """Delete the points ``selector`` (a filter) matches; returns how many there were."""
        if not self.client.collection_exists(self.collection):
            return 0
        count = self.client.count(self.collection, count_filter=selector, exact=True).count
        if count:
            self.client.delete(self.collection, points_selector=self._qm.FilterSelector(filter=selector), wait=True)
        return int(count)

    def _document_is(self, document: str) -> Any:
        """A document's chunks: its file path as indexed, or (chunks added without one) its source name."""
        models = self._qm
        path = models.FieldCondition(key="metadata.path", match=models.MatchValue(value=document))
        by_source = models.Filter(must=[models.IsEmptyCondition(is_empty=models.PayloadField(key="metadata.path")),
                                        models.FieldCondition(key="source", match=models.MatchValue(value=document))])
        return models.Filter(should=[path, by_source])

    def _tenant_is(self, tenant: str) -> Any:
        return self._qm.FieldCondition(key="tenant", match=self._qm.MatchValue(value=tenant))

    def remove_document(self, tenant: str, name: str, *, with_members: bool = False, keep: Collection[str] = ()) -> int:
        """As :meth:`LocalHybridIndex.remove_document`: one tenant's document by its exact name, with
        ``with_members`` also the documents ``<name>/...`` (an archive's members) not in ``keep``."""
        names = [] if name in keep else [name]
        if with_members:
            prefix = name + "/"
            names += sorted(d for d in self._document_chunks(tenant) if d.startswith(prefix) and d not in keep)
        return sum(self._delete(self._qm.Filter(must=[self._tenant_is(tenant), self._document_is(d)])) for d in names)

    def documents(self, tenant: str, *, after: str = "", limit: int = 1000) -> list[dict[str, Any]]:
        """As :meth:`LocalHybridIndex.documents`; reads every chunk of the tenant (Qdrant cannot group), so it
        costs a scan of the tenant's points."""
        check_page(tenant, limit)
        found = self._document_chunks(tenant)
        names = sorted(d for d in found if d > after)[:limit]
        return [{"document": d, "chunks": found[d][0], "roles": found[d][1], "format": found[d][2]} for d in names]

    def _document_chunks(self, tenant: str) -> dict[str, tuple[int, list[str], str]]:
        """Document -> (chunks, roles, format) of one tenant, from a scroll of its points' payloads."""
        if not self.client.collection_exists(self.collection):
            return {}
        out: dict[str, tuple[int, list[str], str]] = {}
        offset = None
        while True:
            points, offset = self.client.scroll(self.collection, scroll_filter=self._qm.Filter(
                must=[self._tenant_is(tenant)]), limit=1024, offset=offset, with_payload=["metadata", "source",
                                                                                          "allowed_roles"])
            for point in points:
                payload = point.payload or {}
                metadata = payload.get("metadata") or {}
                document = str(metadata.get("path") or payload.get("source", ""))
                chunks, roles, kind = out.get(document, (0, sorted(payload.get("allowed_roles") or ()),
                                                         str(metadata.get("format") or "")))
                out[document] = (chunks + 1, roles, kind)
            if offset is None:
                return out

    # ----- filters -------------------------------------------------------------------------------
    def _readable(self, principal: Principal) -> Any:
        models = self._qm
        roles: list[Any] = [models.IsEmptyCondition(is_empty=models.PayloadField(key="allowed_roles"))]
        if principal.roles:
            roles.append(models.FieldCondition(key="allowed_roles", match=models.MatchAny(any=sorted(principal.roles))))
        return models.Filter(should=roles)

    def _tenant(self, principal: Principal) -> Any:
        return self._qm.FieldCondition(key="tenant", match=self._qm.MatchValue(value=principal.tenant))

    def _filter(self, principal: Principal, filters: dict[str, Any] | None) -> Any:
        models = self._qm
        must: list[Any] = [self._tenant(principal), self._readable(principal)]
        for key, value in (filters or {}).items():
            if key == "document":  # path, or source for chunks without one: what the local index's column holds
                must.append(self._document_is(str(value)))
                continue
            field = key if key in FILTER_FIELDS else f"metadata.{key}"
            if isinstance(value, float):  # MatchValue takes text, integers and booleans; a number is a range
                must.append(models.FieldCondition(key=field, range=models.Range(gte=value, lte=value)))
            else:
                must.append(models.FieldCondition(key=field, match=models.MatchValue(value=value)))
        return models.Filter(must=must)

    # ----- Retriever -----------------------------------------------------------------------------
    def search(self, query: str, principal: Principal, *, k: int = 8,
               filters: dict[str, Any] | None = None) -> list[tuple[StoredChunk, float]]:
        check_search(query, principal, k, filters)
        if not self.client.collection_exists(self.collection):
            return []
        self.check_embedder()
        models = self._qm
        scope = self._filter(principal, filters)
        dense = self.embedder.embed([query_text(self.embedder, query)])[0].tolist()
        indices, values = sparse_terms(query, query=True)
        prefetch = [models.Prefetch(query=dense, using=DENSE, limit=k * self.prefetch_factor, filter=scope)]
        if indices:
            prefetch.append(models.Prefetch(query=models.SparseVector(indices=indices, values=values), using=SPARSE,
                                            limit=k * self.prefetch_factor, filter=scope))
        response = self.client.query_points(self.collection, prefetch=prefetch, limit=k, query_filter=scope,
                                            query=models.FusionQuery(fusion=models.Fusion.RRF), with_payload=True)
        return [(StoredChunk.from_dict(p.payload), float(p.score)) for p in response.points]

    def hidden_matches(self, query: str, principal: Principal, *,
                       min_coverage: float = ACCESS_DENIED_MIN_COVERAGE) -> int:
        """Strong lexical matches in the caller's own tenant that its roles may not read (a count only)."""
        check_hidden(query, principal, min_coverage)
        if not self.client.collection_exists(self.collection):
            return 0
        models = self._qm
        indices, values = sparse_terms(query, query=True)
        if not indices:
            return 0
        vector = models.SparseVector(indices=indices, values=values)
        hidden = models.Filter(must=[self._tenant(principal)], must_not=[self._readable(principal)])
        visible = models.Filter(must=[self._tenant(principal), self._readable(principal)])
        hidden_hits = self.client.query_points(self.collection, query=vector, using=SPARSE, limit=5,
                                               query_filter=hidden).points
        if not hidden_hits:
            return 0
        visible_hits = self.client.query_points(self.collection, query=vector, using=SPARSE, limit=1,
                                                query_filter=visible).points
        best_visible = visible_hits[0].score if visible_hits else 0.0
        best = hidden_hits[0].score
        terms = content_terms(query)
        return sum(1 for p in hidden_hits if p.score >= 0.5 * best and p.score > best_visible
                   and reveals_access_denied(terms, str((p.payload or {}).get("text", "")), min_coverage))
