"""Start and stop a real `crag serve` process (and its key store) for the load and fault benches."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.service.keys import KeyStore  # noqa: E402
from tests.llama_server import free_port  # noqa: E402


class Service:
    def __init__(self, workdir: Path, *extra: str) -> None:
        self.port = free_port()
        store = workdir / "keys.json"
        self.key = KeyStore.open(store, create=True).create("demo")
        env = {**os.environ, "CRAG_CACHE": str(workdir / "cache")}
        self.log = (workdir / f"serve-{self.port}.log").open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pipeline.cli", "serve", "--keys", str(store), "--demo", "--port", str(self.port),
             "--rate-per-minute", "1000000", "--no-access-log", *extra],
            cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        self.url = f"http://127.0.0.1:{self.port}"
        started = time.monotonic()
        deadline = started + 180
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"crag serve exited with {self.proc.returncode}; see {self.log.name}")
            try:
                with urllib.request.urlopen(self.url + "/readyz", timeout=2) as response:
                    if response.status == 200:
                        self.ready_seconds = time.monotonic() - started
                        return
            except OSError:
                time.sleep(0.5)
        raise RuntimeError("crag serve did not become ready")

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}

    def metrics(self) -> str:
        with urllib.request.urlopen(self.url + "/metrics", timeout=10) as response:
            return response.read().decode()

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def demo_chunks(n: int) -> list[dict[str, str]]:
    """Paragraph chunks of the demo corpus, as /v1/grade takes them."""
    from pipeline.cli.ask_commands import DEMO_DIR
    from pipeline.retrieval.documents import chunk_text, read_document

    chunks = []
    for path in sorted((DEMO_DIR / "corpus").glob("*.md")):
        _, text = read_document(path)
        chunks += [{"text": c, "chunk_id": f"{path.stem}-{i}"} for i, c in enumerate(chunk_text(text))]
    return chunks[:n]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


if __name__ == "__main__":
    print(json.dumps(demo_chunks(3), indent=2)[:500])
