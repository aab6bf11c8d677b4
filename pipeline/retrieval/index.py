"""The embedded hybrid index: FTS5 (BM25) + dense MiniLM vectors, rank-fused, in one SQLite file.

Permissions are enforced inside the queries: every chunk belongs to an access *scope* (its tenant and
role set), and both the lexical and the dense pass read only the scopes the principal may read, so a
grader or LLM downstream never sees anything else and no other chunk is ever scored. The dense pass is
exact (cosine over the stored float vectors) when the readable, filtered set is small, and otherwise a
binary-code nearest-neighbour pass (sqlite-vec, Hamming) followed by an exact re-rank of its candidates.

``hidden_matches`` answers only "are there matching chunks in my tenant that I cannot see?" (a count, no
content), which lets the pipeline say "access denied" instead of "no answer" without leaking what the
documents say. Every query opens a fresh read transaction, so a running service sees additions,
permission changes and deletions made by other processes at once.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from grader.bounded_cache import content_key
from models.deps import require
from models.errors import ConfigError, DataError
from pipeline.retrieval import strip_store
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
from pipeline.retrieval.sqlite_db import DB_NAME, connect, create_vector_table, write_transaction
from pipeline.retrieval.words import content_terms

logger = logging.getLogger(__name__)

__all__ = ["LocalHybridIndex", "Retriever", "WriteReport", "query_tokens"]

RRF_K = 60
EXACT_SCAN_MAX = 4096
MIN_DEPTH = 50  # ranks fused from each side
CANDIDATES_PER_RANK = 4  # binary-code candidates per fused rank, re-ranked exactly
HIDDEN_DEPTH = 200
SELECT_CHUNK = ("SELECT rowid, chunk_id, tenant, source, title, position, allowed_roles, status, effective_date, "
                "authority, metadata, text FROM chunks")
SELECT_CHUNK_AND_VECTOR = ("SELECT c.rowid, c.chunk_id, c.tenant, c.source, c.title, c.position, c.allowed_roles, "
                           "c.status, c.effective_date, c.authority, c.metadata, c.text, v.vector FROM chunks c "
                           "LEFT JOIN vectors v ON v.rowid = c.rowid WHERE c.tenant = ? AND c.chunk_id = ?")


class Retriever(Protocol):
    """What the orchestrator needs from a store; plug in your own (Qdrant, Elasticsearch...)."""

    def search(self, query: str, principal: Principal, *, k: int = 8,
               filters: dict[str, Any] | None = None) -> list[tuple[StoredChunk, float]]: ...

    def hidden_matches(self, query: str, principal: Principal, *,
                       min_coverage: float = ACCESS_DENIED_MIN_COVERAGE) -> int: ...


@dataclass(frozen=True)
class WriteReport:
    """What one write did: new chunks, changed chunks (text, roles or metadata), untouched ones, and
    chunks of re-indexed documents that no longer exist."""

    added: int = 0
    updated: int = 0
    unchanged: int = 0
    removed: int = 0

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


def query_tokens(query: str) -> list[str]:
    """The lexical tokens of a text (lower-cased, English stop words removed)."""
    tokenized: list[list[str]] = require("bm25s", "rag").tokenize(
        [query], stopwords="en", show_progress=False, return_ids=False)
    return tokenized[0]


def _fts_query(query: str) -> str | None:
    """An FTS5 OR-query of the quoted tokens (quoting keeps user text from being read as FTS syntax)."""
    tokens = query_tokens(query)
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in tokens) if tokens else None


def scope_of(tenant: str, roles: Iterable[str]) -> str:
    """The access scope of a chunk: its tenant and its sorted role set (empty: every role of the tenant)."""
    return tenant + "\x1f" + ",".join(sorted(roles))


def _filter_sql(filters: dict[str, Any] | None) -> tuple[str, list[Any]]:
    """SQL conditions for exact-match metadata filters: known fields are columns, others metadata keys."""
    if not filters:
        return "", []
    clauses: list[str] = []
    params: list[Any] = []
    for key, value in filters.items():  # checked by check_search
        if key in FILTER_FIELDS:  # a column; the document's: its name as indexed (``StoredChunk.document``)
            clauses.append(f"c.{key} = ?")
        else:
            clauses.append("json_extract(c.metadata, ?) = ?")
            params.append('$."' + key.replace('"', '') + '"')
        params.append(int(value) if isinstance(value, bool) else value)
    return " AND " + " AND ".join(clauses), params


class LocalHybridIndex:
    """A hybrid index in ``root/index.sqlite``; safe for concurrent writer processes and live readers.

    ``strip_vectors=True`` also stores the vector of every sentence strip of a chunk (see
    :mod:`pipeline.retrieval.strip_store`), from the next write on, filling in the chunks already stored; an
    index that has them keeps them up to date whatever later writers pass."""

    def __init__(self, root: str | Path, embedder: Embedder | None = None, *, strip_vectors: bool = False) -> None:
        if not isinstance(root, (str, os.PathLike)):
            raise ConfigError(f"root must be the index folder's path, got {type(root).__name__}: {root!r:.80}")
        if embedder is not None and not (callable(getattr(embedder, "embed", None)) and hasattr(embedder, "name")):
            raise ConfigError(f"embedder must have a name and embed(texts) (the Embedder protocol), got "
                              f"{type(embedder).__name__}: {embedder!r:.80}")
        if not isinstance(strip_vectors, bool):
            raise ConfigError(f"strip_vectors must be True or False, got {strip_vectors!r}")
        self.root = Path(root)
        self.strip_vectors = strip_vectors
        self.path = self.root / DB_NAME
        self._embedder = embedder
        self._local = threading.local()
        self._said_missing = False
        if (self.root / "chunks.jsonl").is_file() and not self.path.is_file():
            raise DataError(f"index {self.root} is in the old file format (chunks.jsonl + vectors.npy); migrate it "
                            f"with `crag index migrate {self.root}` (the old files are kept)")
        if self.root.exists() and not self.root.is_dir():
            raise DataError(f"index {self.root} is a file, not a folder; pass the index folder")
        if self._embedder is not None and self.path.is_file():
            self._check_embedder(self._embedder)

    @classmethod
    def open_existing(cls, root: str | Path, embedder: Embedder | None = None) -> LocalHybridIndex:
        """An index that must already exist (for asking and serving): a clear error otherwise."""
        index = cls(root, embedder=embedder)
        if not index.path.is_file():
            raise DataError(f"{root} is not an index; build it with `crag index add --index {root} FILES` (or "
                            f"`crag index create --index {root}` for an empty one that writer keys fill over HTTP)")
        return index

    @classmethod
    def create_empty(cls, root: str | Path, embedder: Embedder | None = None, *,
                     strip_vectors: bool = False) -> LocalHybridIndex:
        """A new index without chunks, for a service that writer keys fill over HTTP; an existing one is an error
        (nothing in it is touched)."""
        index = cls(root, embedder=embedder, strip_vectors=strip_vectors)
        if index.path.is_file():
            raise DataError(f"{root} already holds an index ({len(index)} chunks); add to it with `crag index add`")
        index._check_strip_vectors()
        conn = index._conn(create=True)
        if strip_vectors:
            with write_transaction(conn):
                conn.execute("INSERT OR REPLACE INTO meta VALUES (?, '1')", (strip_store.META_KEY,))
        return index

    # connections -----------------------------------------------------------------------------------
    def _conn(self, *, create: bool = False) -> Any:
        """This thread's connection (None when the index does not exist yet and ``create`` is False)."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            if not create and not self.path.is_file():
                return None
            conn = connect(self.path, create=create)
            self._local.conn = conn
        return conn

    def _meta(self, conn: Any) -> dict[str, str]:
        return dict(conn.execute("SELECT key, value FROM meta").fetchall())

    def _check_embedder(self, embedder: Embedder) -> None:
        conn = self._conn()
        built_with = self._meta(conn).get("embedder") if conn is not None else None
        if built_with and built_with != embedder.name:
            raise DataError(f"index {self.root} was built with the embedder {built_with!r}, not {embedder.name!r}: "
                            f"its vectors are not comparable; re-embed it with `crag index reembed --index "
                            f"{self.root}` (its chunks are kept), {OTHER_EMBEDDER_FIX}")

    def reembed(self, embedder: Embedder | None = None, *, batch_size: int = 256) -> dict[str, Any]:
        """Replace every stored vector (chunks and sentence strips) with ``embedder``'s (default: the shipped one, or
        ``$CRAG_EMBEDDER``'s: :func:`~pipeline.retrieval.embedding.default_embedder`) and
        record it as the index's embedder: the way to move an index built with another embedder (such as the
        untrained all-MiniLM-L6-v2 of earlier releases) onto this one without re-reading its documents. One write
        transaction: readers see the old vectors until it commits, and a failure leaves the index as it was."""
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise ConfigError(f"batch_size must be a positive int, got {batch_size!r}")
        conn = self._conn()
        if conn is None:
            raise DataError(f"{self.root} is not an index; build it with `crag index add --index {self.root} FILES`")
        self._embedder = embedder or default_embedder()  # no check: moving off the recorded embedder is the point
        meta = self._meta(conn)
        before = meta.get("embedder")
        if before is None:  # nothing written yet: the first write records the embedder that writes it
            return {"index": str(self.root), "chunks": 0, "chunks_with_strip_vectors": 0, "embedder_before": None,
                    "embedder": self.embedder.name}
        dim = len(self._embed(["What dimension?"])[0])
        if meta.get("dim") not in (None, str(dim)):
            raise DataError(f"the embedder {self.embedder.name!r} gives {dim} dimensions, the index {self.root} "
                            f"{meta['dim']}: its binary codes cannot hold them; build a new index")
        with write_transaction(conn):  # rows read inside it: a concurrent writer's chunks are re-embedded too
            rows = conn.execute("SELECT rowid, scope, text FROM chunks ORDER BY rowid").fetchall()
            for start in range(0, len(rows), batch_size):
                part = rows[start:start + batch_size]
                for (rowid, scope, _), vector in zip(part, self._embed([text for _, _, text in part]), strict=True):
                    conn.execute("DELETE FROM vectors WHERE rowid = ?", (rowid,))
                    conn.execute("DELETE FROM vec WHERE rowid = ?", (rowid,))
                    _store_vector(conn, rowid, scope, vector)
            self._record_embedder(conn, dim)
            strips = 0
            if strip_store.enabled(self._meta(conn)):
                conn.execute("DELETE FROM strip_vectors")
                strips = strip_store.backfill(conn, self._embed)
        return {"index": str(self.root), "chunks": len(rows), "chunks_with_strip_vectors": strips,
                "embedder_before": before, "embedder": self.embedder.name}

    def check_embedder(self) -> Embedder:
        """The embedder, loaded now: an index whose vectors another embedder made is refused here, naming the fix
        (a service calls it at start-up rather than fail its every query)."""
        return self.embedder

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            embedder = default_embedder()
            self._check_embedder(embedder)
            self._embedder = embedder
        return self._embedder

    def close(self) -> None:
        """Close this thread's connection (others close when their threads end)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    # writes ----------------------------------------------------------------------------------------
    def add(self, chunks: Iterable[StoredChunk]) -> int:
        """Add or replace chunks (same tenant and chunk_id replaces); returns how many were written."""
        report = self.write(chunks)
        return report.added + report.updated

    def write(self, chunks: Iterable[StoredChunk], *, replace_documents: bool = False) -> WriteReport:
        """Write chunks in one transaction. Unchanged chunks are left alone (not re-embedded); with
        ``replace_documents`` the other chunks of each written document (tenant + document path) are removed,
        so a re-indexed file that shrank leaves nothing stale behind."""
        new = chunks_to_write(chunks)
        if not new:
            return WriteReport()
        self._check_strip_vectors()  # before any embedding: a refused write should cost nothing
        conn = self._conn(create=True)
        existing = self._existing(conn, new)
        changed = [c for c in new if existing.get((c.tenant, c.chunk_id), (None, None))[0] != c]
        vectors: dict[tuple[str, str], np.ndarray] = {}
        for chunk in changed:  # a chunk whose text is unchanged (only roles or metadata) keeps its vector
            old, vector = existing.get((chunk.tenant, chunk.chunk_id), (None, None))
            if old is not None and vector is not None and old.text == chunk.text:
                vectors[(chunk.tenant, chunk.chunk_id)] = vector
        to_embed = [c for c in changed if (c.tenant, c.chunk_id) not in vectors]
        if to_embed:
            vectors.update(zip(((c.tenant, c.chunk_id) for c in to_embed), self._embed([c.text for c in to_embed]),
                               strict=True))
        with_strips = self.strip_vectors or strip_store.enabled(self._meta(conn))
        strip_vectors = strip_store.embed_strips((c.text for c in to_embed if not c.is_record), {}, self._embed) \
            if with_strips else {}  # a record is refined whole: its chunk vector is its only strip vector
        updated = 0
        removed = 0
        embedded = {(c.tenant, c.chunk_id) for c in to_embed}
        with write_transaction(conn):
            self._claim_embedder(conn, vectors)
            for chunk in changed:
                key = (chunk.tenant, chunk.chunk_id)
                with_own_strips = with_strips and not chunk.is_record
                if with_own_strips and key not in embedded:  # same text: its strips keep their vectors
                    strip_vectors.update(strip_store.existing_strip_vectors(conn, *key))
                updated += self._delete_where(conn, "tenant = ? AND chunk_id = ?", key)
                rowid = self._insert(conn, chunk, vectors[key])
                if with_own_strips:  # (embeds only what neither this write nor the old row had)
                    strip_store.store(conn, rowid, chunk.text,
                                      strip_store.embed_strips([chunk.text], strip_vectors, self._embed))
            if replace_documents:
                keep: dict[tuple[str, str], set[str]] = {}
                for chunk in new:
                    keep.setdefault((chunk.tenant, chunk.document), set()).add(chunk.chunk_id)
                for (tenant, document), ids in keep.items():
                    stale = [cid for (cid,) in conn.execute(
                        "SELECT chunk_id FROM chunks WHERE tenant = ? AND document = ?", (tenant, document))
                        if cid not in ids]
                    for cid in stale:
                        removed += self._delete_where(conn, "tenant = ? AND chunk_id = ?", (tenant, cid))
            if with_strips and not strip_store.enabled(self._meta(conn)):
                strip_store.backfill(conn, self._embed)  # chunks written before strip vectors were asked for
                conn.execute("INSERT OR REPLACE INTO meta VALUES (?, '1')", (strip_store.META_KEY,))
        return WriteReport(added=len(changed) - updated, updated=updated, unchanged=len(new) - len(changed),
                           removed=removed)

    def _check_strip_vectors(self) -> None:
        if self.strip_vectors and not getattr(self.embedder, "vector_identity", None):
            raise ConfigError(f"strip vectors need the shipped ONNX embedder, whose vectors a fused grader can reuse "
                              f"as they are; {self.embedder.name!r} does not promise that: index without them")

    def _embed(self, texts: Sequence[str]) -> list[np.ndarray]:
        vectors = np.asarray(self.embedder.embed(list(texts)), dtype=np.float32)
        if vectors.ndim != 2 or len(vectors) != len(texts) or not np.isfinite(vectors).all():
            raise DataError(f"the embedder {self.embedder.name!r} returned {vectors.shape} for {len(texts)} texts "
                            "(or non-finite values); expected one finite vector per text")
        return list(vectors)

    def _existing(self, conn: Any, chunks: Sequence[StoredChunk]) -> dict[tuple[str, str], tuple[Any, Any]]:
        """Stored (chunk, vector) for the chunks' keys that exist."""
        out: dict[tuple[str, str], tuple[Any, Any]] = {}
        for chunk in chunks:
            row = conn.execute(SELECT_CHUNK_AND_VECTOR, (chunk.tenant, chunk.chunk_id)).fetchone()
            if row is not None:
                out[(chunk.tenant, chunk.chunk_id)] = (
                    _chunk_from_row(row[:-1]), None if row[-1] is None else np.frombuffer(row[-1], dtype=np.float32))
        return out

    def _claim_embedder(self, conn: Any, vectors: dict[Any, np.ndarray]) -> None:
        """Record the embedder and dimension on the first write; refuse a different one later."""
        meta = self._meta(conn)
        if not vectors:
            return
        dim = len(next(iter(vectors.values())))
        if "embedder" not in meta:
            self._record_embedder(conn, dim)
            create_vector_table(conn, dim)
            return
        if meta.get("embedder_vectors") and meta["embedder_vectors"] != getattr(self.embedder, "vector_identity", None):
            # vectors from another build of the same embedder: still comparable, no longer bit-identical
            conn.execute("DELETE FROM meta WHERE key = 'embedder_vectors'")
        if meta["embedder"] != self.embedder.name or meta.get("dim") != str(dim):
            raise DataError(f"index {self.root} was built with the embedder {meta['embedder']!r} ({meta.get('dim')} "
                            f"dimensions), not {self.embedder.name!r} ({dim}); re-embed it with `crag index reembed "
                            f"--index {self.root}`, {OTHER_EMBEDDER_FIX}")

    def _record_embedder(self, conn: Any, dim: int) -> None:
        """Record this index's embedder and dimension, and whether its vectors are the embedder's bit for bit."""
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('embedder', ?), ('dim', ?)", (self.embedder.name, str(dim)))
        conn.execute("DELETE FROM meta WHERE key = 'embedder_vectors'")
        identity = getattr(self.embedder, "vector_identity", None)
        if identity:
            conn.execute("INSERT INTO meta VALUES ('embedder_vectors', ?)", (identity,))

    def _insert(self, conn: Any, chunk: StoredChunk, vector: np.ndarray) -> int:
        scope = scope_of(chunk.tenant, chunk.allowed_roles)
        conn.execute("INSERT OR IGNORE INTO scopes (scope, tenant, roles) VALUES (?, ?, ?)",
                     (scope, chunk.tenant, json.dumps(sorted(chunk.allowed_roles))))
        conn.execute(
            "INSERT INTO chunks (chunk_id, tenant, scope, document, source, title, position, allowed_roles, status, "
            "effective_date, authority, metadata, text) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (chunk.chunk_id, chunk.tenant, scope, chunk.document, chunk.source, chunk.title, chunk.position,
             json.dumps(sorted(chunk.allowed_roles)), chunk.status, chunk.effective_date, chunk.authority,
             json.dumps(chunk.metadata, ensure_ascii=False, sort_keys=True), chunk.text))
        rowid = conn.last_insert_rowid()
        _store_vector(conn, rowid, scope, vector)
        return int(rowid)

    @staticmethod
    def _delete_where(conn: Any, condition: str, params: Sequence[Any]) -> int:
        conn.execute(f"DELETE FROM chunks WHERE {condition}", tuple(params))
        return int(conn.changes())

    def remove(self, *, tenant: str | None = None, document: str | None = None,
               chunk_id: str | None = None) -> int:
        """Delete chunks by tenant, by document (its path or source name) and/or by chunk id, all given
        conditions together; returns how many were deleted. At least one condition is required."""
        conditions, params = [], []
        if tenant:
            conditions.append("tenant = ?")
            params.append(tenant)
        if document:  # as indexed (an absolute path), relative to here, or the bare file name
            conditions.append("(document IN (?, ?) OR source = ?)")
            params += [document, str(Path(document).resolve()), document]
        if chunk_id:
            conditions.append("chunk_id = ?")
            params.append(chunk_id)
        if not conditions:
            raise ConfigError("remove needs a tenant, a document or a chunk id (refusing to empty the whole index)")
        conn = self._conn()
        if conn is None:
            return 0
        with write_transaction(conn):
            return self._delete_where(conn, " AND ".join(conditions), params)

    def remove_document(self, tenant: str, name: str, *, with_members: bool = False, keep: Collection[str] = ()) -> int:
        """Delete one tenant's document by its exact name as indexed; with ``with_members`` also the documents
        named ``<name>/...`` (an archive's members), except those named in ``keep``. Returns the chunks deleted."""
        conn = self._conn()
        if conn is None:
            return 0
        with write_transaction(conn):
            removed = self._delete_where(conn, "tenant = ? AND document = ?", (tenant, name)) \
                if name not in keep else 0
            if with_members:
                prefix = name + "/"
                members = {d for (d,) in conn.execute(
                    "SELECT DISTINCT document FROM chunks WHERE tenant = ? AND substr(document, 1, ?) = ?",
                    (tenant, len(prefix), prefix))}
                for member in sorted(members - set(keep)):
                    removed += self._delete_where(conn, "tenant = ? AND document = ?", (tenant, member))
            return removed

    # reads -----------------------------------------------------------------------------------------
    def documents(self, tenant: str, *, after: str = "", limit: int = 1000) -> list[dict[str, Any]]:
        """One tenant's documents in name order, those named after ``after`` (for paging), at most ``limit``: each
        with its chunk count, the roles that may read it and its format."""
        check_page(tenant, limit)
        conn = self._conn()
        if conn is None:
            return []
        rows = conn.execute("SELECT document, count(*), min(allowed_roles), min(json_extract(metadata, '$.format')) "
                            "FROM chunks WHERE tenant = ? AND document > ? GROUP BY document ORDER BY document "
                            "LIMIT ?", (tenant, after, limit)).fetchall()
        return [{"document": name, "chunks": chunks, "roles": json.loads(roles), "format": kind or ""}
                for name, chunks, roles, kind in rows]

    def stats(self) -> dict[str, Any]:
        """Counts per tenant, documents, scopes, the embedder and the file size."""
        conn = self._conn()
        if conn is None:
            return {"index": str(self.root), "exists": False, "chunks": 0}
        meta = self._meta(conn)
        tenants = dict(conn.execute("SELECT tenant, count(*) FROM chunks GROUP BY tenant").fetchall())
        documents = conn.execute("SELECT count(*) FROM (SELECT DISTINCT tenant, document FROM chunks)").fetchone()[0]
        size = sum(p.stat().st_size for p in self.root.glob(DB_NAME + "*") if p.is_file())
        strips = conn.execute("SELECT count(*) FROM strip_vectors").fetchone()[0] \
            if strip_store.enabled(meta) else None
        return {"index": str(self.root), "exists": True, "format": int(meta["format"]),
                "embedder": meta.get("embedder"), "dim": int(meta["dim"]) if "dim" in meta else None,
                "chunks": sum(tenants.values()), "documents": documents, "tenants": tenants,
                "strip_vectors": strips, "bytes": size}

    def iter_chunks(self, tenant: str | None = None) -> Iterator[StoredChunk]:
        """Every stored chunk (of one tenant), in insertion order; for export and inspection, not retrieval."""
        conn = self._conn()
        if conn is None:
            return
        sql, params = (SELECT_CHUNK + " WHERE tenant = ? ORDER BY rowid", (tenant,)) if tenant else \
            (SELECT_CHUNK + " ORDER BY rowid", ())
        for row in conn.execute(sql, params).fetchall():
            yield _chunk_from_row(row)

    def tenants(self) -> dict[str, int]:
        """Chunks per tenant, from the access scopes' counts (no scan of the chunks)."""
        conn = self._conn()
        if conn is None:
            return {}
        rows = conn.execute("SELECT tenant, sum(chunks) FROM scopes GROUP BY tenant HAVING sum(chunks) > 0")
        return {tenant: int(n) for tenant, n in rows.fetchall()}

    def __len__(self) -> int:
        conn = self._conn()
        return 0 if conn is None else int(conn.execute("SELECT count(*) FROM chunks").fetchone()[0])

    def _readable_scopes(self, conn: Any, principal: Principal) -> dict[str, int]:
        """The scopes the principal may read, with their chunk counts."""
        rows = conn.execute("SELECT scope, roles, chunks FROM scopes WHERE tenant = ? AND chunks > 0",
                            (principal.tenant,))
        return {scope: n for scope, roles, n in rows
                if not json.loads(roles) or set(json.loads(roles)) & principal.roles}

    def search(self, query: str, principal: Principal, *, k: int = 8,
               filters: dict[str, Any] | None = None) -> list[tuple[StoredChunk, float]]:
        """Top-k readable chunks; ``filters`` match fields or metadata exactly (e.g. {"status": "active"})."""
        check_search(query, principal, k, filters)
        where, params = _filter_sql(filters)
        conn = self._conn()
        if conn is None:
            if not self._said_missing:  # a mistyped path would otherwise abstain on every question, unexplained
                self._said_missing = True
                logger.warning("index %s has no documents yet (no %s there): every search finds nothing; build it "
                               "with `crag index add --index %s FILES`", self.root, DB_NAME, self.root)
            return []
        conn.execute("BEGIN")  # one snapshot for the whole query
        try:
            scopes = self._readable_scopes(conn, principal)
            if not scopes:
                return []
            in_scopes = f"c.scope IN ({','.join('?' * len(scopes))})"
            depth = max(MIN_DEPTH, 6 * k)
            lexical = self._lexical(conn, query, in_scopes + where, [*scopes, *params], depth)
            dense = self._dense(conn, query, scopes, in_scopes + where, [*scopes, *params], depth)
            fused: dict[int, float] = {}
            for rank, rowid in enumerate(dense):
                fused[rowid] = 1.0 / (RRF_K + rank)
            for rank, rowid in enumerate(lexical):
                fused[rowid] = fused.get(rowid, 1.0 / (RRF_K + len(dense))) + 1.0 / (RRF_K + rank)
            top = sorted(fused, key=lambda r: (-fused[r], r))[:k]
            rows = {row[0]: row for row in conn.execute(
                SELECT_CHUNK + f" WHERE rowid IN ({','.join('?' * len(top))})", top)} if top else {}
            self._share_vectors(conn, {r: rows[r][-1] for r in top})
            return [(_chunk_from_row(rows[r]), fused[r]) for r in top]
        finally:
            conn.execute("COMMIT")

    def _share_vectors(self, conn: Any, texts: dict[int, str]) -> None:
        """Put the hits' stored vectors into the embedder's cache, when they are exactly what it would compute
        (same model file, one text per call): a fused grader's cosine then embeds no retrieved chunk again."""
        cache = getattr(self.embedder, "cache", None)
        identity = getattr(self.embedder, "vector_identity", None)
        meta = self._meta(conn)
        if not texts or cache is None or not identity or meta.get("embedder_vectors") != identity:
            return
        stored = conn.execute(f"SELECT rowid, vector FROM vectors WHERE rowid IN ({','.join('?' * len(texts))})",
                              list(texts)).fetchall()
        cache.put_many((content_key(texts[r]), np.frombuffer(v, dtype=np.float32)) for r, v in stored)
        if strip_store.enabled(meta):  # and their sentences', which refinement grades next
            strip_store.share(conn, list(texts), cache)

    def _lexical(self, conn: Any, query: str, where: str, params: list[Any], limit: int) -> list[int]:
        """Row ids of the best BM25 matches among the allowed, filtered chunks."""
        match = _fts_query(query)
        if match is None:
            return []
        return [r for (r,) in conn.execute(
            f"SELECT c.rowid FROM fts JOIN chunks c ON c.rowid = fts.rowid WHERE fts MATCH ? AND {where} "
            "ORDER BY bm25(fts), c.rowid LIMIT ?", (match, *params, limit))]

    def _dense(self, conn: Any, query: str, scopes: dict[str, int], where: str, params: list[Any],
               depth: int) -> list[int]:
        """Row ids by cosine: exact over a small readable set; otherwise the binary codes' nearest neighbours
        (Hamming, inside the readable scopes only) re-ranked exactly, with an exact scan of the filtered set
        when a selective filter leaves too few of them."""
        q = self._embed([query_text(self.embedder, query)])[0]
        select = "SELECT c.rowid, v.vector FROM chunks c JOIN vectors v ON v.rowid = c.rowid WHERE "
        rows: list[Any] = []
        if sum(scopes.values()) > EXACT_SCAN_MAX:
            candidates = [r for (r,) in conn.execute(
                f"SELECT rowid FROM vec WHERE embedding MATCH vec_bit(?) AND k = ? AND scope IN "
                f"({','.join('?' * len(scopes))})",
                (np.packbits(q > 0).tobytes(), CANDIDATES_PER_RANK * depth, *scopes))]
            if candidates:
                rows = conn.execute(select + f"c.rowid IN ({','.join('?' * len(candidates))}) AND {where}",
                                    [*candidates, *params]).fetchall()
        if len(rows) < depth:
            rows = conn.execute(select + where, params).fetchall()
        if not rows:
            return []
        ids = np.array([r[0] for r in rows])
        matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), -1)
        scores = matrix @ q
        order = np.lexsort((ids, -scores))[:depth]
        return [int(i) for i in ids[order]]

    def hidden_matches(self, query: str, principal: Principal, *,
                       min_coverage: float = ACCESS_DENIED_MIN_COVERAGE) -> int:
        """How many chunks in the caller's tenant its roles may not read match the whole question better than
        anything it can read (a count, no content); see :func:`reveals_access_denied`."""
        check_hidden(query, principal, min_coverage)
        match = _fts_query(query)
        conn = self._conn()
        if match is None or conn is None:
            return 0
        terms = content_terms(query)
        readable = set(self._readable_scopes(conn, principal))
        # only the caller's own tenant is read: another tenant's documents must not even be hinted at
        rows = conn.execute("SELECT c.scope, -bm25(fts), c.text FROM fts JOIN chunks c ON c.rowid = fts.rowid "
                            "WHERE fts MATCH ? AND c.tenant = ? ORDER BY bm25(fts) LIMIT ?",
                            (match, principal.tenant, HIDDEN_DEPTH)).fetchall()
        if not rows or rows[0][1] <= 0:
            return 0
        best = rows[0][1]
        visible_best = max((s for scope, s, _ in rows if scope in readable), default=0.0)
        return sum(1 for scope, s, text in rows if scope not in readable and s >= 0.5 * best and s > visible_best
                   and reveals_access_denied(terms, text, min_coverage))


def _store_vector(conn: Any, rowid: int, scope: str, vector: np.ndarray) -> None:
    """A chunk's float vector (exact re-ranking) and its binary code (the nearest-neighbour pass, by scope)."""
    conn.execute("INSERT INTO vectors (rowid, vector) VALUES (?, ?)", (rowid, vector.astype(np.float32).tobytes()))
    conn.execute("INSERT INTO vec (rowid, scope, embedding) VALUES (?, ?, vec_bit(?))",
                 (rowid, scope, np.packbits(vector > 0).tobytes()))


def _chunk_from_row(row: Sequence[Any]) -> StoredChunk:
    (_, chunk_id, tenant, source, title, position, roles, status, effective_date, authority, metadata, text) = row
    return StoredChunk(chunk_id=chunk_id, text=text, tenant=tenant, source=source, title=title, position=position,
                       allowed_roles=frozenset(json.loads(roles)), status=status, effective_date=effective_date,
                       authority=authority, metadata=json.loads(metadata))
