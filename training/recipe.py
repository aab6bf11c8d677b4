"""The reproducible recipe of the shipped default grader: ``crag recipe --data ../shared/data``.

Stages (each skipped when its output already exists, so a stopped run resumes):
1. prepare: SQuAD 2.0 split by article (train / validation / held-out test) and WikiQA (train, dev as
   validation, test held out). SQuAD gives answerable (relevant), adversarial unanswerable on the
   same paragraph (hard negative) and BM25-mined paragraphs (hard negatives, margin-protected). In the
   training split only, the unanswerable pairs are trained towards ``partial_target`` (an on-topic
   paragraph that does not answer is graded "related", not unrelated); validation and test keep them
   irrelevant.
2. train: fine-tune all-MiniLM-L6-v2 as a binary cross-encoder, calibrate and choose thresholds on
   the validation split (target: auto-decided error <= 5%).
3. export: ONNX + dynamic int8 with the parity gate measured on the whole validation split; the int8
   file alone is shipped.
4. evaluate: held-out SQuAD articles and WikiQA test; metrics go into the manifest and model card.
"""

from __future__ import annotations

import json
import logging
import random
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from models.errors import DataError
from models.types import Verdict
from training.convert import squad_pairs, wikiqa_pairs
from training.data import LabelledPair, PairSet, group_by_query, load_pairs, write_pairs
from training.negatives import mine_hard_negatives

__all__ = ["RecipeConfig", "prepare_default_data", "run_default_recipe"]

logger = logging.getLogger(__name__)

SQUAD_VAL_ARTICLES = 2
SQUAD_TEST_ARTICLES = 4


@dataclass(frozen=True, kw_only=True)
class RecipeConfig:
    """Knobs of the default recipe (the defaults are what the shipped bundle used)."""

    seed: int = 13
    squad_question_share: float = 0.5
    wikiqa_negatives_per_question: int = 3
    max_length: int = 256
    epochs: float = 1.25
    eval_every: int = 250
    batch_size: int = 16
    learning_rate: float = 4e-5
    target_error: float = 0.05
    unanswerable_as_partial: bool = True
    partial_target: float = 0.4


def _squad_splits(path: Path, config: RecipeConfig) -> dict[str, list[LabelledPair]]:
    own = [p for p in squad_pairs(path, same_article_negatives=0, other_article_negatives=0, seed=config.seed)]
    articles = sorted({p.source for p in own if p.source})
    rng = random.Random(config.seed)
    rng.shuffle(articles)
    test = set(articles[:SQUAD_TEST_ARTICLES])
    val = set(articles[SQUAD_TEST_ARTICLES : SQUAD_TEST_ARTICLES + SQUAD_VAL_ARTICLES])
    split_of = {a: "test" if a in test else "val" if a in val else "train" for a in articles}
    out: dict[str, list[LabelledPair]] = {"train": [], "val": [], "test": []}
    for name in out:
        part = [p for p in own if split_of.get(p.source or "") == name]
        if name == "train":
            groups = group_by_query(part)
            keep = set(rng.sample(sorted(groups), int(len(groups) * config.squad_question_share)))
            part = [p for p in part if p.query_id in keep]
            if config.unanswerable_as_partial:
                # on-topic paragraph that does not answer: graded "related", trained towards partial_target
                part = [replace(p, label=Verdict.PARTIAL) if p.metadata.get("kind") == "unanswerable" else p
                        for p in part]
        corpus = sorted({p.text for p in own if split_of.get(p.source or "") == name})
        mined = mine_hard_negatives(part, corpus=corpus, per_query=1, margin=0.9, only_positive_queries=False)
        out[name] = part + mined
    return out


def _wikiqa_train(path: Path, config: RecipeConfig) -> list[LabelledPair]:
    rng = random.Random(config.seed)
    kept = []
    for group in group_by_query(wikiqa_pairs(path)).values():
        negatives = [p for p in group if not p.positive]
        kept += [p for p in group if p.positive]
        kept += rng.sample(negatives, min(config.wikiqa_negatives_per_question, len(negatives)))
    return kept


def prepare_default_data(data_dir: str | Path, work: str | Path, config: RecipeConfig) -> dict[str, Path]:
    """Write train/val/test JSONL files for the default grader into ``work``."""
    data_dir, work = Path(data_dir), Path(work)
    squad = data_dir / "squad2" / "dev-v2.0.json"
    wikiqa = data_dir / "wikiqa"
    for needed in (squad, wikiqa / "WikiQA-train.tsv", wikiqa / "WikiQA-dev.filtered.tsv", wikiqa / "WikiQA-test.tsv"):
        if not needed.is_file():
            raise DataError(f"the default recipe needs {needed}; pass --data pointing at shared/data")
    files = {name: work / f"{name}.jsonl" for name in ("train", "val", "squad_test", "wikiqa_test")}
    if all(f.is_file() for f in files.values()):
        return files
    work.mkdir(parents=True, exist_ok=True)
    s = _squad_splits(squad, config)
    train = s["train"] + _wikiqa_train(wikiqa / "WikiQA-train.tsv", config)
    val = s["val"] + wikiqa_pairs(wikiqa / "WikiQA-dev.filtered.tsv")
    random.Random(config.seed).shuffle(train)
    write_pairs(train, files["train"])
    write_pairs(val, files["val"])
    write_pairs(s["test"], files["squad_test"])
    write_pairs(wikiqa_pairs(wikiqa / "WikiQA-test.tsv"), files["wikiqa_test"])
    return files


def run_default_recipe(
    data_dir: str | Path, work: str | Path, out: str | Path, config: RecipeConfig | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """All stages; returns the evaluation reports written into the bundle's manifest."""
    from training.evaluate import evaluate_bundle
    from training.export import export_bundle
    from training.finetune import TrainConfig, train_grader
    from training.model_card import write_model_card

    config = config or RecipeConfig()
    work = Path(work)
    files = prepare_default_data(data_dir, work, config)
    trained = work / "trained"
    if not (trained / "manifest.json").is_file():
        train_grader(
            load_pairs(files["train"]),
            load_pairs(files["val"]),
            trained,
            TrainConfig(
                max_length=config.max_length, epochs=config.epochs, batch_size=config.batch_size,
                learning_rate=config.learning_rate, seed=config.seed, target_error=config.target_error,
                partial_target=config.partial_target,
                eval_every=config.eval_every, threads=2, progress=progress, name="default",
                extra={"recipe": "training.recipe.run_default_recipe", "recipe_config": config.__dict__},
            ),
        )
    export_bundle(trained, out, int8=True, keep_fp32=False, probe=files["val"])  # parity on all of validation
    reports = {
        "squad2_heldout_articles": evaluate_bundle(out, PairSet(load_pairs(files["squad_test"]).pairs)),
        "wikiqa_test": evaluate_bundle(out, PairSet(load_pairs(files["wikiqa_test"]).pairs)),
    }
    (work / "reports.json").write_text(json.dumps(reports, indent=2) + "\n", encoding="utf-8")
    write_model_card(out, reports)
    return reports
