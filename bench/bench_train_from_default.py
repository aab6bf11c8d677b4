"""Few labels of a new domain: fine-tune from the base model, or from the shipped default's cross-encoder?

`crag train` starts from the untrained all-MiniLM-L6-v2 and, on a few hundred labels of a new domain, ranks
that domain below the shipped default (`bench/train_vs_default.py`: 0.754 against 0.820 AUROC on consumer
health). This compares, on the same split by query (train queries with their own validation split; other
queries to test), interleaved in one run:

- ``default``: the shipped fused bundle as it is;
- ``base``: `crag train` as it was (from the untrained base, learning rate 4e-5), alone and fused with the
  shipped cosine by a head refitted on the training pairs;
- ``from-default``: the default's cross-encoder (rebuilt in torch from its int8 file) fine-tuned on the same
  pairs at each ``--lr``, scored through the shipped fusion head, and weight-space ensembled back towards
  where it started (WiSE-FT) at each ``--alpha``.

  python bench/bench_train_from_default.py --data ../shared/data/covidfaq/pairs.jsonl --work /tmp/tfd \\
      --json bench/results_train_from_default.json
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def result_steps(out: Path) -> tuple[int, float]:
    """Steps and seconds the run took, from its manifest."""
    training = json.loads((out / "manifest.json").read_text(encoding="utf-8"))["training"]
    return int(training.get("steps", -1)), float(training.get("seconds", -1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, nargs="+", required=True)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--train-queries", type=int, default=120)
    parser.add_argument("--test-queries", type=int, default=80)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--variants", nargs="+", default=["base:4e-5:1:0", "base:4e-5:3:10", "default:2e-5:3:10"],
                        metavar="START:LR:EPOCHS:EVAL_EVERY[:FREEZE]",
                        help="start from the untrained base or the default's cross-encoder; eval_every 0 = each "
                             "epoch; FREEZE: embeddings and that many lower layers left untrained (default 0)")
    parser.add_argument("--alpha", type=float, nargs="+", default=[1.0],
                        help="WiSE-FT weights of the fine-tuned model against where it started")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    import torch
    from bench_wise_ft import finetuned_state, wise_state

    from grader.encoding import PairEncoder
    from grader.factory import load_grader
    from grader.torch_model import build_cross_encoder, load_cross_encoder, save_cross_encoder
    from training.base_models import resolve_base
    from training.data import PairSet, load_pairs
    from training.finetune import TrainConfig, pair_logits, train_grader
    from training.metrics import auroc, binary_labels
    from training.splits import group_split

    torch.set_num_threads(2)
    shipped = load_grader("default")
    head = shipped.fusion
    base_dir = resolve_base("default-base")
    base = build_cross_encoder(base_dir)
    base_state = {k: v.detach().clone() for k, v in base.state_dict().items()}
    start_state, _ = finetuned_state(base_state, shipped.bundle.file("model.int8.onnx"))
    start_dir = args.work / "default-ce"
    if not (start_dir / "model.safetensors").exists():
        start = build_cross_encoder(base_dir)
        start.load_state_dict(start_state)
        start_dir.mkdir(parents=True, exist_ok=True)
        save_cross_encoder(start, start_dir)
    encoder = PairEncoder(base_dir / "tokenizer.json", 256)

    def fused_auroc(ce: np.ndarray, cos: np.ndarray, labels: np.ndarray, w: tuple[float, float]) -> float:
        return float(auroc(labels, w[0] * ce + w[1] * cos))

    def refit_head(ce: np.ndarray, cos: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
        from sklearn.linear_model import LogisticRegression

        fit = LogisticRegression(C=1.0).fit(np.column_stack([ce, cos]), labels)
        return float(fit.coef_[0][0]), float(fit.coef_[0][1])

    report: dict = {"variants": args.variants, "alpha": args.alpha, "runs": []}
    for data in args.data:
        pairs = load_pairs(data).pairs
        for seed in args.seeds:
            queries = sorted({p.query_id or p.query for p in pairs})
            random.Random(seed).shuffle(queries)
            train_q = set(queries[: args.train_queries])
            test_q = set(queries[args.train_queries: args.train_queries + args.test_queries])
            train_pairs = [p for p in pairs if (p.query_id or p.query) in train_q]
            test_pairs = [p for p in pairs if (p.query_id or p.query) in test_q]
            tr, va = group_split(train_pairs, test_size=0.15, by="query", seed=13)
            train, val = PairSet(tr, path=str(data)), PairSet(va, path=str(data))
            labels = binary_labels(test_pairs)
            tr_labels = binary_labels(train_pairs)
            test_tuples = [(p.query, p.text) for p in test_pairs]
            train_tuples = [(p.query, p.text) for p in train_pairs]
            got = shipped.score_pairs(test_tuples)
            ce0, cos = got.fusion_inputs
            tr_got = shipped.score_pairs(train_tuples)
            tr_cos = tr_got.fusion_inputs[1]
            w_shipped = (head.weights[0], head.weights[1])
            row = {"data": str(data), "seed": seed, "train_pairs": len(train_pairs), "test_pairs": len(test_pairs),
                   "default": fused_auroc(ce0, cos, labels, w_shipped), "cosine": float(auroc(labels, cos)),
                   "default_ce_alone": float(auroc(labels, ce0))}
            print(json.dumps(row), flush=True)
            for spec in args.variants:
                name, lr_text, epochs_text, every_text, *freeze_text = spec.split(":")
                init = str(start_dir) if name == "default" else None
                lr, epochs, every = float(lr_text), float(epochs_text), int(every_text)
                freeze = int(freeze_text[0]) if freeze_text else 0
                out = args.work / f"{data.parent.name}-s{seed}-q{args.train_queries}-{spec.replace(':', '-')}"
                if not (out / "manifest.json").exists():
                    t0 = time.perf_counter()
                    cfg = TrainConfig(init=init, learning_rate=lr, epochs=epochs, eval_every=every, patience=3,
                                      progress=False, name=out.name, threads=2, freeze_layers=freeze)
                    result = train_grader(train, val, out, cfg)
                    print(f"trained {out.name}: {result.steps} steps, {time.perf_counter() - t0:.0f} s, "
                          f"val {result.best_val_auroc:.4f}", flush=True)
                tuned = load_cross_encoder(out)
                tuned_state = {k: v.detach().clone() for k, v in tuned.state_dict().items()}
                origin = base_state if init is None else start_state
                for alpha in ([1.0] if init is None else args.alpha):
                    model = load_cross_encoder(out)
                    model.load_state_dict(wise_state(origin, tuned_state, alpha))
                    model.eval()
                    ce = pair_logits(model, encoder, test_pairs, "cpu")
                    tr_ce = pair_logits(model, encoder, train_pairs, "cpu")
                    w_refit = refit_head(tr_ce, tr_cos, tr_labels)
                    steps, seconds = result_steps(out)
                    entry = {"variant": spec, "steps": steps, "train_seconds": seconds, "alpha": alpha,
                             "ce_alone": float(auroc(labels, ce)),
                             "fused_shipped_head": fused_auroc(ce, cos, labels, w_shipped),
                             "fused_refit_head": fused_auroc(ce, cos, labels, w_refit), "refit_w": w_refit}
                    row.setdefault("variants", []).append(entry)
                    print(json.dumps(entry), flush=True)
            report["runs"].append(row)
            if args.json:
                args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
