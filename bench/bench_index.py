"""Scale of the local index: build, open, search with permission and metadata filters, add one document,
remove one document, peak memory; synthetic 120-word chunks and random unit vectors (the embedder's own
cost is separate and left out).

Each size runs in a fresh process so that its peak RSS is its own. Works against any tree whose
``LocalHybridIndex`` has ``add`` and ``search`` (run it with PYTHONPATH set to an older checkout to
measure the index you are replacing; ``remove`` and ``stats`` are measured only where they exist).

Run: python bench/bench_index.py --sizes 10000 100000 [1000000] [--json bench/results_index.json]
"""

from __future__ import annotations

import argparse
import hashlib
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
if str(ROOT) not in sys.path and not os.environ.get("PYTHONPATH"):
    sys.path.insert(0, str(ROOT))

DIM = 384
WORDS = 120
BATCH = 10_000
TENANTS = ("acme", "globex", "initech")


class RandomEmbedder:
    """Deterministic random unit vectors seeded by the text: the embedder is not what is measured."""

    name = "random-384"

    def embed(self, texts):
        import numpy as np

        out = np.empty((len(texts), DIM), dtype=np.float32)
        for i, text in enumerate(texts):
            seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
            out[i] = np.random.default_rng(seed).standard_normal(DIM)
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def _chunks(start: int, stop: int, vocabulary: list[str]):
    import numpy as np

    from pipeline.retrieval.documents import StoredChunk

    rng = np.random.default_rng(start)
    weights = 1.0 / np.arange(1, len(vocabulary) + 1)  # Zipf-like word frequencies, like real text
    weights /= weights.sum()
    for i in range(start, stop):
        words = rng.choice(len(vocabulary), WORDS, p=weights)
        yield StoredChunk(chunk_id=f"doc{i // 10}.md#{i % 10}", text=" ".join(vocabulary[w] for w in words),
                          tenant=TENANTS[i % 3], source=f"doc{i // 10}.md", title=f"Document {i // 10}",
                          position=i % 10, allowed_roles=frozenset({"hr"}) if i % 7 == 0 else frozenset(),
                          status="superseded" if i % 11 == 0 else "active",
                          metadata={"path": f"/corpus/doc{i // 10}.md", "format": "md"})


def run_size(n: int, root: Path) -> dict:
    """Everything for one size, in this process."""
    from pipeline.retrieval.documents import Principal
    from pipeline.retrieval.index import LocalHybridIndex

    vocabulary = [f"term{i}" for i in range(20_000)]
    embedder = RandomEmbedder()
    index = LocalHybridIndex(root, embedder=embedder)
    start = time.perf_counter()
    for lo in range(0, n, BATCH):
        index.add(list(_chunks(lo, min(n, lo + BATCH), vocabulary)))
    build_s = time.perf_counter() - start
    del index

    start = time.perf_counter()
    index = LocalHybridIndex(root, embedder=embedder)
    principal = Principal(tenant="acme", roles=frozenset())
    index.search("term5 term77 term300", principal, k=8)
    open_s = time.perf_counter() - start

    queries = [" ".join(f"term{j}" for j in range(q * 13 % 900, q * 13 % 900 + 4)) for q in range(40)]
    search_ms = []
    for query in queries:
        t0 = time.perf_counter()
        hits = index.search(query, principal, k=8, filters={"status": "active"})
        search_ms.append((time.perf_counter() - t0) * 1000)
        assert all(c.tenant == "acme" and not c.allowed_roles and c.status == "active" for c, _ in hits)

    add_ms = []
    for trial in range(5):
        new = list(_chunks(n + trial * 10, n + trial * 10 + 10, vocabulary))  # one 10-chunk document
        t0 = time.perf_counter()
        index.add(new)
        add_ms.append((time.perf_counter() - t0) * 1000)
    out = {
        "chunks": n, "build_s": round(build_s, 1), "open_and_first_search_s": round(open_s, 2),
        "search_ms_p50": round(statistics.median(search_ms), 1),
        "search_ms_p95": round(sorted(search_ms)[int(0.95 * (len(search_ms) - 1))], 1),
        "add_one_document_ms_p50": round(statistics.median(add_ms), 1),
    }
    if hasattr(index, "remove"):
        t0 = time.perf_counter()
        index.remove(document=f"/corpus/doc{n // 10}.md")
        out["remove_one_document_ms"] = round((time.perf_counter() - t0) * 1000, 1)
    out["disk_mb"] = round(sum(p.stat().st_size for p in root.rglob("*") if p.is_file()) / 1e6, 1)
    out["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--workdir", default=None, help="where the indexes are built (default: a temp dir)")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # internal: run one size in this process
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_size(args.one, Path(args.workdir))))
        return
    results = []
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        for n in args.sizes:
            proc = subprocess.run([sys.executable, __file__, "--one", str(n), "--workdir", str(Path(tmp) / str(n))],
                                  capture_output=True, text=True, check=False)
            if proc.returncode:
                raise SystemExit(f"size {n} failed:\n{proc.stderr[-3000:]}")
            results.append(json.loads(proc.stdout.strip().splitlines()[-1]))
            print(json.dumps(results[-1]), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"results": results, "machine": os.uname().nodename,
                                               "cpus": os.cpu_count()}, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
