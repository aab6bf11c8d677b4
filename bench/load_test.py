"""Bounded load test of `POST /v1/grade` on loopback: sustained requests/s at p50/p99 latency.

Starts a real `crag serve` worker (the shipped int8 grader, demo corpus), then runs closed-loop async
clients at several concurrency levels for a fixed time each. The same payload is also graded in this
process by the grader directly, one request after another, which gives the raw speed the service is
compared against (requests/s through HTTP / requests/s of the bare grader). Every request asks a
different question (a request number is appended), so the grader's pair cache never answers one; the
chunks' texts stay the same, so a fused grader's bi-encoder vectors of them come from its embedding cache
after the first request, unless ``--fresh-texts`` appends the request number to every chunk too (what a
stream of chunks the grader has never seen costs).

Run: python bench/load_test.py [--seconds 20] [--concurrency 1 4 16] [--chunks 8] [--wait-ms 0 5]
     [--workers 2 --threads 1] [--model default|fast] [--fresh-texts]
     [--json bench/results_load.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

import httpx
from service_harness import Service, demo_chunks, percentile

QUERY = "What religion were the Normans?"


def request_body(payload: dict, tag: str, fresh_texts: bool) -> dict:
    """One request: the payload with ``tag`` appended to its query (and to every chunk with ``fresh_texts``)."""
    chunks = [{**c, "text": f"{c['text']} ({tag})"} for c in payload["chunks"]] if fresh_texts else payload["chunks"]
    return {**payload, "query": f"{payload['query']} ({tag})", "chunks": chunks}


def raw_speed(payload: dict, seconds: float, model: str, fresh_texts: bool) -> dict:
    from grader import load_grader

    grader = load_grader(model, threads=2)
    grader.grade(QUERY, [c["text"] for c in payload["chunks"]])
    times = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        body = request_body(payload, f"raw request {len(times)}", fresh_texts)
        t0 = time.perf_counter()
        grader.grade(body["query"], [c["text"] for c in body["chunks"]])
        times.append(time.perf_counter() - t0)
    return {"requests_per_s": round(len(times) / sum(times), 2), "p50_ms": round(1000 * percentile(times, 0.5), 1),
            "p99_ms": round(1000 * percentile(times, 0.99), 1)}


async def load(url: str, headers: dict, payload: dict, concurrency: int, seconds: float, fresh_texts: bool) -> dict:
    latencies: list[float] = []
    statuses: dict[str, int] = {}
    errors = 0
    sent = [0]
    end = time.monotonic() + seconds

    async def client(http: httpx.AsyncClient) -> None:
        nonlocal errors
        while time.monotonic() < end:
            t0 = time.perf_counter()
            sent[0] += 1
            try:
                response = await http.post(url + "/v1/grade", headers=headers, json=request_body(
                    payload, f"level {concurrency}, request {sent[0]}", fresh_texts))
                statuses[str(response.status_code)] = statuses.get(str(response.status_code), 0) + 1
                latencies.append(time.perf_counter() - t0)
            except httpx.HTTPError:
                errors += 1

    started = time.monotonic()
    async with httpx.AsyncClient(timeout=120) as http:
        await asyncio.gather(*(client(http) for _ in range(concurrency)))
    elapsed = time.monotonic() - started
    return {"concurrency": concurrency, "requests": len(latencies),
            "requests_per_s": round(len(latencies) / elapsed, 2),
            "p50_ms": round(1000 * percentile(latencies, 0.5), 1),
            "p99_ms": round(1000 * percentile(latencies, 0.99), 1), "statuses": statuses, "client_errors": errors}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--chunks", type=int, default=8)
    parser.add_argument("--wait-ms", type=float, nargs="+", default=[5.0])
    parser.add_argument("--workers", type=int, default=1, help="uvicorn worker processes")
    parser.add_argument("--threads", type=int, default=2, help="model threads per worker")
    parser.add_argument("--model", default="default", help="grader bundle the service loads (e.g. fast)")
    parser.add_argument("--fresh-texts", action="store_true",
                        help="append the request number to every chunk too, so no text was seen before")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    payload = {"query": QUERY, "chunks": demo_chunks(args.chunks), "escalate": False}
    tokens = sum(len(c["text"].split()) for c in payload["chunks"])
    raw = raw_speed(payload, args.seconds / 2, args.model, args.fresh_texts)
    print(json.dumps({"raw_grader": raw}), flush=True)
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for wait in args.wait_ms:
            service = Service(Path(tmp), "--micro-batch-wait-ms", str(wait), "--threads", str(args.threads),
                              "--workers", str(args.workers), "--model", args.model)
            try:
                for concurrency in args.concurrency:
                    row = asyncio.run(load(service.url, service.headers, payload, concurrency, args.seconds,
                                           args.fresh_texts))
                    row.update(micro_batch_wait_ms=wait, workers=args.workers, threads=args.threads)
                    row["vs_raw_grader"] = round(row["requests_per_s"] / raw["requests_per_s"], 3)
                    runs.append(row)
                    print(json.dumps(row), flush=True)
            finally:
                service.stop()
    result = {"model": args.model, "fresh_texts": args.fresh_texts, "payload": {"chunks": args.chunks, "words": tokens},
              "seconds_per_level": args.seconds,
              "raw_grader": raw, "runs": runs}
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
