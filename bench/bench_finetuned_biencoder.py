"""The bi-encoder itself fine-tuned on the recipe's training pairs: does its cosine help where the default is weakest?

The default grader leans on the frozen all-MiniLM-L6-v2 cosine because it generalises: every model fitted on the
training domains (the cross-encoder, a fused student, a learnt metric on the frozen vectors) gained there and lost
on domains it never saw. Not yet tried: training the bi-encoder the way it was made (contrastive, in-batch negatives
plus one mined negative per query: MultipleNegativesRankingLoss, Henderson et al. 2017), then interpolating its
weights with the untrained ones (WiSE-FT, as the shipped cross-encoder is) so that it keeps what it knew.

Triplets (query, a relevant text, an irrelevant text of the same query) from ``train.jsonl``, at most
``--per-domain`` per training domain so that Wikipedia paragraphs do not dominate; torch fp32 on this CPU for at
most ``--minutes``. Each interpolation weight's cosine (256 tokens, as the shipped embedder reads) is judged as
``bench/feature_mix.py`` judges a feature (weight on the default's fused logit chosen on the fusion data by its
worst domain, and again with each domain left out); its AUROC alone, per held-out domain, is set beside the frozen
cosine's (``a = 0``, the same code). Consumer health and NovelEval are in no training split.

    python bench/bench_finetuned_biencoder.py --work runs/v3 --minutes 20 --json bench/results_finetuned_biencoder.json

(``runs/v3``: the recipe's splits, made by ``crag recipe`` or ``training.recipe.prepare_default_data`` and
``fusion_splits``.)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.feature_mix import judge, scored_sets
from bench.output import emit, work_parser
from training.base_models import resolve_base
from training.data import load_pairs
from training.embedder_finetune import (
    EmbedderTrainConfig,
    embed_batch,
    embedder_triplets,
    teacher_vectors,
    train_contrastive,
    triplet_texts,
    wise_state,
)

ALPHAS = (0.0, 0.25, 0.5, 0.75, 1.0)


def cosines(torch: Any, tokenizer: Any, encoder: Any, pairs: list[tuple[str, str]], max_length: int = 256
            ) -> np.ndarray:
    """The cosine of each (query, text), every distinct text embedded once, in batches of similar length."""
    texts = sorted({t for pair in pairs for t in pair}, key=len)
    vectors: dict[str, np.ndarray] = {}
    with torch.no_grad():
        for i in range(0, len(texts), 32):
            part = texts[i:i + 32]
            for text, vector in zip(part, embed_batch(torch, tokenizer, encoder, part, max_length).numpy(),
                                    strict=True):
                vectors[text] = vector
    return np.array([float(vectors[q] @ vectors[t]) for q, t in pairs])


def in_place(sets: dict[str, dict[str, Any]], feature: str) -> dict[str, Any]:
    """The cross-encoder fused with ``feature`` instead of the frozen cosine, the share chosen as `crag fuse`
    chooses it on the fusion data (worst domain's gain over that cosine, and again with each domain left out);
    per-domain AUROC of the result beside the shipped default's (v3.1: the same cross-encoder and the frozen int8
    cosine) and the frozen cosine's."""
    from training.fusion import choose_fusion
    from training.metrics import auroc

    fuse = sets["fuse"]
    choice = choose_fusion(fuse["cross_encoder"], fuse["features"][feature], fuse["y"], fuse["groups"].tolist())
    per_set = {}
    for name, s in sets.items():
        fused = choice.head.combine(s["cross_encoder"], s["features"][feature])
        per_set[name] = {d: {"auroc_fused": auroc(s["y"][m], fused[m]),
                             "auroc_default": auroc(s["y"][m], s["fused"][m]),
                             "auroc_frozen_cosine": auroc(s["y"][m], s["cosine"][m])}
                         for d in sorted(set(s["groups"].tolist())) for m in [s["groups"] == d]}
    return {"cosine_share": choice.cosine_share, "leave_one_domain_out": choice.leave_one_out, "per_set": per_set}


def cached_teacher(rows: list, teacher: str, max_length: int, cache: Path | None) -> dict[str, np.ndarray]:
    """The teacher's vectors of every text of ``rows`` (``teacher_vectors``), from ``cache`` when it was written by
    the same teacher at the same length and holds them all (the teacher is the slow part: ~7 texts/s for
    all-mpnet-base-v2 on 2 cores)."""
    made_by = json.dumps({"teacher": str(Path(teacher).resolve()), "max_length": max_length})
    if cache and cache.is_file():
        with np.load(cache) as stored:
            same = "made_by" in stored and str(stored["made_by"]) == made_by
            vectors = dict(zip(json.loads(str(stored["texts"])), stored["vectors"], strict=True)) if same else {}
        if triplet_texts(rows) <= vectors.keys():
            return vectors
    vectors = teacher_vectors(rows, teacher, max_length)
    if cache:
        np.savez(cache, texts=np.asarray(json.dumps(list(vectors))), vectors=np.stack(list(vectors.values())),
                 made_by=np.asarray(made_by))
    return vectors


