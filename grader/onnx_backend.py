"""ONNX Runtime backend: the production grader. Needs numpy, tokenizers and onnxruntime only (no torch)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from grader.cross_encoder import DEFAULT_CACHE_PAIRS, DEFAULT_MAX_WINDOWS, CrossEncoderGrader
from grader.encoding import EncodedBatch
from grader.policy import ThresholdPolicy
from grader.session_pool import SessionPool, pool_size
from models.bundle import Bundle
from models.errors import BundleError

__all__ = ["OnnxGrader"]


INT8_BATCH_SIZE = 1
FP32_BATCH_SIZE = 32


class OnnxGrader(CrossEncoderGrader):
    """Cross-encoder grader running an exported ONNX model (int8 by default when the bundle has it).

    Dynamic int8 quantisation computes one activation scale per tensor, i.e. per batch, so a chunk's
    score would shift with its batch mates (by up to ~0.04 in probability, measured). The int8 variant
    therefore runs one pair per call by default, so every grade is independent of the other chunks
    (reproducible, cacheable), and uses the cores by grading ``threads`` pairs at once on single-thread
    sessions (:mod:`grader.session_pool`). Pass ``batch_size`` to trade that independence for
    throughput (int8 grades are then not cached, as they depend on their batch mates).
    """

    backend = "onnx"

    def __init__(
        self,
        bundle: Bundle,
        *,
        variant: str | None = None,
        threads: int | None = None,
        batch_size: int | None = None,
        policy: ThresholdPolicy | None = None,
        max_windows: int = DEFAULT_MAX_WINDOWS,
        cache_pairs: int = DEFAULT_CACHE_PAIRS,
        cross_encoder: bool | None = None,
    ) -> None:
        if bundle.manifest.backend != "onnx":
            raise BundleError(
                f"bundle {bundle.path} holds a {bundle.manifest.backend} model; export it to ONNX first with "
                f"`crag export --model {bundle.path} --out <bundle> --int8`, or load it with backend='torch'"
            )
        chosen_variant, model_path = bundle.model_file(variant)
        if batch_size is None:
            batch_size = INT8_BATCH_SIZE if chosen_variant == "int8" else FP32_BATCH_SIZE
        if chosen_variant == "int8" and batch_size > 1:
            cache_pairs = 0  # a batched int8 grade depends on its batch mates: not reusable
        self.threads = pool_size(threads)
        self._model_path = model_path
        self._sessions: SessionPool | None = None
        self._sessions_lock = threading.Lock()
        super().__init__(bundle, batch_size=batch_size, policy=policy, max_windows=max_windows,
                         cache_pairs=cache_pairs, threads=self.threads, cross_encoder=cross_encoder)
        self.variant = chosen_variant
        if self.runs_cross_encoder:
            _ = self.sessions  # loaded now, so that a model onnxruntime cannot read fails here, not at a grade

    @property
    def sessions(self) -> SessionPool:
        """The cross-encoder's sessions, loaded on first use: a bundle whose fused score gives the cross-encoder
        no weight never loads it (``crag adapt`` on such a bundle does)."""
        if self._sessions is None:
            with self._sessions_lock:
                if self._sessions is None:
                    pool = SessionPool(self._model_path, self.threads, what="grader model",
                                       padded_calls=self.batch_size > 1)
                    expected = {"input_ids", "attention_mask", "token_type_ids"}
                    if not set(pool.input_names) <= expected:
                        raise BundleError(f"{self._model_path} has inputs {pool.input_names}; expected a subset of "
                                          f"{sorted(expected)}")
                    self._sessions = pool
        return self._sessions

    @sessions.setter
    def sessions(self, pool: SessionPool) -> None:
        self._sessions = pool

    def _logits(self, batch: EncodedBatch) -> np.ndarray:
        out = self.sessions.run({"input_ids": batch.input_ids, "attention_mask": batch.attention_mask,
                                 "token_type_ids": batch.token_type_ids})
        return np.asarray(out, dtype=np.float64).reshape(len(batch.index), -1)[:, 0]

    def _run_batches(self, batches: Sequence[EncodedBatch]) -> list[tuple[np.ndarray, float]]:
        return self.sessions.map(self._timed_logits, batches)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "variant": self.variant, "threads": self.threads, "batch_size": self.batch_size}
