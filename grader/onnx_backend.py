"""ONNX Runtime backend: the production grader. Needs numpy, tokenizers and onnxruntime only (no torch)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from grader.cross_encoder import DEFAULT_CACHE_PAIRS, DEFAULT_MAX_WINDOWS, CrossEncoderGrader
from grader.encoding import EncodedBatch
from grader.policy import ThresholdPolicy
from grader.session_pool import SessionPool
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
        self.sessions = SessionPool(model_path, threads, what="grader model")
        super().__init__(bundle, batch_size=batch_size, policy=policy, max_windows=max_windows,
                         cache_pairs=cache_pairs, threads=self.sessions.workers, cross_encoder=cross_encoder)
        self.variant = chosen_variant
        self.threads = self.sessions.workers
        expected = {"input_ids", "attention_mask", "token_type_ids"}
        if not set(self.sessions.input_names) <= expected:
            raise BundleError(f"{model_path} has inputs {self.sessions.input_names}; expected a subset of "
                              f"{sorted(expected)}")

    def _logits(self, batch: EncodedBatch) -> np.ndarray:
        out = self.sessions.run({"input_ids": batch.input_ids, "attention_mask": batch.attention_mask,
                                 "token_type_ids": batch.token_type_ids})
        return np.asarray(out, dtype=np.float64).reshape(len(batch.index), -1)[:, 0]

    def _run_batches(self, batches: Sequence[EncodedBatch]) -> list[tuple[np.ndarray, float]]:
        return self.sessions.map(self._timed_logits, batches)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "variant": self.variant, "threads": self.threads, "batch_size": self.batch_size}
