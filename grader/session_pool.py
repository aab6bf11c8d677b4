"""Single-thread onnxruntime sessions run side by side: every core busy, and no pair batched with another.

Dynamic int8 quantisation scales activations per call, so a pair graded in a batch would get a score
that depends on its batch mates. Running one pair per call keeps grades independent (reproducible,
cacheable), and running several such calls at once on single-thread sessions still uses every core:
measured on this project's 2-core machine, two one-thread sessions graded 20 mixed-length chunks
1.2-1.4x faster than one two-thread session, with bit-identical scores. onnxruntime releases the GIL
while it runs, so plain threads suffice.

A call whose attention mask is all ones (no padding: one text per call) runs a variant of the model without the
mask's additions (:func:`grader.load_rewrites.unpadded_model`, exact for such calls); a padded call runs the model
with its mask. Each set of sessions is loaded when first needed, so a pool that only sees one kind holds one.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from grader.load_rewrites import model_for_this_cpu, rewrites_in_use, unpadded_model
from models.deps import require
from models.errors import BundleError, ConfigError

__all__ = ["SessionPool", "default_workers", "pool_size"]

T = TypeVar("T")
R = TypeVar("R")


def default_workers() -> int:
    """Sessions to run at once: the cores this process may use, at most 4."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(4, cores))


def pool_size(workers: int | None) -> int:
    """The number of sessions to hold: ``workers`` (validated), or :func:`default_workers` for None."""
    if workers is not None and (not isinstance(workers, int) or isinstance(workers, bool) or workers < 1):
        raise ConfigError(f"threads must be a positive int (the cores to use), got {workers!r}")
    return workers or default_workers()


class SessionPool:
    """``workers`` sessions of one model, each with one intra-op thread, and the threads that drive them.

    :meth:`run` borrows a free session for one call (safe from any thread); :meth:`map` spreads many calls
    over the pool and returns their results in input order. ``padded_calls``: the owner batches texts of
    different lengths, so the model with its attention mask is loaded first (otherwise the unpadded variant is).
    """

    def __init__(self, model_path: str | Path, workers: int | None = None, *, what: str = "model",
                 padded_calls: bool = False) -> None:
        self.workers = pool_size(workers)
        self._ort = require("onnxruntime", "onnx")
        self._rewrites = rewrites_in_use()  # read once, so every variant is made alike; a bad setting named as one
        self._path, self._what = Path(model_path), what
        self._lock = threading.Lock()
        self._free: dict[bool, queue.SimpleQueue[Any]] = {}  # keyed by "for unpadded calls only"
        unpadded = None if padded_calls else self._guarded(unpadded_model, self._path, self._rewrites)
        self.skips_unpadded_mask = unpadded is not None
        free = self._sessions(self.skips_unpadded_mask, unpadded)
        session = free.get()
        self.input_names = [i.name for i in session.get_inputs()]
        free.put(session)
        self._executor = (ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="crag-onnx")
                          if self.workers > 1 else None)

    def run(self, feeds: dict[str, np.ndarray]) -> np.ndarray:
        """The first output of one call, on whichever session is free (waits for one if all are busy)."""
        free = self._sessions(self.skips_unpadded_mask and _unpadded(feeds))
        session = free.get()
        try:
            return session.run(None, {name: feeds[name] for name in self.input_names})[0]
        finally:
            free.put(session)

    def _sessions(self, unpadded: bool, model: bytes | None = None) -> queue.SimpleQueue[Any]:
        """The free sessions of one variant, loaded on first use (``model``: its bytes, when already made)."""
        free = self._free.get(unpadded)
        if free is None:
            with self._lock:
                free = self._free.get(unpadded)
                if free is None:
                    free = self._free[unpadded] = self._guarded(self._open, unpadded, model)
        return free

    def _open(self, unpadded: bool, model: bytes | None) -> queue.SimpleQueue[Any]:
        if model is None:
            model = (unpadded_model if unpadded else model_for_this_cpu)(self._path, self._rewrites)
        options = self._ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.graph_optimization_level = self._ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3

        def session(_: int) -> Any:
            return self._ort.InferenceSession(model or str(self._path), options, providers=["CPUExecutionProvider"],
                                              disabled_optimizers=self._rewrites.disabled_optimizers())

        free: queue.SimpleQueue[Any] = queue.SimpleQueue()
        # onnxruntime builds a session (graph optimisation, weight packing) without the GIL: all at once
        with ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="crag-onnx-load") as loading:
            for built in loading.map(session, range(self.workers)):
                free.put(built)
        return free

    def _guarded(self, load: Callable[..., T], *args: Any) -> T:
        """``load(*args)``, the errors protobuf and onnxruntime raise for a file that is not a usable model named
        as a BundleError."""
        try:
            return load(*args)
        except Exception as exc:  # both raise their own untyped errors
            raise BundleError(f"onnxruntime cannot load the {self._what} {self._path}: {exc}") from exc

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        """``fn`` over ``items`` on the pool's threads, results in input order; ``fn`` should call :meth:`run`
        and must not itself wait on this pool."""
        if self._executor is None or len(items) < 2:
            return [fn(item) for item in items]
        return list(self._executor.map(fn, items))

    def close(self) -> None:
        """Stop the pool's threads (sessions are freed with the pool)."""
        if self._executor is not None:
            self._executor.shutdown(wait=True)


def _unpadded(feeds: dict[str, np.ndarray]) -> bool:
    """Whether a call's attention mask is all ones (then the mask changes nothing and may be skipped)."""
    mask = feeds.get("attention_mask")
    return mask is not None and bool(mask.all())
