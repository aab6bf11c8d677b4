"""Micro-batching: one worker thread owns the grader and scores the requests of concurrent callers together.

Requests wait at most ``max_wait_ms`` for batch mates (or until ``max_pairs`` pairs are queued). One
owner thread hands each micro-batch to the grader, whose pool of single-thread sessions grades its pairs
side by side (:mod:`grader.session_pool`): every core is busy, sessions never compete for a core with
other callers' threads, and with the default int8 bundle each pair is still scored on its own, so a
caller's grades never depend on another caller's chunks. Pairs repeated across requests are scored once.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from models.errors import ConfigError, CragError
from models.types import Chunk, Grade

__all__ = ["BatchedGrader", "MicroBatcher"]

logger = logging.getLogger(__name__)
_STOP = object()


@dataclass
class _Request:
    query: str
    chunks: Sequence[Chunk | str]
    future: Future[list[Grade]] = field(default_factory=Future)


class MicroBatcher:
    """Queue in front of a grader with ``grade_many``; ``submit`` is safe from any thread."""

    def __init__(self, grader: Any, *, max_wait_ms: float = 5.0, max_pairs: int = 64) -> None:
        if max_wait_ms < 0 or max_pairs < 1:
            raise ConfigError(f"MicroBatcher needs max_wait_ms >= 0 and max_pairs >= 1, got {max_wait_ms}, {max_pairs}")
        self.grader = grader
        self.max_wait_s = max_wait_ms / 1000.0
        self.max_pairs = max_pairs
        self.batch_sizes: list[int] = []
        self.on_batch: Any = None  # optional callback(requests, pairs, seconds) for metrics
        self._queue: queue.Queue[Any] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="crag-microbatch", daemon=True)
        self._thread.start()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def submit(self, query: str, chunks: Sequence[Chunk | str]) -> Future[list[Grade]]:
        if not self.alive:
            raise CragError("the grading worker has stopped")
        request = _Request(query, chunks)
        self._queue.put(request)
        return request.future

    def close(self, timeout: float = 30.0) -> None:
        """Finish what is queued, then stop the worker."""
        self._queue.put(_STOP)
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is _STOP:
                return
            batch, stop = [first], False
            pairs = len(first.chunks)
            deadline = time.monotonic() + self.max_wait_s
            while pairs < self.max_pairs:
                remaining = deadline - time.monotonic()
                try:
                    item = self._queue.get(timeout=max(0.0, remaining)) if remaining > 0 else self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is _STOP:
                    stop = True
                    break
                batch.append(item)
                pairs += len(item.chunks)
            self._score(batch, pairs)
            if stop:
                return

    def _score(self, batch: list[_Request], pairs: int) -> None:
        # a caller that gave up (timeout) cancelled its future; running futures can no longer be cancelled,
        # so setting their results below is always safe
        batch = [r for r in batch if r.future.running() or r.future.set_running_or_notify_cancel()]
        if not batch:
            return
        t0 = time.perf_counter()
        try:
            results = self.grader.grade_many([(r.query, r.chunks) for r in batch])
        except CragError as exc:  # a bad request: report it to its caller, never to its batch mates
            if len(batch) == 1:
                batch[0].future.set_exception(exc)
            else:
                for request in batch:
                    self._score([request], len(request.chunks))
            return
        except BaseException as exc:  # the model itself failed: every waiting caller gets the error
            if isinstance(exc, KeyboardInterrupt | SystemExit):
                raise
            logger.exception("grading batch failed")
            # a native library's panic (pyo3's PanicException) is a BaseException: as a CragError it is a 503 for
            # these callers, and this worker lives on for the next batch instead of dying with it
            failure = exc if isinstance(exc, Exception) else CragError(f"grading failed: {type(exc).__name__}: {exc}")
            for request in batch:
                request.future.set_exception(failure)
            return
        self.batch_sizes.append(len(batch))
        if self.on_batch is not None:
            self.on_batch(len(batch), pairs, time.perf_counter() - t0)
        for request, grades in zip(batch, results, strict=True):
            request.future.set_result(grades)


class BatchedGrader:
    """A Grader whose model calls go through a :class:`MicroBatcher` (usable as the cascade's primary)."""

    def __init__(self, batcher: MicroBatcher, *, timeout_s: float = 60.0) -> None:
        self.batcher = batcher
        self.policy = batcher.grader.policy
        self.timeout_s = timeout_s

    @property
    def name(self) -> str:
        return str(self.batcher.grader.name)

    def grade(self, query: str, chunks: Sequence[Chunk | str]) -> list[Grade]:
        return self.batcher.submit(query, chunks).result(timeout=self.timeout_s)

    def describe(self) -> dict[str, Any]:
        return {**self.batcher.grader.describe(), "micro_batch_wait_ms": 1000 * self.batcher.max_wait_s}