def main() -> None:
    ap = work_parser(__doc__)
    ap.add_argument("--per-domain", type=int, default=1500, help="training triplets per domain, at most")
    ap.add_argument("--minutes", type=float, default=20.0)
    ap.add_argument("--epochs", type=float, default=1.0, help="passes over the triplets")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=2e-5)
    ap.add_argument("--max-length", type=int, default=128, help="tokens read in training (the model's own)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--symmetric", action="store_true", help="the loss in both directions (texts to queries too)")
    ap.add_argument("--negatives", type=int, default=1, help="mined irrelevant texts per query, at most")
    ap.add_argument("--per-positive", action="store_true", help="a triplet for every relevant text of a query")
    ap.add_argument("--teacher", help="a larger bi-encoder's folder to distil in-batch scores from")
    ap.add_argument("--teacher-cache", type=Path,
                    help="the teacher's vectors of the triplets' texts (.npz): read if it exists, else written")
    ap.add_argument("--distill-weight", type=float, default=0.5, help="with --teacher: the distillation's share")
    ap.add_argument("--guide", action="store_true",
                    help="with --teacher: negatives the teacher scores above the relevant text are masked out")
    ap.add_argument("--save-model", type=Path, help="write the fine-tuned encoder and tokenizer here")
    ap.add_argument("--arrays", type=Path, help="write every pair's labels, scores and features here (.npz)")
    ap.add_argument("--leave-out", nargs="*", default=[], help="training domains to leave out (how it carries there)")
    ap.add_argument("--alphas", type=float, nargs="*", default=list(ALPHAS), help="interpolation weights to judge")
    args = ap.parse_args()
    import torch
    import transformers

    torch.manual_seed(args.seed)
    torch.set_num_threads(2)
    base_dir = resolve_base("default-base")
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(base_dir), local_files_only=True)
    encoder = transformers.AutoModel.from_pretrained(str(base_dir), local_files_only=True)
    base_state = {k: v.detach().clone() for k, v in encoder.state_dict().items()}
    rows = embedder_triplets(load_pairs(args.work / "train.jsonl").pairs, per_group=args.per_domain, seed=args.seed,
                             leave_out=tuple(args.leave_out), negatives=args.negatives,
                             per_positive=args.per_positive)
    config = EmbedderTrainConfig(batch_size=args.batch_size, learning_rate=args.lr, max_length=args.max_length,
                                 max_minutes=args.minutes, seed=args.seed, epochs=args.epochs,
                                 symmetric=args.symmetric, negatives=args.negatives,
                                 per_positive=args.per_positive, teacher=args.teacher,
                                 distill_weight=args.distill_weight, guide=args.guide)
    teacher = cached_teacher(rows, args.teacher, args.max_length, args.teacher_cache) if args.teacher else None
    curve = train_contrastive(torch, tokenizer, encoder, rows, config, teacher)
    tuned_state = {k: v.detach().clone() for k, v in encoder.state_dict().items()}

    def features(pairs: list[tuple[str, str]]) -> dict[str, np.ndarray]:
        out = {}
        for a in args.alphas:
            encoder.load_state_dict(wise_state(base_state, tuned_state, a))
            out[f"tuned_a{a:g}"] = cosines(torch, tokenizer, encoder, pairs)
        return out

    sets = scored_sets(args.work, features)
    if args.save_model:  # the fine-tuned weights (a = 1), to export or interpolate later
        encoder.load_state_dict(tuned_state)
        encoder.save_pretrained(args.save_model)
        tokenizer.save_pretrained(args.save_model)
    if args.arrays:
        np.savez_compressed(args.arrays, **{f"{name}_{key}": value for name, s in sets.items()
                                            for key, value in [*((k, s[k]) for k in ("y", "fused", "cosine",
                                                                                     "cross_encoder", "groups")),
                                                               *s["features"].items()]})
    results = {"command": " ".join(sys.argv), "triplets": len(rows), "training": curve,
               "judged": {name: judge(sets, name) for name in sets["fuse"]["features"]},
               "in_place_of_the_frozen_cosine": {name: in_place(sets, name) for name in sets["fuse"]["features"]},
               "seconds": {name: s["seconds"] for name, s in sets.items()}}
    emit(results, args.json)


if __name__ == "__main__":
    main()
