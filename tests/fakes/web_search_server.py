"""Loopback stand-ins for Tavily (``POST /search``) and SearxNG (``GET /search?format=json``).

``results`` is what a search returns; ``script`` holds per-request faults (``500``, ``401``, ``sleep``,
``not_json``) consumed in order. Every request is recorded so tests can prove what was (not) sent.
"""

from __future__ import annotations

import json
import time
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlparse

from tests.fakes.loopback import LoopbackServer


class FakeWebSearch(LoopbackServer):
    def __init__(self, results: list[dict[str, Any]] | None = None, sleep_s: float = 2.0) -> None:
        self.results = results or []
        self.script: list[str] = []
        self.requests: list[dict[str, Any]] = []
        self.sleep_s = sleep_s
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return

            def _handle(self, payload: dict[str, Any]) -> None:
                fake.requests.append({"path": urlparse(self.path).path, "headers": dict(self.headers), **payload})
                behaviour = fake.script.pop(0) if fake.script else "ok"
                if behaviour == "sleep":
                    time.sleep(fake.sleep_s)
                if behaviour in ("500", "401"):
                    return fake.send(self, int(behaviour), b'{"error": "fault"}')
                if behaviour == "not_json":
                    return fake.send(self, 200, b"<html>oops</html>")
                return fake.send(self, 200, json.dumps({"query": payload.get("query"),
                                                         "results": fake.results}).encode())

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                self._handle(json.loads(self.rfile.read(length) or b"{}"))

            def do_GET(self) -> None:
                query = {k: v[0] for k, v in parse_qs(urlparse(self.path).query).items()}
                self._handle({"query": query.get("q"), "params": query})

        super().__init__(Handler)
