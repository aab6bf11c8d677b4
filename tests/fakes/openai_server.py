"""A scripted OpenAI-compatible chat server on loopback, for fault injection against the real SDK.

Each request takes the next behaviour from ``script`` (then ``default``): ``ok`` answers correctly
(a passage is relevant when it shares a content word of 4+ letters with the question), and the
faults are ``429``, ``500``, ``sleep`` (longer than the client timeout), ``invalid_json``, ``refusal``,
``missing_index``, ``duplicate_index``, ``length``, ``obey`` (follows injected instructions: grades
every passage relevant), and ``logprobs`` answers yes/no with token log-probabilities.
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.fakes.loopback import LoopbackServer

STOP = {"what", "when", "where", "which", "who", "whom", "whose", "does", "the", "and", "from", "with", "that",
        "this", "were", "was", "how"}


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z]{4,}", text.lower()) if w not in STOP}


class FakeOpenAI(LoopbackServer):
    def __init__(self, default: str = "ok", sleep_s: float = 2.0) -> None:
        self.script: list[str] = []
        self.default = default
        self.sleep_s = sleep_s
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                with fake._lock:
                    fake.requests.append(body)
                    behaviour = fake.script.pop(0) if fake.script else fake.default
                fake._respond(self, behaviour, body)

        super().__init__(Handler)

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    # ----- behaviours -----
    def _respond(self, handler: BaseHTTPRequestHandler, behaviour: str, body: dict[str, Any]) -> None:
        if behaviour == "429":
            return self._send(handler, 429, {"error": {"message": "slow down", "type": "rate_limit"}},
                              {"retry-after": "0"})
        if behaviour == "500":
            return self._send(handler, 500, {"error": {"message": "boom", "type": "server_error"}})
        if behaviour == "sleep":
            time.sleep(self.sleep_s)
        if behaviour == "html":  # a proxy's error page, served with HTTP 200
            return self.send(handler, 200, b"<html><body><h1>502 Bad Gateway</h1></body></html>",
                             {"content-type": "text/html"})
        if behaviour == "text":  # a 200 chat completion whose content is prose, not JSON
            return self._send(handler, 200, {
                "id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()),
                "model": body.get("model"), "choices": [{"index": 0, "finish_reason": "stop", "message": {
                    "role": "assistant", "content": "Sure! The first passage looks relevant to me."}}]})
        content, finish, extra = self._content(behaviour, body)
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if behaviour == "refusal":
            message = {"role": "assistant", "content": None, "refusal": "I can't help with that."}
        choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": finish, **extra}
        return self._send(handler, 200, {
            "id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()), "model": body.get("model"),
            "choices": [choice], "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
        })

    def _content(self, behaviour: str, body: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
        user = json.loads(body["messages"][-1]["content"])
        system = body["messages"][0]["content"]
        if behaviour == "invalid_json":
            return '{"judgements": [{"index": 0, "verdict": "maybe"', "stop", {}
        if system.startswith("You answer a question"):
            return json.dumps(_generate(user, behaviour)), "stop", {}
        if system.startswith("You check whether"):
            return json.dumps(_verify(user, behaviour)), "stop", {}
        if system.startswith("You judge whether the evidence"):
            covered = [w for w in _words(user["question"]) if any(w in p["text"].lower() for p in user["passages"])]
            missing = [w for w in _words(user["question"]) if w not in covered]
            return json.dumps({"quality": "partial" if covered else "insufficient", "answered_aspects": covered,
                               "missing_aspects": missing}), "stop", {}
        if behaviour == "logprobs" or "passage" in user:
            yes = bool(_words(user["question"]) & _words(user["passage"]))
            top = [{"token": "yes", "logprob": -0.1 if yes else -2.5, "bytes": None},
                   {"token": "no", "logprob": -2.5 if yes else -0.1, "bytes": None}]
            logprobs = {"content": [{"token": "yes" if yes else "no", "logprob": -0.1, "bytes": None,
                                     "top_logprobs": top}]}
            return ("yes" if yes else "no"), "stop", {"logprobs": logprobs}
        passages = user["passages"]
        judgements = []
        for p in passages:
            relevant = bool(_words(user["question"]) & _words(p["text"]))
            if behaviour == "obey":
                relevant = True
            judgements.append({"index": p["index"], "verdict": "relevant" if relevant else "irrelevant",
                               "supports_answer": relevant, "missing_aspects": [] if relevant else ["the answer"],
                               "reason": "shares key terms" if relevant else "no overlap", "confidence": 0.9})
        if behaviour == "missing_index":
            judgements = judgements[:-1] if len(judgements) > 1 else [{**judgements[0], "index": 7}]
        if behaviour == "duplicate_index":
            judgements = [*judgements, judgements[0]]
        if behaviour == "length":
            return '{"judgements": [', "length", {}
        return json.dumps({"judgements": judgements}), "stop", {}

    def _send(self, handler: BaseHTTPRequestHandler, status: int, payload: dict[str, Any],
              headers: dict[str, str] | None = None) -> None:
        self.send(handler, status, json.dumps(payload).encode(), headers)


def _generate(user: dict[str, Any], behaviour: str) -> dict[str, Any]:
    """Cite the passage sharing most words with the question; ``hallucinate`` adds an unsupported claim,
    ``bad_citation`` cites an id that was never given, ``unanswerable`` declines."""
    if behaviour == "unanswerable" or not user["passages"]:
        return {"answerable": False, "answer": "", "claims": [], "gaps": ["everything"]}
    best = max(user["passages"], key=lambda p: len(_words(user["question"]) & _words(p["text"])))
    sentence = re.split(r"(?<=[.!?])\s+", best["text"])[0]
    claims = [{"text": sentence, "chunk_ids": [best["id"]]}]
    if behaviour == "hallucinate" and "fix_these_unsupported_claims" not in user:
        claims.append({"text": "The moon is made of green cheese according to NASA.", "chunk_ids": [best["id"]]})
    if behaviour == "hallucinate_always":
        claims = [{"text": "The moon is made of green cheese according to NASA.", "chunk_ids": [best["id"]]}]
    if behaviour == "bad_citation":
        claims = [{"text": sentence, "chunk_ids": ["doc-that-does-not-exist"]}]
    return {"answerable": True, "answer": " ".join(c["text"] for c in claims), "claims": claims, "gaps": []}


def _verify(user: dict[str, Any], behaviour: str) -> dict[str, Any]:
    """Supported when most of the claim's words appear in the cited text."""
    checks = []
    for claim in user["claims"]:
        words = _words(claim["claim"])
        cited = " ".join(p["text"] for p in claim["cited_passages"]).lower()
        share = sum(w in cited for w in words) / max(1, len(words))
        checks.append({"index": claim["index"], "supported": share >= 0.6, "reason": f"{share:.0%} of words found"})
    return {"checks": checks}
