"""The cross-encoder network: a BERT encoder with a segment-pooling relevance head (needs torch).

One forward pass over ``[CLS] query [SEP] chunk [SEP]``. The head mean-pools the query tokens and the
chunk tokens separately and scores

    logit = scale * cos(q, c) + w . [mean(all), q * c] + bias

with ``w`` starting at zero, so an untrained model is already a bi-encoder-like cosine scorer (the
base all-MiniLM-L6-v2 weights were trained for exactly that similarity) and fine-tuning adds the
cross-attention evidence on top. A plain [CLS] head starts from nothing and, on this project's CPU
budget, learned less than that cosine baseline; see the README's training notes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from models.deps import require
from models.errors import ConfigError

__all__ = ["HEAD_CONFIG", "WEIGHTS_FILE", "build_cross_encoder", "check_positions", "check_student_layers",
           "load_cross_encoder", "save_cross_encoder"]

torch = require("torch", "train")
transformers = require("transformers", "train")

WEIGHTS_FILE = "model.safetensors"
HEAD_CONFIG = "head_config.json"


class SegmentPoolingCrossEncoder(torch.nn.Module):  # type: ignore[name-defined]
    """Encoder + segment-pooling head; returns logits of shape (batch, 1)."""

    def __init__(self, encoder: Any, init_scale: float = 10.0, init_bias: float = -4.0) -> None:
        super().__init__()
        self.encoder = encoder
        hidden = encoder.config.hidden_size
        self.scale = torch.nn.Parameter(torch.tensor(float(init_scale)))
        self.bias = torch.nn.Parameter(torch.tensor(float(init_bias)))
        self.cross = torch.nn.Linear(2 * hidden, 1, bias=False)
        torch.nn.init.zeros_(self.cross.weight)

    def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
        hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids).last_hidden_state
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        types = token_type_ids.unsqueeze(-1).to(hidden.dtype)
        not_cls = torch.ones_like(mask)
        not_cls[:, 0] = 0
        q_mask = mask * (1 - types) * not_cls
        c_mask = mask * types
        q = (hidden * q_mask).sum(1) / q_mask.sum(1).clamp(min=1.0)
        c = (hidden * c_mask).sum(1) / c_mask.sum(1).clamp(min=1.0)
        everything = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)
        cosine = (torch.nn.functional.normalize(q, dim=-1) * torch.nn.functional.normalize(c, dim=-1)).sum(-1)
        features = torch.cat([everything, q * c], dim=-1)
        return (self.scale * cosine + self.cross(features)[:, 0] + self.bias).unsqueeze(-1)

    def head_parameters(self) -> list[Any]:
        return [self.scale, self.bias, *self.cross.parameters()]


def build_cross_encoder(base_dir: str | Path, layers: int = 0) -> SegmentPoolingCrossEncoder:
    """A fresh model on the pretrained encoder in ``base_dir`` (local files only); ``layers`` > 0 keeps only
    the encoder's first ``layers`` layers (a smaller, faster student); more layers than the base has is a
    :class:`ConfigError` (transformers would add randomly initialised ones)."""
    check_student_layers(base_dir, layers)
    options = {"num_hidden_layers": layers} if layers else {}
    encoder = transformers.AutoModel.from_pretrained(str(base_dir), local_files_only=True, **options)
    return SegmentPoolingCrossEncoder(encoder)


def check_student_layers(base_dir: str | Path, layers: int) -> None:
    """Refuse a student of more layers than the base model in ``base_dir`` has (0 keeps them all)."""
    available = transformers.AutoConfig.from_pretrained(str(base_dir), local_files_only=True).num_hidden_layers
    if layers > available:
        raise ConfigError(f"layers={layers}, but the base model {base_dir} has {available} layers: a student keeps "
                          f"its first N, so choose 1 to {available} (0: all of them)")


def check_positions(encoder_config: Any, max_length: int, where: str) -> None:
    """Refuse a ``max_length`` beyond the positions the encoder has learnt (a longer input fails inside the model);
    longer texts are read in overlapping windows of it instead."""
    positions = int(getattr(encoder_config, "max_position_embeddings", max_length))
    if max_length > positions:
        raise ConfigError(f"max_length={max_length}, but {where} has {positions} positions: choose at most "
                          f"{positions} (longer texts are read in overlapping windows of max_length tokens)")


def save_cross_encoder(model: SegmentPoolingCrossEncoder, out: str | Path) -> list[str]:
    """Write config.json, head_config.json and model.safetensors; returns the file names."""
    safetensors = require("safetensors.torch", "train")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model.encoder.config.save_pretrained(out)
    (out / HEAD_CONFIG).write_text(json.dumps({"head": "segment_pooling_cosine", "version": 1}) + "\n",
                                   encoding="utf-8")
    state = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    safetensors.save_file(state, str(out / WEIGHTS_FILE))
    return ["config.json", HEAD_CONFIG, WEIGHTS_FILE]


def load_cross_encoder(path: str | Path) -> SegmentPoolingCrossEncoder:
    """Rebuild a saved model from its directory."""
    safetensors = require("safetensors.torch", "train")
    path = Path(path)
    config = transformers.AutoConfig.from_pretrained(str(path), local_files_only=True)
    model = SegmentPoolingCrossEncoder(transformers.AutoModel.from_config(config))
    model.load_state_dict(safetensors.load_file(str(path / WEIGHTS_FILE)))
    return model.eval()
