"""A soup of fine-tuned bi-encoders: do several seeds' weights, averaged, carry further than one run?

The shipped embedder is all-MiniLM-L6-v2 fine-tuned once (seed 0) on the recipe's training split. Runs of the same
recipe with other seeds (another sample and order of triplets) read the left-out domains differently (consumer
health 0.825-0.854 over the leave-one-domain-out runs), which suggests averaging them ("model soups", Wortsman et
al. 2022: fine-tunes of one start, averaged weight by weight, are often more robust than any one of them). Each
model folder (``crag train-embedder --seed N``) and their uniform soup are scored in torch fp32 (256 tokens, as
the shipped embedder reads) on the fusion data and the held-out queries: AUROC of the cosine alone per domain
beside the untrained model's, and each fused with the default's cross-encoder the way ``crag fuse`` would
(``bench_finetuned_biencoder.in_place``).

    crag train-embedder --data runs/v3/train.jsonl --out runs/soup/seed1 --seed 1   # and seed 2, ...
    python bench/bench_embedder_soup.py --work runs/v3 --models runs/v3/embedder-tuned runs/soup/seed1 \
        runs/soup/seed2 --json bench/results_embedder_soup.json
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_finetuned_biencoder import cosines, in_place
from bench.feature_mix import scored_sets
from bench.output import emit, work_parser
from training.base_models import resolve_base
from training.embedder_finetune import wise_state


def soup(states: list[dict[str, Any]]) -> dict[str, Any]:
    """The uniform average of several state dicts of one architecture, as a running WiSE-FT mix (the k-th model
    weighs 1/k against the mean of the ones before it)."""
    mean = states[0]
    for k, state in enumerate(states[1:], start=2):
        mean = wise_state(mean, state, 1 / k)
    return mean


def cosine_aurocs(sets: dict[str, dict[str, Any]], name: str) -> dict[str, dict[str, float]]:
    """Per split and domain, the AUROC of candidate ``name``'s cosine alone."""
    from training.metrics import auroc

    return {split: {d: round(auroc(s["y"][m], s["features"][name][m]), 4)
                    for d in sorted(set(s["groups"].tolist())) for m in [s["groups"] == d]}
            for split, s in sets.items()}


def main() -> None:
    ap = work_parser(__doc__)
    ap.add_argument("--models", nargs="+", type=Path, required=True, help="fine-tuned model folders, same base")
    args = ap.parse_args()
    import torch
    import transformers

    torch.set_num_threads(2)
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(resolve_base("default-base")), local_files_only=True)
    encoder = transformers.AutoModel.from_pretrained(str(resolve_base("default-base")), local_files_only=True)
    states = {"untrained": {k: v.detach().clone() for k, v in encoder.state_dict().items()}}
    for folder in args.models:
        states[folder.name] = transformers.AutoModel.from_pretrained(str(folder), local_files_only=True).state_dict()
    tuned = [states[folder.name] for folder in args.models]
    if len(tuned) > 1:
        states["soup"] = soup(tuned)
        if len(tuned) > 2:
            states["soup_of_first_two"] = soup(tuned[:2])

    def features(pairs: list[tuple[str, str]]) -> dict[str, np.ndarray]:
        out = {}
        for name, state in states.items():
            encoder.load_state_dict(state)
            out[name] = cosines(torch, tokenizer, encoder, pairs)
        return out

    sets = scored_sets(args.work, features)
    emit({"command": " ".join(sys.argv), "models": [str(m) for m in args.models],
          "cosine_alone": {name: cosine_aurocs(sets, name) for name in states},
          "fused_with_the_default_cross_encoder": {name: in_place(sets, name) for name in states},
          "seconds": {name: s["seconds"] for name, s in sets.items()}}, args.json)


if __name__ == "__main__":
    main()
