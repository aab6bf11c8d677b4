"""PyTorch backend: the reference implementation (parity checks, GPU). Needs the ``train`` extra."""

from __future__ import annotations

from typing import Any

import numpy as np

from grader.cross_encoder import DEFAULT_CACHE_PAIRS, DEFAULT_MAX_WINDOWS, CrossEncoderGrader
from grader.encoding import EncodedBatch
from grader.policy import ThresholdPolicy
from models.bundle import Bundle
from models.deps import require
from models.errors import BundleError, ConfigError

__all__ = ["TorchGrader"]


class TorchGrader(CrossEncoderGrader):
    """Cross-encoder grader running a transformers checkpoint with the same interface as the ONNX one."""

    backend = "torch"

    def __init__(
        self,
        bundle: Bundle,
        *,
        device: str = "cpu",
        threads: int | None = None,
        batch_size: int = 32,
        policy: ThresholdPolicy | None = None,
        max_windows: int = DEFAULT_MAX_WINDOWS,
        cache_pairs: int = DEFAULT_CACHE_PAIRS,
        cross_encoder: bool | None = None,
    ) -> None:
        if bundle.manifest.backend != "torch":
            raise BundleError(
                f"bundle {bundle.path} holds an {bundle.manifest.backend} model; the torch backend needs a "
                "trained checkpoint directory written by `crag train`"
            )
        super().__init__(bundle, batch_size=batch_size, policy=policy, max_windows=max_windows,
                         cache_pairs=cache_pairs, threads=threads, cross_encoder=cross_encoder)
        torch = require("torch", "train")
        from grader.torch_model import load_cross_encoder

        if threads is not None:
            if threads < 1:
                raise ConfigError(f"threads must be a positive int, got {threads!r}")
            torch.set_num_threads(threads)
        self._torch = torch
        self.device = device
        try:
            self.model = load_cross_encoder(bundle.path)
        except (OSError, ValueError, RuntimeError) as exc:
            raise BundleError(f"cannot load the torch model in {bundle.path}: {exc}") from exc
        self.model.to(device).eval()

    def _logits(self, batch: EncodedBatch) -> np.ndarray:
        torch = self._torch
        with torch.inference_mode():
            out = self.model(
                input_ids=torch.from_numpy(batch.input_ids).to(self.device),
                attention_mask=torch.from_numpy(batch.attention_mask).to(self.device),
                token_type_ids=torch.from_numpy(batch.token_type_ids).to(self.device),
            )
        return np.asarray(out[:, 0].float().cpu().numpy(), dtype=np.float64)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "device": self.device}
