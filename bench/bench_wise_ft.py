"""Weight-space ensembling (WiSE-FT, Wortsman et al. 2022) of the default's cross-encoder with its base model.

Issue 10 asks the grader to keep what its base model knows. Fine-tuning wore away all-MiniLM-L6-v2's topical
signal; WiSE-FT is the standard remedy for that loss out of domain: interpolate the weights,
``theta(alpha) = (1 - alpha) * theta_base + alpha * theta_finetuned``, no training. This script:

1. rebuilds the shipped default's fine-tuned cross-encoder in torch from its int8 ONNX file (per-channel int8
   weights dequantised; each quantised matrix matched to its torch parameter by correlation with the base
   weights) and checks it against the int8 bundle's own logits;
2. for each ``--alpha``, scores the fusion data (``<work>/fuse.jsonl``) and the held-out queries
   (``<work>/heldout.jsonl``) with the interpolated model (torch fp32, windows as the grader reads them);
3. chooses the fusion with the frozen cosine on the fusion data exactly as ``crag fuse`` does and reports, per
   domain, held-out AUROC beside the bi-encoder's, plus the fusion data's leave-one-domain-out figures.

  python bench/bench_wise_ft.py --work runs/v3 --alpha 0 0.25 0.5 0.75 1 --json bench/results_wise_ft.json

``--alpha A --save-to DIR`` only writes that interpolated model as a torch bundle (then ``crag export`` and
``crag fuse`` make a shippable bundle of it, as the README says).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def dequantised_initialisers(onnx_path: Path) -> dict[str, np.ndarray]:
    """Every float or int8-quantised initialiser of an ONNX file, as float32 (quantised ones under their
    base name, without the ``_quantized`` suffix)."""
    import onnx
    from onnx import numpy_helper

    from training.start_weights import dequantised

    model = onnx.load(str(onnx_path))
    return dequantised({i.name: numpy_helper.to_array(i) for i in model.graph.initializer})


def finetuned_state(base_state: dict, onnx_path: Path) -> tuple[dict, dict[str, float]]:
    """The fine-tuned state dict rebuilt from the int8 ONNX file; returns it and each matrix's correlation
    with the base parameter it was matched to (a wrong match would show as ~0)."""
    import torch

    params = dequantised_initialisers(onnx_path)
    state = {k: v.clone() for k, v in base_state.items()}
    matched: dict[str, float] = {}
    free = {k for k, v in base_state.items() if v.ndim == 2 and k.endswith(".weight") and "embeddings" not in k
            and "pooler" not in k}  # the head reads last_hidden_state: the pooler is not in the graph
    for name, value in params.items():
        if name in state:
            state[name] = torch.from_numpy(value.copy()).reshape(state[name].shape)
            continue
        if name.startswith("onnx::MatMul"):  # [in, out] in ONNX, [out, in] in torch
            weight = value.T
            best, best_corr = None, -1.0
            for key in free:
                if tuple(base_state[key].shape) != weight.shape:
                    continue
                ref = base_state[key].numpy().ravel()
                # the head's cross weight starts at zero: no correlation to see, its shape alone matches it
                corr = float(np.corrcoef(ref, weight.ravel())[0, 1]) if ref.std() > 0 else 0.0
                if corr > best_corr:
                    best, best_corr = key, corr
            if best is None:
                raise SystemExit(f"no torch parameter of shape {weight.shape} for {name}")
            free.discard(best)
            state[best] = torch.from_numpy(np.ascontiguousarray(weight))
            matched[best] = round(best_corr, 4)
            continue
        raise SystemExit(f"ONNX initialiser {name} has no torch parameter")
    if free:
        raise SystemExit(f"torch parameters without an ONNX matrix: {sorted(free)}")
    return state, matched


def wise_state(base_state: dict, tuned_state: dict, alpha: float | Callable[[str], float]) -> dict:
    """WiSE-FT: ``(1 - a) * base + a * fine-tuned`` for every float parameter (others from ``tuned_state``);
    ``alpha`` is one weight, or each parameter's weight from its name."""
    weight_of = alpha if callable(alpha) else (lambda _key: alpha)
    mixed = {}
    for key, base in base_state.items():
        a = weight_of(key)
        mixed[key] = (1.0 - a) * base + a * tuned_state[key] if base.is_floating_point() else tuned_state[key]
    return mixed


