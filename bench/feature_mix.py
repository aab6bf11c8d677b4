"""Would one more frozen feature help the default grader where it generalises least? The shared judgement.

A candidate feature's standardised score is added to the default's fused logit (standardised) with a weight
chosen as `crag fuse` chooses its cosine share: the weight whose smallest per-domain gain over the default is
largest on the fusion data, and the same choice made again with each domain left out, judged on that domain.
Held-out AUROC is only reported. Used by ``bench_second_cosine.py``,
``bench_maxsim.py`` and ``bench_learned_metric.py``; ``bench_band_bounds.py`` scores its sets with it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

WEIGHTS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0)


def _z(x: np.ndarray) -> np.ndarray:
    return (x - x.mean()) / (x.std() or 1.0)


def scored_sets(work: Path, features: Callable[[list[tuple[str, str]]], dict[str, np.ndarray]],
                names: tuple[str, ...] = ("fuse", "heldout")) -> dict[str, dict[str, Any]]:
    """Per split: labels, the default's fused logit, its cross-encoder logit and frozen cosine, each candidate
    feature, domains, seconds."""
    from grader import load_grader
    from grader.cross_encoder import CrossEncoderGrader
    from training.data import load_pairs, model_decided
    from training.metrics import binary_labels

    grader = load_grader("default", threads=2)
    if not isinstance(grader, CrossEncoderGrader):  # score_pairs and the fusion inputs are a cross-encoder's
        raise SystemExit(f"the default bundle loads as {type(grader).__name__}, not a cross-encoder grader")
    sets = {}
    for name in names:
        data, _ = model_decided(load_pairs(work / f"{name}.jsonl"))
        pairs = [(p.query, p.text) for p in data.pairs]
        t0 = time.perf_counter()
        scored = grader.score_pairs(pairs)
        t1 = time.perf_counter()
        if scored.fusion_inputs is None:
            raise SystemExit("the default bundle is not fused: there is no cross-encoder logit and cosine to compare")
        ce_logit, cosine = scored.fusion_inputs
        candidates = features(pairs)
        t2 = time.perf_counter()
        sets[name] = {"y": binary_labels(data.pairs), "fused": scored.logits, "cosine": cosine,
                      "cross_encoder": ce_logit,
                      "features": candidates, "groups": np.array([p.metadata.get("domain", "") for p in data.pairs]),
                      "seconds": {"default": t1 - t0, "features": t2 - t1}}
    return sets


def judge(sets: dict[str, dict[str, Any]], feature: str) -> dict[str, Any]:
    """The weight chosen for ``feature`` on the fusion data, its leave-one-domain-out gains, and per-domain AUROCs."""
    from training.metrics import auroc

    fuse = sets["fuse"]
    names = sorted(set(fuse["groups"].tolist()))
    z_f, z_x = _z(fuse["fused"]), _z(fuse["features"][feature])

    def gains(weight: float, keep: np.ndarray, domains: list[str]) -> list[float]:
        mixed = z_f + weight * z_x
        g = fuse["groups"]
        return [auroc(fuse["y"][keep & (g == d)], mixed[keep & (g == d)])
                - auroc(fuse["y"][keep & (g == d)], z_f[keep & (g == d)]) for d in domains]

    def choose(keep: np.ndarray, domains: list[str]) -> float:
        return max(WEIGHTS, key=lambda w: (min(gains(w, keep, domains)), float(np.mean(gains(w, keep, domains))), -w))

    every = np.ones(len(fuse["y"]), dtype=bool)
    chosen = choose(every, names)
    lodo = {}
    for held in names:
        w = choose(fuse["groups"] != held, [n for n in names if n != held])
        lodo[held] = {"weight": w, "gain_on_held_out_domain": gains(w, fuse["groups"] == held, [held])[0]}
    per_set = {}
    mean_f, std_f = fuse["fused"].mean(), fuse["fused"].std()
    mean_x, std_x = fuse["features"][feature].mean(), fuse["features"][feature].std() or 1.0
    for name, s in sets.items():
        x = s["features"][feature]
        mixed = (s["fused"] - mean_f) / std_f + chosen * (x - mean_x) / std_x
        rows = {}
        for d in sorted(set(s["groups"].tolist())):
            m = s["groups"] == d
            rows[d] = {"pairs": int(m.sum()), "auroc_default": auroc(s["y"][m], s["fused"][m]),
                       "auroc_cosine": auroc(s["y"][m], s["cosine"][m]), "auroc_feature": auroc(s["y"][m], x[m]),
                       "auroc_default_plus_feature": auroc(s["y"][m], mixed[m]),
                       "corr_feature_cosine": float(np.corrcoef(x[m], s["cosine"][m])[0, 1])}
        per_set[name] = rows
    return {"weights": WEIGHTS, "chosen_weight": chosen, "leave_one_domain_out": lodo, "per_set": per_set}
