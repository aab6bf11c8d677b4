"""The local index's storage: one SQLite file (WAL) with FTS5 for words and sqlite-vec for vectors.

Why SQLite: a single file that needs no server, ACID transactions (a writer killed mid-write leaves the
last committed state), many readers alongside one writer at a time (WAL), and writers from any number
of processes queued by a busy timeout instead of losing updates. ``bench/bench_index_backends.py``
compares it with LanceDB on the same data; the README gives the figures.

Tables: ``chunks`` (one row per chunk, the source of truth), ``fts`` (FTS5, external content, kept in
step by triggers), ``vectors`` (float32 embeddings for exact re-ranking), ``strip_vectors`` (optional: the
float32 embedding of each sentence strip of a chunk, by the strip's content key, for a fused grader's
refinement), ``vec`` (sqlite-vec binary codes partitioned by access scope, for the coarse nearest-neighbour
pass), ``scopes`` (tenant + role set
of every scope, with its chunk count) and ``meta`` (format, embedder, dimension).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from models.deps import require
from models.errors import DataError

__all__ = ["DB_NAME", "FORMAT", "connect", "create_vector_table", "write_transaction"]

DB_NAME = "index.sqlite"
FORMAT = 2
BUSY_TIMEOUT_MS = 120_000

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS chunks (
    rowid INTEGER PRIMARY KEY,
    chunk_id TEXT NOT NULL,
    tenant TEXT NOT NULL,
    scope TEXT NOT NULL,
    document TEXT NOT NULL,
    source TEXT NOT NULL,
    title TEXT NOT NULL,
    position INTEGER NOT NULL,
    allowed_roles TEXT NOT NULL,
    status TEXT NOT NULL,
    effective_date TEXT NOT NULL,
    authority INTEGER NOT NULL,
    metadata TEXT NOT NULL,
    text TEXT NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS chunks_tenant_id ON chunks (tenant, chunk_id);
CREATE INDEX IF NOT EXISTS chunks_scope ON chunks (scope);
CREATE INDEX IF NOT EXISTS chunks_document ON chunks (document);
CREATE INDEX IF NOT EXISTS chunks_source ON chunks (source);
CREATE TABLE IF NOT EXISTS vectors (rowid INTEGER PRIMARY KEY, vector BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS strip_vectors (
    chunk INTEGER NOT NULL, key BLOB NOT NULL, vector BLOB NOT NULL, PRIMARY KEY (chunk, key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS scopes (
    scope TEXT PRIMARY KEY, tenant TEXT NOT NULL, roles TEXT NOT NULL, chunks INTEGER NOT NULL DEFAULT 0
);
CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5(
    title, text, content='chunks', content_rowid='rowid', tokenize='porter unicode61'
);
CREATE TRIGGER IF NOT EXISTS chunks_after_insert AFTER INSERT ON chunks BEGIN
    INSERT INTO fts (rowid, title, text) VALUES (new.rowid, new.title, new.text);
    UPDATE scopes SET chunks = chunks + 1 WHERE scope = new.scope;
END;
CREATE TRIGGER IF NOT EXISTS chunks_after_delete AFTER DELETE ON chunks BEGIN
    INSERT INTO fts (fts, rowid, title, text) VALUES ('delete', old.rowid, old.title, old.text);
    DELETE FROM vectors WHERE rowid = old.rowid;
    UPDATE scopes SET chunks = chunks - 1 WHERE scope = old.scope;
END;
CREATE TRIGGER IF NOT EXISTS chunks_after_delete_strips AFTER DELETE ON chunks BEGIN
    DELETE FROM strip_vectors WHERE chunk = old.rowid;
END;
"""


def connect(path: Path, *, create: bool) -> Any:
    """An apsw connection with sqlite-vec loaded, WAL on and the schema in place (created when ``create``)."""
    apsw = require("apsw", "rag")
    sqlite_vec = require("sqlite_vec", "rag")
    if create:
        path.parent.mkdir(parents=True, exist_ok=True)
    flags = apsw.SQLITE_OPEN_READWRITE | (apsw.SQLITE_OPEN_CREATE if create else 0)
    try:
        conn = apsw.Connection(str(path), flags=flags)
        conn.set_busy_timeout(BUSY_TIMEOUT_MS)
        conn.enable_load_extension(True)
        conn.load_extension(sqlite_vec.loadable_path())
        conn.enable_load_extension(False)
        if create:
            conn.execute("PRAGMA journal_mode = WAL")
            with write_transaction(conn):
                conn.execute(SCHEMA)
                conn.execute("INSERT OR IGNORE INTO meta VALUES ('format', ?)", (str(FORMAT),))
        conn.execute("PRAGMA synchronous = NORMAL")
        rows = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    except apsw.Error as exc:
        raise DataError(f"index database {path} cannot be opened ({exc}); check the path, or rebuild the index "
                        "with `crag index add`") from exc
    if rows.get("format") != str(FORMAT):
        raise DataError(f"index database {path} has format {rows.get('format')!r}, this version reads {FORMAT}; "
                        "rebuild it with `crag index add`")
    return conn


@contextmanager
def write_transaction(conn: Any) -> Iterator[None]:
    """BEGIN IMMEDIATE ... COMMIT: writers from other processes wait (busy timeout) instead of failing or
    losing an update; any error rolls the whole write back."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def create_vector_table(conn: Any, dim: int) -> None:
    """The sqlite-vec table of binary codes (one bit per dimension), partitioned by access scope."""
    bits = -(-dim // 8) * 8
    conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS vec USING vec0(scope TEXT PARTITION KEY, embedding bit[{bits}])")
    conn.execute("CREATE TRIGGER IF NOT EXISTS chunks_after_delete_vec AFTER DELETE ON chunks BEGIN "
                 "DELETE FROM vec WHERE rowid = old.rowid; END")
