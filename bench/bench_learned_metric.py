"""A learnt metric on the frozen bi-encoder's vectors: does reweighting dimensions help where the default is weakest?

The shipped cosine is ``sum_k u_k v_k`` over all-MiniLM-L6-v2's unit vectors, every dimension weighted alike.
A diagonal metric ``sum_k w_k u_k v_k`` (a logistic regression on the elementwise product, shrunk towards the
plain cosine: the cosine is a feature scaled so that its own weight is hardly penalised; the products are each
~1/384 of a cosine, so C runs high) keeps the vectors frozen and only learns which dimensions carry relevance.
Fitted on the recipe's training pairs (at most ``--per-domain``
per domain, so Wikipedia paragraphs do not dominate), and again with each training domain left out: a pair's
``metric_lodo`` comes from the fit that never saw its domain (consumer health and NovelEval are in no fit).
The penalty ``C`` is chosen by the worst left-out domain's AUROC. Each feature is then judged as
``bench/feature_mix.py`` judges one (weight on the default's fused logit chosen on the fusion data by its worst
domain, and again with each domain left out; held-out AUROC reported):

    python bench/bench_learned_metric.py --work runs/v3 --json bench/results_learned_metric.json

(``runs/v3``: the recipe's splits, made by ``crag recipe`` or ``training.recipe.prepare_default_data`` and
``fusion_splits``.)
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.feature_mix import judge, scored_sets
from bench.output import emit, work_parser
from grader.embedder import EMBEDDER_DIR, OnnxMiniLMEmbedder
from training.data import load_pairs, model_decided
from training.metrics import auroc, binary_labels

FEATURES = ("metric_all", "metric_lodo")
COSINE_SCALE = 30.0  # the cosine's column is multiplied by this, so its weight costs 1/900 of another's penalty
C_GRID = (1.0, 100.0, 1e3, 1e4, 1e5)


def product_features(embedder: OnnxMiniLMEmbedder, pairs: list[tuple[str, str]]) -> np.ndarray:
    """Per pair: the elementwise product of the two unit vectors, then the cosine scaled (its sum)."""
    queries = embedder.embed([q for q, _ in pairs])
    texts = embedder.embed([t for _, t in pairs])
    product = queries * texts
    return np.hstack([product, COSINE_SCALE * product.sum(axis=1, keepdims=True)]).astype(np.float64)


def fit(x: np.ndarray, y: np.ndarray, c: float):  # type: ignore[no-untyped-def]
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(C=c, max_iter=2000).fit(x, y)


def main() -> None:
    ap = work_parser(__doc__)
    ap.add_argument("--per-domain", type=int, default=4000, help="training pairs per domain, at most")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    embedder = OnnxMiniLMEmbedder(EMBEDDER_DIR, threads=2)
    rng = np.random.default_rng(args.seed)
    train, _ = model_decided(load_pairs(args.work / "train.jsonl"))
    by_domain: dict[str, list[int]] = defaultdict(list)
    for i, p in enumerate(train.pairs):
        by_domain[p.metadata.get("domain", "")].append(i)
    keep = sorted(i for rows in by_domain.values()
                  for i in rng.permutation(rows)[: args.per_domain].tolist())
    pairs = [train.pairs[i] for i in keep]
    x = product_features(embedder, [(p.query, p.text) for p in pairs])
    y = binary_labels(pairs)
    g = np.array([p.metadata.get("domain", "") for p in pairs])
    domains = sorted(set(g.tolist()))

    # C by the worst training domain left out (the fit never sees it)
    choice = {}
    for c in C_GRID:
        choice[c] = {d: auroc(y[g == d], fit(x[g != d], y[g != d], c).decision_function(x[g == d])) for d in domains}
    cosine_auroc = {d: auroc(y[g == d], x[g == d, -1]) for d in domains}
    best_c = max(C_GRID, key=lambda c: min(choice[c][d] - cosine_auroc[d] for d in domains))
    models = {"all": fit(x, y, best_c)} | {d: fit(x[g != d], y[g != d], best_c) for d in domains}

    def features(scored: list[tuple[str, str]]) -> dict[str, np.ndarray]:
        return {"x": product_features(embedder, scored)}

    sets = scored_sets(args.work, features)
    for s in sets.values():
        fx = s["features"].pop("x")
        s["features"]["metric_all"] = models["all"].decision_function(fx)
        lodo = s["features"]["metric_all"].copy()
        for d in domains:
            rows = s["groups"] == d
            if rows.any():
                lodo[rows] = models[d].decision_function(fx[rows])
        s["features"]["metric_lodo"] = lodo
    report = {name: judge(sets, name) for name in FEATURES}
    report["training"] = {"pairs": len(pairs), "per_domain": {d: int((g == d).sum()) for d in domains},
                          "chosen_C": best_c, "C_grid": C_GRID,
                          "left_out_training_domain_auroc": {str(c): v for c, v in choice.items()},
                          "left_out_training_domain_cosine_auroc": cosine_auroc}
    report["seconds"] = {k: v["seconds"] for k, v in sets.items()}
    emit(report, args.json)


if __name__ == "__main__":
    main()
