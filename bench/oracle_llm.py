"""A loopback OpenAI-compatible server whose answers come from gold labels, right with a set probability.

It is a SIMULATED LLM for planning experiments ("what if my LLM were right 90% of the time?"): it speaks
the json_object protocol of the LLM grader, so the real cascade code runs end to end.
"""

from __future__ import annotations

import json
import random
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class OracleLLM:
    def __init__(self, gold: dict[tuple[str, str], bool], accuracy: float, seed: int = 0) -> None:
        self.gold = gold
        self.accuracy = accuracy
        self.rng = random.Random(seed)
        self.calls = 0
        oracle = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
                payload = json.dumps(oracle.answer(body)).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        self.calls += 1
        user = json.loads(body["messages"][-1]["content"])
        judgements = []
        for p in user["passages"]:
            truth = self.gold.get((user["question"], p["text"]))
            if truth is None:
                raise KeyError("the oracle was asked about a pair it has no gold label for")
            said = truth if self.rng.random() < self.accuracy else not truth
            judgements.append({"index": p["index"], "verdict": "relevant" if said else "irrelevant",
                               "supports_answer": said, "missing_aspects": [], "reason": "oracle (simulation)",
                               "confidence": None})
        return {"id": "oracle", "object": "chat.completion", "created": 0, "model": "oracle",
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": json.dumps({"judgements": judgements})}}],
                "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}}

    def stop(self) -> None:
        self.server.shutdown()
