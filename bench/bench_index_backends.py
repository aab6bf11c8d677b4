"""The two embedded databases considered for the local index, on the same synthetic data: SQLite (FTS5 +
sqlite-vec, as shipped in ``pipeline/retrieval/index.py``) and LanceDB (vector + full-text indexes, filters
pushed into the scan). Measures build, open, one hybrid query with tenant / role / status filters
(lexical top 50 + dense top 50), adding one 10-chunk document (and whether the next query sees it), peak RSS.

LanceDB is not a dependency of the project: ``pip install lancedb`` to run its half.

Run: python bench/bench_index_backends.py --chunks 100000 [--json bench/results_index_backends.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

QUERIES = [" ".join(f"term{j}" for j in range(q * 13 % 900, q * 13 % 900 + 4)) for q in range(40)]
DEPTH = 50


def _data(n: int):
    from bench_index import RandomEmbedder, _chunks

    vocabulary = [f"term{i}" for i in range(20_000)]
    embedder = RandomEmbedder()
    return list(_chunks(0, n, vocabulary)), embedder, vocabulary


def run_sqlite(n: int, root: Path) -> dict:
    from bench_index import BATCH, _chunks

    from pipeline.retrieval.documents import Principal
    from pipeline.retrieval.index import LocalHybridIndex

    chunks, embedder, vocabulary = _data(n)
    t0 = time.perf_counter()
    index = LocalHybridIndex(root, embedder=embedder)
    for lo in range(0, n, BATCH):
        index.add(chunks[lo:lo + BATCH])
    build = time.perf_counter() - t0
    del index
    t0 = time.perf_counter()
    index = LocalHybridIndex(root, embedder=embedder)
    principal = Principal(tenant="acme")
    index.search(QUERIES[0], principal)
    open_s = time.perf_counter() - t0
    ms = []
    for query in QUERIES:
        t0 = time.perf_counter()
        index.search(query, principal, k=8, filters={"status": "active"})
        ms.append((time.perf_counter() - t0) * 1000)
    new = list(_chunks(n, n + 10, vocabulary))
    t0 = time.perf_counter()
    index.add(new)
    add_ms = (time.perf_counter() - t0) * 1000
    probe = " ".join(new[0].text.split()[:6])
    visible = any(c.chunk_id == new[0].chunk_id for c, _ in index.search(probe, Principal(
        tenant=new[0].tenant, roles=frozenset({"hr"})), k=50))
    return {"backend": "sqlite (fts5 + sqlite-vec)", "build_s": round(build, 1), "open_and_first_query_s":
            round(open_s, 2), "hybrid_query_ms_p50": round(statistics.median(ms), 1),
            "add_document_ms": round(add_ms, 1), "added_visible": visible}


def run_lancedb(n: int, root: Path) -> dict:
    import lancedb
    import pyarrow as pa
    from bench_index import _chunks

    chunks, embedder, vocabulary = _data(n)

    def table(rows):
        vectors = embedder.embed([c.text for c in rows])
        return pa.table({
            "rowid": pa.array([hash(c.chunk_id) for c in rows], pa.int64()),
            "tenant": [c.tenant for c in rows], "status": [c.status for c in rows],
            "roles": pa.array([sorted(c.allowed_roles) for c in rows], pa.list_(pa.string())),
            "text": [c.text for c in rows],
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), vectors.shape[1])})

    t0 = time.perf_counter()
    db = lancedb.connect(str(root))
    tbl = db.create_table("chunks", table(chunks[:10_000]))
    for lo in range(10_000, n, 10_000):
        tbl.add(table(chunks[lo:lo + 10_000]))
    tbl.create_fts_index("text")
    build = time.perf_counter() - t0
    where = "tenant = 'acme' AND status = 'active' AND array_length(roles) = 0"

    def hybrid(query):
        q = embedder.embed([query])[0]
        dense = tbl.search(q).where(where, prefilter=True).limit(DEPTH).select(["rowid"]).to_list()
        lexical = tbl.search(query, query_type="fts").where(where, prefilter=True).limit(DEPTH) \
            .select(["rowid"]).to_list()
        return dense, lexical

    t0 = time.perf_counter()
    db = lancedb.connect(str(root))
    tbl = db.open_table("chunks")
    hybrid(QUERIES[0])
    open_s = time.perf_counter() - t0
    ms = []
    for query in QUERIES:
        t0 = time.perf_counter()
        hybrid(query)
        ms.append((time.perf_counter() - t0) * 1000)
    new = list(_chunks(n, n + 10, vocabulary))
    t0 = time.perf_counter()
    tbl.add(table(new))
    add_ms = (time.perf_counter() - t0) * 1000
    got = tbl.search(" ".join(new[0].text.split()[:6]), query_type="fts").limit(50).select(["rowid"]).to_list()
    return {"backend": f"lancedb {lancedb.__version__} (flat vectors + FTS index)", "build_s": round(build, 1),
            "open_and_first_query_s": round(open_s, 2), "hybrid_query_ms_p50": round(statistics.median(ms), 1),
            "add_document_ms": round(add_ms, 1),
            "added_visible": any(r["rowid"] == hash(new[0].chunk_id) for r in got)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--one", choices=["sqlite", "lancedb"], help=argparse.SUPPRESS)
    parser.add_argument("--root", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        result = (run_sqlite if args.one == "sqlite" else run_lancedb)(args.chunks, Path(args.root))
        result["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
        result["disk_mb"] = round(sum(p.stat().st_size for p in Path(args.root).rglob("*") if p.is_file()) / 1e6, 1)
        print(json.dumps(result))
        return
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for backend in ("sqlite", "lancedb"):
            proc = subprocess.run([sys.executable, __file__, "--one", backend, "--chunks", str(args.chunks),
                                   "--root", str(Path(tmp) / backend)], capture_output=True, text=True, check=False)
            if proc.returncode:
                raise SystemExit(f"{backend} failed:\n{proc.stderr[-3000:]}")
            results.append(json.loads(proc.stdout.strip().splitlines()[-1]))
            print(json.dumps(results[-1]), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"chunks": args.chunks, "results": results, "cpus": os.cpu_count()},
                                              indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
