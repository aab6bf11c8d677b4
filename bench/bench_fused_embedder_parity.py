"""How much the int8 embedder moves a fused bundle's verdicts, against the same embedder in torch fp32.

``crag fuse`` measures int8 parity of the cross-encoder inside the fused score (both sides read the int8 embedder's
cosine). A bundle that fuses a fine-tuned embedder with a large cosine share leans mostly on the embedder, so its
own quantisation matters more: here the bundle's fused verdicts with its int8 cosine are set against the same
verdicts with the cosine of the fp32 model it was exported from (``crag export-embedder --source``), the
cross-encoder's logits held fixed. Both read the first window of each text (256 tokens), the probe is every n-th
model-decided pair of the fusion data (about ``--probe-pairs``), as the fuse gate's probe is.

    python bench/bench_fused_embedder_parity.py --model default --source runs/v3/embedder-tuned \
        --data runs/v3/fuse.jsonl --json bench/results_fused_embedder_parity_default.json
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_finetuned_biencoder import cosines as torch_cosines
from bench.output import emit
from grader.embedder import OnnxMiniLMEmbedder
from grader.factory import load_grader
from grader.fusion import cosines
from training.data import load_pairs, model_decided


def torch_fp32_cosines(source: Path, pairs: list[tuple[str, str]]) -> np.ndarray:
    """The cosines of the fp32 model an embedder was exported from, read as the shipped embedder reads (256 tokens,
    mean pooling)."""
    import torch
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(str(source), local_files_only=True)
    encoder = transformers.AutoModel.from_pretrained(str(source), local_files_only=True).eval()
    return torch_cosines(torch, tokenizer, encoder, pairs)


def verdicts(grader: Any, logits: np.ndarray) -> list[Any]:
    return [grader.policy.verdict(float(p)) for p in grader.probabilities(logits)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="a fused bundle")
    parser.add_argument("--source", type=Path, required=True, help="the fp32 model folder its embedder came from")
    parser.add_argument("--data", type=Path, required=True, help="labelled pairs (the fusion data)")
    parser.add_argument("--probe-pairs", type=int, default=1000)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    grader = load_grader(args.model)
    data, _ = model_decided(load_pairs(args.data))
    probe = [(p.query, p.text) for p in data.pairs[:: max(1, len(data.pairs) // args.probe_pairs)]]
    ce = np.asarray(grader.score_pairs(probe).fusion_inputs[0])
    head = grader.fusion
    int8 = cosines(OnnxMiniLMEmbedder(Path(grader.bundle.path) / head.embedder, batch_size=1), probe)
    fp32 = torch_fp32_cosines(args.source, probe)
    ref, got = verdicts(grader, head.combine(ce, fp32)), verdicts(grader, head.combine(ce, int8))
    diff = np.abs(int8 - fp32)
    emit({"model": str(args.model), "source": str(args.source), "probe_pairs": len(probe),
          "max_cosine_diff": float(diff.max()), "mean_cosine_diff": float(diff.mean()),
          "max_fused_logit_diff": float(head.weights[1] * diff.max()),
          "verdict_flip_share": sum(a[0] is not b[0] for a, b in zip(ref, got, strict=True)) / len(probe),
          "decision_change_share": sum(a != b for a, b in zip(ref, got, strict=True)) / len(probe)}, args.json)


if __name__ == "__main__":
    main()
