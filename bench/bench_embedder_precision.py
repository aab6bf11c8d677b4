"""What int8 costs the frozen bi-encoder's cosine, per held-out domain, and which quantisation keeps it.

The fused default reads all-MiniLM-L6-v2's cosine through an int8 ONNX embedder. Its export parity gate only
asks for cosine >= 0.97 between int8 and fp32 sentence vectors (the shipped one has 0.991 at worst on 8
texts); this measures what that means for ranking: cosine AUROC on the recipe's held-out queries for

- ``st-fp32``: sentence-transformers in torch fp32, the untrained yardstick of the model card;
- ``onnx-fp32``: the same graph in onnxruntime, fp32;
- ``int8-s8``: ``--s8``, when given (the embedder shipped before 2026-12-04, signed 8-bit weights);
- ``int8-matmul``: dynamic int8 of the MatMul weights only (embedding tables stay fp32);
- ``int8-matmul-u8``: the same with unsigned 8-bit weights (no int16 saturation, below);
- ``int8-u8``: per-channel unsigned 8-bit weights (``training.export.quantize_weights``: u8 x u8, no int16
  saturation on CPUs without AVX512-VNNI, where u8 x s8 saturates);

and the time per text of each (one thread, the same texts, variants interleaved round by round). With
``--fused`` it also re-chooses the default's fusion (its int8 cross-encoder logits, each variant's cosine) on the
fusion data as ``crag fuse`` does and reports the fused held-out AUROC per variant.

``--source`` measures a fine-tuned model (``crag train-embedder``) instead of the untrained one: with the folder
the shipped embedder was exported from, ``int8-u8`` is the shipped file.

  python bench/bench_embedder_precision.py --work runs/v3 --json bench/results_embedder_precision.json
  python bench/bench_embedder_precision.py --work runs/v3 --source runs/v3/embedder-tuned --fused --threads 2 \
      --json bench/results_embedder_precision_tuned.json
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def variant_dir(tmp: Path, name: str, model_file: Path, tokenizer: Path) -> Path:
    """An embedder bundle directory around ``model_file`` (manifest names the file; not verified)."""
    out = tmp / name
    out.mkdir()
    shutil.copy(model_file, out / "model.onnx")
    shutil.copy(tokenizer, out / "tokenizer.json")
    (out / "manifest.json").write_text(json.dumps({"kind": "embedder", "name": f"all-MiniLM-L6-v2/{name}",
                                                   "dim": 384, "max_length": 256, "model_file": "model.onnx"}),
                                       encoding="utf-8")
    return out


def fused_by_variant(work: Path, embedders: dict) -> dict:
    """Held-out AUROC of the default's cross-encoder fused with each embedder's (windowed) cosine, the fusion
    chosen on ``<work>/fuse.jsonl`` for each, as ``crag fuse`` chooses it."""
    from grader.factory import load_grader
    from grader.fusion import cosines
    from training.fusion import choose_fusion
    from training.metrics import auroc, binary_labels
    from training.recipe import model_decided_by_domain

    grader = load_grader("default")

    def split(path: Path) -> tuple[list, list[str]]:
        rows = model_decided_by_domain(path)
        return [p for _, p in rows], [d for d, _ in rows]

    (fuse, g_f), (held, g_h) = split(work / "fuse.jsonl"), split(work / "heldout.jsonl")
    t_f, t_h = [(p.query, p.text) for p in fuse], [(p.query, p.text) for p in held]
    ce_f, ce_h = grader.score_pairs(t_f).fusion_inputs[0], grader.score_pairs(t_h).fusion_inputs[0]
    y_f, y_h, g_h_arr = binary_labels(fuse), binary_labels(held), np.asarray(g_h)
    out = {}
    for name, embedder in embedders.items():
        cos_f = cosines(embedder, t_f, max_windows=grader.max_windows)
        cos_h = cosines(embedder, t_h, max_windows=grader.max_windows)
        choice = choose_fusion(ce_f, cos_f, y_f, g_f)
        fused = choice.head.combine(ce_h, cos_h)
        out[name] = {"cosine_share": choice.cosine_share,
                     "heldout": {d: auroc(y_h[g_h_arr == d], fused[g_h_arr == d]) for d in sorted(set(g_h))},
                     "leave_one_domain_out": {d: r["auroc_fused"] for d, r in choice.leave_one_out.items()}}
        print(f"fused with {name}: share {choice.cosine_share} held-out "
              + "  ".join(f"{d} {v:.4f}" for d, v in out[name]["heldout"].items()), flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("runs/v3"))
    parser.add_argument("--timing-texts", type=int, default=120)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--fused", action="store_true", help="also the fused default's AUROC with each variant")
    parser.add_argument("--s8", type=Path, help="also an int8 embedder file with signed weights (the one shipped "
                                                "before 2026-12-04, from git: see the README)")
    parser.add_argument("--source", type=Path, help="a fine-tuned model folder (crag train-embedder) to quantise "
                                                    "instead of the untrained all-MiniLM-L6-v2")
    parser.add_argument("--threads", type=int, default=1, help="sessions side by side while scoring (timing: one)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    import transformers
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from grader.embedder import EMBEDDER_DIR, OnnxMiniLMEmbedder
    from grader.fusion import cosines
    from training.base_models import resolve_base
    from training.baseline import biencoder_scores
    from training.export import quantize_weights
    from training.export_embedder import export_token_embeddings
    from training.metrics import auroc, binary_labels
    from training.recipe import domain_sets

    sets = {f"test:{d}": ps.pairs for d, ps in domain_sets(args.work / "heldout.jsonl").items()}
    novel = domain_sets(args.work / "fuse.jsonl").get("web_novel")
    if novel is not None:
        sets["fusion data:web_novel"] = novel.pairs
    base = args.source or resolve_base("default-base")
    results: dict = {"work": str(args.work), "source": str(base), "auroc": {}, "ms_per_text": {}}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        fp32 = tmp / "fp32.onnx"
        model = transformers.AutoModel.from_pretrained(str(base), local_files_only=True).eval()
        export_token_embeddings(model, fp32)
        quantize_dynamic(str(fp32), str(tmp / "matmul.onnx"), weight_type=QuantType.QInt8, per_channel=True,
                         op_types_to_quantize=["MatMul"])
        quantize_dynamic(str(fp32), str(tmp / "matmul-u8.onnx"), weight_type=QuantType.QUInt8, per_channel=True,
                         op_types_to_quantize=["MatMul"])
        quantize_weights(fp32, tmp / "u8.onnx")
        tokenizer = EMBEDDER_DIR / "tokenizer.json"
        files = {"onnx-fp32": fp32, "int8-matmul": tmp / "matmul.onnx", "int8-matmul-u8": tmp / "matmul-u8.onnx",
                 "int8-u8": tmp / "u8.onnx",
                 **({"int8-s8": args.s8} if args.s8 else {})}
        embedders = {name: OnnxMiniLMEmbedder(variant_dir(tmp, name, path, tokenizer), threads=args.threads,
                                              verify=False) for name, path in files.items()}
        for set_name, pairs in sets.items():
            y = binary_labels(pairs)
            texts = [(p.query, p.text) for p in pairs]
            row = {"pairs": len(pairs)}
            if args.source is None:  # the untrained model in sentence-transformers: the yardstick of the model card
                row["st-fp32"] = auroc(y, biencoder_scores(pairs))
            for name, embedder in embedders.items():
                row[name] = auroc(y, cosines(embedder, texts, max_windows=1))
            results["auroc"][set_name] = row
            print(set_name, "  ".join(f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items()),
                  flush=True)
            if args.json:
                args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
        if args.fused:
            results["fused"] = fused_by_variant(args.work, embedders)
            if args.json:
                args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
        sample = sorted({p.text for pairs in sets.values() for p in pairs})[:: 7][: args.timing_texts]
        times: dict[str, list[float]] = {name: [] for name in embedders}
        for _ in range(args.rounds):
            for name, embedder in embedders.items():
                start = time.perf_counter()
                for text in sample:
                    embedder._embed_batch([text], [0])  # no cache here: the variants' manifests list no hashes
                times[name].append(1000 * (time.perf_counter() - start) / len(sample))
        results["ms_per_text"] = {name: round(statistics.median(v), 2) for name, v in times.items()}
        results["timing_texts"] = len(sample)
        print("ms per text (median of rounds):", results["ms_per_text"], flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