def write_torch_bundle(model, source, out: Path, *, alpha: float | str, probe: Path,
                       finetuned: Path | None = None) -> Path:
    """``model`` as a torch bundle in ``out`` (for ``crag export``): the manifest is the fused ``source``
    bundle's, without its fusion, calibration evidence or ONNX files, plus how the weights were made."""
    from grader.torch_model import save_cross_encoder
    from models.bundle import write_manifest

    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    names = save_cross_encoder(model, out)
    shutil.copy(source.file("tokenizer.json"), out / "tokenizer.json")
    shutil.copy(probe, out / "probe.jsonl")
    manifest = source.manifest.model_dump(exclude={"files", "model_files", "parity", "input_names", "versions"})
    manifest.update(backend="torch", model_files={"torch": "model.safetensors"}, fusion={}, metrics={})
    trained_by = (json.loads((finetuned / "manifest.json").read_text(encoding="utf-8"))["training"]
                  if finetuned else manifest["training"])
    training = {k: v for k, v in trained_by.items()
                if k not in ("fused_on", "recalibrated_on", "recalibrated_with", "weight_ensemble")}
    training["weight_ensemble"] = {
        "method": "WiSE-FT: (1 - alpha) * base + alpha * fine-tuned weights", "alpha": alpha,
        "base": "default-base (all-MiniLM-L6-v2 with the untrained segment-pooling head)",
        "fine_tuned": (f"the checkpoint {finetuned.name} (float32)" if finetuned else
                       f"the cross-encoder of {source.path.name} (its int8 weights, dequantised)"),
        "command": (f"python bench/bench_wise_ft.py --finetuned <{finetuned.name}> " if finetuned else
                    f"python bench/bench_wise_ft.py --model <{source.path.name} bundle it was made from> ")
                   + (f"--alpha {alpha:g}" if isinstance(alpha, float) else f"--alpha --layerwise {alpha}")
                   + " --save-to <dir>"}
    manifest["training"] = training
    write_manifest(out, manifest, [*names, "tokenizer.json", "probe.jsonl"])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("runs/v3"))
    parser.add_argument("--model", default="default", help="the fused int8 bundle whose cross-encoder is rebuilt")
    parser.add_argument("--finetuned", type=Path, default=None,
                        help="a fine-tuned float32 checkpoint folder (config.json, head_config.json, "
                             "model.safetensors, manifest.json; e.g. from bench/gpu_recipe_sweep.py --join) to "
                             "interpolate instead of --model's rebuilt cross-encoder; --model then only lends its "
                             "manifest and max_windows")
    parser.add_argument("--probe", type=Path, default=None,
                        help="parity-probe pairs for a later `crag export` (default: 1,000 of <work>/fuse.jsonl)")
    parser.add_argument("--alpha", type=float, nargs="*", default=[0.0, 0.25, 0.5, 0.75, 1.0])
    parser.add_argument("--layerwise", nargs="+", default=[], metavar="K:LOW:HIGH",
                        help="layer-wise variants: embeddings and encoder layers below K interpolated at LOW, the "
                             "layers from K on and the head at HIGH (e.g. 3:0.5:1)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--limit", type=int, default=0, help="pairs per domain (0 = all)")
    parser.add_argument("--save-to", type=Path, default=None,
                        help="only write the model of the (single) --alpha as a torch bundle here; no scoring")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    import torch

    from grader.embedder import EMBEDDER_DIR, OnnxMiniLMEmbedder
    from grader.factory import load_grader
    from grader.fusion import cosines
    from grader.torch_model import build_cross_encoder
    from training.base_models import resolve_base
    from training.data import load_pairs, write_pairs
    from training.fusion import choose_fusion
    from training.metrics import auroc, binary_labels
    from training.recipe import model_decided_by_domain

    torch.set_num_threads(args.threads)
    shipped = load_grader(args.model)
    base = build_cross_encoder(resolve_base("default-base"))
    base_state = {k: v.detach().clone() for k, v in base.state_dict().items()}
    if args.finetuned:
        from grader.torch_model import load_cross_encoder

        tuned_state = {k: v.detach().clone() for k, v in load_cross_encoder(args.finetuned).state_dict().items()}
        lowest = None
    else:
        tuned_state, matched = finetuned_state(base_state, shipped.bundle.file("model.int8.onnx"))
        lowest = min(v for k, v in matched.items() if k != "cross.weight")
        print(f"rebuilt {len(matched)} matrices; lowest correlation with the base weights {lowest}",
              flush=True)

    def alpha_of(key: str, spec: str | float) -> float:
        """The interpolation weight of one parameter: uniform, or by layer for a K:LOW:HIGH variant."""
        if isinstance(spec, float):
            return spec
        split, low, high = spec.split(":")
        if key.startswith("encoder.embeddings."):
            return float(low)
        if ".layer." in key:
            return float(low) if int(key.split(".layer.")[1].split(".")[0]) < int(split) else float(high)
        return float(high)

    def interpolated(spec: str | float) -> dict:
        return wise_state(base_state, tuned_state, lambda key: alpha_of(key, spec))

    scratch = Path("/tmp/crag-wise-ft")
    scratch.mkdir(parents=True, exist_ok=True)
    probe = args.probe
    if probe is None:
        fusion_pairs = load_pairs(args.work / "fuse.jsonl").pairs
        probe = scratch / "probe.jsonl"
        write_pairs(fusion_pairs[:: max(1, len(fusion_pairs) // 1000)], probe)
    if args.save_to:
        specs = [*args.alpha, *args.layerwise]
        if len(specs) != 1:
            raise SystemExit("--save-to writes one model: give exactly one --alpha (or one --layerwise and --alpha "
                             "with no value)")
        base.load_state_dict(interpolated(specs[0]))
        print(write_torch_bundle(base, shipped.bundle, args.save_to, alpha=specs[0], probe=probe,
                                 finetuned=args.finetuned))
        return

    fuse = model_decided_by_domain(args.work / "fuse.jsonl", args.limit)
    held = model_decided_by_domain(args.work / "heldout.jsonl", args.limit)
    texts_f = [(p.query, p.text) for _, p in fuse]
    texts_h = [(p.query, p.text) for _, p in held]
    y_f = binary_labels([p for _, p in fuse])
    y_h = binary_labels([p for _, p in held])
    g_f = [d for d, _ in fuse]
    g_h = np.asarray([d for d, _ in held])
    embedder = OnnxMiniLMEmbedder(EMBEDDER_DIR, batch_size=1)
    start = time.perf_counter()
    cos_f = cosines(embedder, texts_f, max_windows=shipped.max_windows)
    cos_h = cosines(embedder, texts_h, max_windows=shipped.max_windows)
    print(f"cosines of {len(texts_f) + len(texts_h)} pairs in {time.perf_counter() - start:.0f} s", flush=True)

    results = {"model": str(args.finetuned or args.model), "work": str(args.work), "matched_min_corr": lowest,
               "fusion_pairs": len(fuse), "heldout_pairs": len(held), "alphas": {}}
    for alpha in [*args.alpha, *args.layerwise]:
        name = f"{alpha:g}" if isinstance(alpha, float) else f"layers {alpha}"
        base.load_state_dict(interpolated(alpha))
        bundle = write_torch_bundle(base, shipped.bundle, scratch / f"a{name.replace(' ', '-')}", alpha=alpha,
                                    probe=probe, finetuned=args.finetuned)
        grader = load_grader(bundle, backend="torch", threads=args.threads)
        start = time.perf_counter()
        ce_f = grader.score_pairs(texts_f).logits
        ce_h = grader.score_pairs(texts_h).logits
        seconds = time.perf_counter() - start
        choice = choose_fusion(ce_f, cos_f, y_f, g_f)
        fused_h = choice.head.combine(ce_h, cos_h)
        per_domain = {}
        for d in sorted(set(g_h.tolist())):
            m = g_h == d
            per_domain[d] = {"pairs": int(m.sum()), "auroc_biencoder": auroc(y_h[m], cos_h[m]),
                             "auroc_cross_encoder": auroc(y_h[m], ce_h[m]), "auroc_fused": auroc(y_h[m], fused_h[m])}
        results["alphas"][name] = {
            "cosine_share": choice.cosine_share, "seconds": round(seconds, 1), "heldout": per_domain,
            "fusion_per_domain": choice.per_group, "leave_one_domain_out": choice.leave_one_out}
        gains = {d: r["auroc_fused"] - r["auroc_biencoder"] for d, r in per_domain.items()}
        print(f"alpha {name}: share {choice.cosine_share}  held-out fused - bi-encoder: "
              + "  ".join(f"{d} {v:+.3f}" for d, v in gains.items())
              + f"  (min {min(gains.values()):+.3f}, {seconds:.0f} s)", flush=True)
        print("    CE alone: " + "  ".join(f"{d} {r['auroc_cross_encoder']:.3f}" for d, r in per_domain.items())
              + "   LODO: " + "  ".join(f"{d} {r['auroc_fused'] - r['auroc_biencoder']:+.3f}"
                                      for d, r in choice.leave_one_out.items()), flush=True)
        if args.json:
            args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
