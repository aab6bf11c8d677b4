"""A cosine share that depends on the length of the pair: does it help the default where it generalises least?

The shipped fusion gives the (standardised) frozen cosine one share of the score for every pair. The cross-encoder
might be worth more on some lengths (answer sentences) and the cosine on others (whole FAQ answers), so here the
share is chosen per third of the fusion data by the text's words (or the query's): three shares from
``{0, 0.1, ..., 1}``, chosen as ``crag fuse`` chooses its one share (the smallest per-domain AUROC gain over the
cosine alone on the fusion data, largest; again with each domain left out, judged on that domain), against the
single share chosen the same way. A pair's score still depends on that pair alone. Held-out gains reported:

    python bench/bench_length_gate.py --work runs/v3 --json bench/results_length_gate.json
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.feature_mix import scored_sets
from bench.output import emit, work_parser

SHARES = tuple(round(0.1 * i, 1) for i in range(11))


def scored(work: Path) -> dict[str, dict[str, np.ndarray]]:
    """Per split: labels, domains, the default's cross-encoder logit and cosine, words of text and query."""

    def words(pairs: list[tuple[str, str]]) -> dict[str, np.ndarray]:
        return {"text_words": np.array([len(t.split()) for _, t in pairs]),
                "query_words": np.array([len(q.split()) for q, _ in pairs])}

    sets = {name: {"y": s["y"], "groups": s["groups"], "ce": np.asarray(s["cross_encoder"], dtype=np.float64),
                   "cos": np.asarray(s["cosine"], dtype=np.float64), **s["features"]}
            for name, s in scored_sets(work, words).items()}
    fuse = sets["fuse"]
    for s in sets.values():  # standardised on the fusion data, as `crag fuse` does
        s["z_ce"] = (s["ce"] - fuse["ce"].mean()) / fuse["ce"].std()
        s["z_cos"] = (s["cos"] - fuse["cos"].mean()) / fuse["cos"].std()
    return sets


def gate(sets: dict[str, dict[str, np.ndarray]], by: str) -> dict[str, Any]:
    from training.metrics import auroc

    fuse = sets["fuse"]
    edges = np.quantile(fuse[by], [1 / 3, 2 / 3])
    names = sorted(set(fuse["groups"].tolist()))

    def gains(s: dict[str, np.ndarray], shares: tuple[float, ...], keep: np.ndarray, domains: list[str]) -> list[float]:
        share = np.array(shares)[np.digitize(s[by], edges)]
        mixed = (1 - share) * s["z_ce"] + share * s["z_cos"]
        rows = [keep & (s["groups"] == d) for d in domains]
        return [auroc(s["y"][m], mixed[m]) - auroc(s["y"][m], s["z_cos"][m]) for m in rows]

    def choose(keep: np.ndarray, domains: list[str], candidates: list[tuple[float, ...]]) -> tuple[float, ...]:
        return max(candidates, key=lambda c: (min(gains(fuse, c, keep, domains)),
                                              float(np.mean(gains(fuse, c, keep, domains)))))

    out: dict[str, Any] = {"edges": edges.tolist()}
    candidates = {"one share": [(s, s, s) for s in SHARES],
                  "a share per third": list(itertools.product(SHARES, repeat=3))}
    for label, options in candidates.items():
        chosen = choose(np.ones(len(fuse["y"]), dtype=bool), names, options)
        lodo = {}
        for held in names:
            c = choose(fuse["groups"] != held, [n for n in names if n != held], options)
            lodo[held] = {"shares": c, "gain": gains(fuse, c, fuse["groups"] == held, [held])[0]}
        heldout = sets["heldout"]
        every = np.ones(len(heldout["y"]), dtype=bool)
        domains = sorted(set(heldout["groups"].tolist()))
        out[label] = {"shares": chosen, "leave_one_domain_out": lodo,
                      "lodo_worst": min(v["gain"] for v in lodo.values()),
                      "lodo_mean": float(np.mean([v["gain"] for v in lodo.values()])),
                      "heldout_gain_over_cosine": dict(zip(domains, gains(heldout, chosen, every, domains),
                                                           strict=True))}
    return out


def main() -> None:
    ap = work_parser(__doc__)
    args = ap.parse_args()
    sets = scored(args.work)
    emit({by: gate(sets, by) for by in ("text_words", "query_words")}, args.json)


if __name__ == "__main__":
    main()
