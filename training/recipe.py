"""The reproducible recipe of the shipped default grader: ``crag recipe --data ../shared/data``.

Stages (each skipped when its output already exists, so a stopped run resumes):
1. prepare: a multi-domain mix (:mod:`training.data_mix`). Training domains: Wikipedia paragraphs (SQuAD 1.1),
   adversarial Wikipedia (SQuAD 2.0 dev, unanswerables on the same paragraph as answer-level negatives),
   Wikipedia sentences (WikiQA), web passages (TREC DL 2020, NIST grades), tech-support FAQ (StackFAQ, split
   by thread), biomedical abstracts (PubMedQA, split by question), plus degenerate negatives. Negatives of
   every kind: random, topical, lexical (BM25 / TF-IDF), answer-level, degenerate.
   Validation for model selection: consumer-health FAQ (COVID-QA) and NovelEval, two domains that are never
   trained on, plus held-out queries of the training domains (other TREC year, other StackFAQ threads).
2. train: fine-tune all-MiniLM-L6-v2 with layer-wise learning-rate decay (keeps what the base model knows);
   the checkpoint is chosen by the mean per-domain validation AUROC, with early stopping. Calibration and
   thresholds are fitted on the validation split, thresholds so that the target holds on every domain.
3. export: ONNX + dynamic int8 with the parity gate; the int8 file alone is shipped.
4. embedder: the bi-encoder fine-tuned on the training split (contrastive, ``crag train-embedder``) and exported
   (``crag export-embedder``): its cosine is fused with the cross-encoder (``crag fuse``), and the index embeds
   with it (``models/embedders/minilm-l6``). Its cosine alone reads domains it never saw better than the frozen
   model's (docs/grader-experiments.md); ``tune_embedder=False`` fuses the untrained all-MiniLM-L6-v2 instead.
   With ``cosine_offset`` it is made before stage 2, whose cross-encoder then learns on top of this cosine.
5. evaluate: held-out test sets of every domain, each beside the untrained bi-encoder's AUROC.
"""

from __future__ import annotations

import json
import logging
import random
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from grader.thresholds import check_targets
from models.errors import ConfigError, DataError
from models.field_types import check_field_types
from models.registry import resolve_bundle
from models.types import Verdict
from training.convert import squad_pairs, wikiqa_pairs
from training.data import LabelledPair, PairSet, group_by_query, load_pairs, model_decided, write_pairs
from training.data_mix import (
    degenerate_negatives,
    graded_pairs,
    mix_summary,
    negatives_per_query,
    squad_v1_pairs,
    squad_v2_pairs,
    tag,
    wikiqa_sampled,
)

__all__ = ["EMBEDDER_NAME", "RecipeConfig", "domain_sets", "model_decided_by_domain", "prepare_default_data",
           "run_default_recipe", "tuned_embedder", "untrained_embedder"]

logger = logging.getLogger(__name__)

SQUAD_VAL_ARTICLES = 2
SQUAD_TEST_ARTICLES = 4
TREC_GRADES = {3: Verdict.RELEVANT, 2: Verdict.PARTIAL, 1: Verdict.IRRELEVANT, 0: Verdict.IRRELEVANT}
NOVEL_GRADES = {2: Verdict.RELEVANT, 1: Verdict.PARTIAL, 0: Verdict.IRRELEVANT}
SPLITS = ("train", "val", "test")
EMBEDDER_NAME = "crag-minilm-l6-tuned-v1"  # an index records it: weights of their own need a name of their own


@dataclass(frozen=True, kw_only=True)
class RecipeConfig:
    """Knobs of the v3 recipe. Its first run is in bench/results_recipe_v3_run1.json and was not shipped: the
    shipped bundle still comes from the previous recipe (git history before this module, commit d03da84)."""

    seed: int = 13
    squad1_questions: int = 7000
    squad2_questions: int = 2500
    wikiqa_negatives_per_question: int = 3
    degenerate_share: float = 0.03
    val_pairs_per_domain: int = 320
    max_length: int = 256
    epochs: float = 1.0
    max_steps: int = 2400
    max_minutes: float = 70.0
    eval_every: int = 300
    patience: int = 3
    batch_size: int = 16
    learning_rate: float = 3e-5
    layer_decay: float = 0.8
    partial_target: float = 0.75
    target_error: float = 0.05
    device: str = "cpu"
    fusion_pairs_per_domain: int = 300
    heldout_pairs_per_domain: int = 400
    fusion_degenerate_share: float = 0.05
    layers: int = 0  # a student with the base's first N layers (0: the full model, the default bundle)
    teacher: str | None = None  # a student learns from this bundle's scores as well as from the labels
    distill_weight: float = 0.5
    cosine_offset: bool = False  # train the cross-encoder on top of the frozen cosine (see training.finetune)
    tune_embedder: bool = True  # fuse a fine-tuned bi-encoder's cosine (stage 4), not the frozen one's
    embedder_seed: int = 0  # the shipped embedder's seed (its own, so that a student's recipe reuses it)
    embedder_max_minutes: float = 25.0
    name: str = "default"

    def __post_init__(self) -> None:
        """Refuse a bad knob now, not after the data is prepared (minutes in) when training reads it."""
        check_field_types(self)
        bad = [f"{name} must be {rule}, got {getattr(self, name)!r}" for ok, name, rule in (
            (self.max_minutes >= 0, "max_minutes", ">= 0 (0: no bound)"),
            (self.embedder_max_minutes >= 0, "embedder_max_minutes", ">= 0 (0: no bound)"),
            (self.max_steps >= 0, "max_steps", ">= 0 (0: no bound)"),
            (self.layers >= 0, "layers", ">= 0 (0: all)"),
            (0 <= self.distill_weight <= 1, "distill_weight", "in [0, 1]"),
            (0 <= self.degenerate_share < 1 and 0 <= self.fusion_degenerate_share < 1, "degenerate_share",
             "in [0, 1) (fusion_degenerate_share too)"),
            (bool(self.name.strip()) and not any(c in self.name for c in "/\\"), "name",
             "a non-empty word without '/' or '\\' (the bundle's folder under models/bundles/ when shipped)"),
        ) if not ok]
        if bad:
            raise ConfigError(f"RecipeConfig: {'; '.join(bad)}")
        check_targets(max_error=self.target_error)


def _group_split(pairs: list[LabelledPair], key: Any, shares: tuple[float, float], seed: int
                 ) -> dict[str, list[LabelledPair]]:
    """Split by ``key(pair)`` groups into train / val / test with the given val and test shares."""
    groups = sorted({key(p) for p in pairs})
    random.Random(seed).shuffle(groups)
    n_val, n_test = round(len(groups) * shares[0]), round(len(groups) * shares[1])
    split_of = {g: "val" if i < n_val else "test" if i < n_val + n_test else "train" for i, g in enumerate(groups)}
    out: dict[str, list[LabelledPair]] = {s: [] for s in SPLITS}
    for p in pairs:
        out[split_of[key(p)]].append(p)
    return out


def _cap(pairs: list[LabelledPair], n: int, seed: int) -> list[LabelledPair]:
    """At most about ``n`` pairs, whole queries only (so rankings within a query stay intact)."""
    groups = list(group_by_query(pairs).values())
    random.Random(seed).shuffle(groups)
    out: list[LabelledPair] = []
    for g in groups:
        if len(out) >= n:
            break
        out += g
    return out


def _squad2_articles(path: Path, seed: int) -> tuple[set[str], set[str]]:
    """The held-out SQuAD 2.0 test and validation articles (the same test articles as earlier recipes)."""
    own = squad_pairs(path, same_article_negatives=0, other_article_negatives=0, seed=seed)
    articles = sorted({p.source for p in own if p.source})
    random.Random(seed).shuffle(articles)
    val_end = SQUAD_TEST_ARTICLES + SQUAD_VAL_ARTICLES
    return set(articles[:SQUAD_TEST_ARTICLES]), set(articles[SQUAD_TEST_ARTICLES:val_end])


def build_mix(data_dir: Path, config: RecipeConfig) -> dict[str, list[LabelledPair]]:
    """Train / val / test pairs of every domain, tagged with domain and kind."""
    seed = config.seed
    needed = [data_dir / f for f in ("squad1/train-v1.1.json", "squad2/dev-v2.0.json", "squad2/dev-v2.0-rest.json",
                                     "wikiqa/WikiQA-train.tsv", "wikiqa/WikiQA-dev.filtered.tsv",
                                     "wikiqa/WikiQA-test.tsv", "trec_dl/dl2020.jsonl", "trec_dl/dl2021.jsonl",
                                     "noveleval/pairs.jsonl", "pubmedqa/pairs.jsonl", "stackfaq/pairs.jsonl",
                                     "covidfaq/pairs.jsonl")]
    for path in needed:
        if not path.is_file():
            raise DataError(f"the default recipe needs {path}; pass --data pointing at shared/data")
    out: dict[str, list[LabelledPair]] = {s: [] for s in SPLITS}
    squad2 = [data_dir / "squad2/dev-v2.0.json", data_dir / "squad2/dev-v2.0-rest.json"]
    test_articles, val_articles = _squad2_articles(squad2[0], seed)
    out["train"] += squad_v1_pairs(data_dir / "squad1/train-v1.1.json", questions=config.squad1_questions, seed=seed)
    out["train"] += squad_v2_pairs(squad2, exclude_articles=test_articles | val_articles,
                                   questions=config.squad2_questions, seed=seed)
    for name, articles in (("val", val_articles), ("test", test_articles)):
        part = [p for p in squad_pairs(squad2[0], same_article_negatives=1, other_article_negatives=1, seed=seed)
                if p.source in articles]
        out[name] += tag(part, "wikipedia_adversarial")
    out["train"] += wikiqa_sampled(data_dir / "wikiqa/WikiQA-train.tsv",
                                   negatives=config.wikiqa_negatives_per_question, seed=seed)
    out["val"] += tag(wikiqa_pairs(data_dir / "wikiqa/WikiQA-dev.filtered.tsv"), "wikipedia_sentences")
    out["test"] += tag(wikiqa_pairs(data_dir / "wikiqa/WikiQA-test.tsv"), "wikipedia_sentences")
    out["train"] += graded_pairs(data_dir / "trec_dl/dl2020.jsonl", "web", label_of=TREC_GRADES)
    dl21 = _group_split(graded_pairs(data_dir / "trec_dl/dl2021.jsonl", "web", label_of=TREC_GRADES),
                        lambda p: p.query_id, (0.3, 0.7), seed)
    out["val"] += dl21["val"]
    out["test"] += dl21["test"]
    stack = _group_split(graded_pairs(data_dir / "stackfaq/pairs.jsonl", "tech_faq"),
                         lambda p: p.query_id.split("-")[1], (0.15, 0.25), seed)
    out["train"] += negatives_per_query(stack["train"], {"lexical": 2, "random": 1}, seed)
    out["val"] += negatives_per_query(stack["val"], {"lexical": 2, "random": 1}, seed)
    out["test"] += negatives_per_query(stack["test"], {"lexical": 3, "random": 1}, seed, max_positives=3)
    pubmed = _group_split(graded_pairs(data_dir / "pubmedqa/pairs.jsonl", "biomedical"),
                          lambda p: p.query_id, (0.1, 0.2), seed)
    for name in SPLITS:
        out[name] += pubmed[name]
    # never trained on: model selection and test see domains the weights did not
    covid = _group_split(graded_pairs(data_dir / "covidfaq/pairs.jsonl", "consumer_health"),
                         lambda p: p.query_id, (0.3, 0.7), seed)
    out["val"] += covid["val"]
    out["test"] += covid["test"]
    out["val"] += graded_pairs(data_dir / "noveleval/pairs.jsonl", "web_novel", label_of=NOVEL_GRADES)
    out["train"] += degenerate_negatives(out["train"], count=int(config.degenerate_share * len(out["train"])),
                                         seed=seed)
    by_domain: dict[str, list[LabelledPair]] = {}
    for p in out["val"]:
        by_domain.setdefault(p.metadata["domain"], []).append(p)
    out["val"] = [p for d in sorted(by_domain) for p in _cap(by_domain[d], config.val_pairs_per_domain, seed)]
    random.Random(seed).shuffle(out["train"])
    return out


def prepare_default_data(data_dir: str | Path, work: str | Path, config: RecipeConfig) -> dict[str, Path]:
    """Write train/val/test JSONL files and ``mix.json`` (what went in) into ``work``."""
    data_dir, work = Path(data_dir), Path(work)
    files = {name: work / f"{name}.jsonl" for name in SPLITS}
    if all(f.is_file() for f in files.values()) and (work / "mix.json").is_file():
        return files
    work.mkdir(parents=True, exist_ok=True)
    mix = build_mix(data_dir, config)
    for name in SPLITS:
        write_pairs(mix[name], files[name])
    summary = {name: mix_summary(mix[name]) for name in SPLITS}
    (work / "mix.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return files


def domain_sets(path: Path) -> dict[str, PairSet]:
    """The pairs of one split file, per domain (degenerate pairs grouped with their query's domain)."""
    out: dict[str, list[LabelledPair]] = {}
    for p in load_pairs(path).pairs:
        out.setdefault(p.metadata.get("domain", "unknown"), []).append(p)
    return {d: PairSet(ps, path=f"{path}#{d}") for d, ps in sorted(out.items())}


def model_decided_by_domain(path: Path, limit: int | None = None) -> list[tuple[str, LabelledPair]]:
    """(domain, pair) for the pairs of a split file that reach the model (rule-decided echoes left out, as
    calibration and evaluation leave them out), domains in name order, at most ``limit`` pairs per domain."""
    out: list[tuple[str, LabelledPair]] = []
    for domain, pairs in domain_sets(path).items():
        kept = model_decided(pairs)[0].pairs
        out += [(domain, p) for p in (kept[:limit] if limit else kept)]
    return out


def fusion_splits(files: dict[str, Path], work: Path, config: RecipeConfig) -> tuple[Path, Path]:
    """``fuse.jsonl`` (validation + half of the test queries, with degenerate negatives) to choose the fusion and
    calibrate it, and ``heldout.jsonl`` (the other half of the test queries) to report on; capped per domain."""
    fuse: list[LabelledPair] = list(load_pairs(files["val"]).pairs)
    heldout: list[LabelledPair] = []
    for pairs in domain_sets(files["test"]).values():
        halves = _group_split(pairs.pairs, lambda p: p.query_id, (0.5, 0.0), config.seed)
        fuse += _cap(halves["val"], config.fusion_pairs_per_domain, config.seed)
        heldout += _cap(halves["train"], config.heldout_pairs_per_domain, config.seed)
    fuse += degenerate_negatives(fuse, count=round(len(fuse) * config.fusion_degenerate_share), seed=config.seed)
    paths = work / "fuse.jsonl", work / "heldout.jsonl"
    write_pairs(fuse, paths[0])
    write_pairs(heldout, paths[1])
    return paths


def tuned_embedder(train: Path, work: Path, config: RecipeConfig) -> Path:
    """Stage 4: the bi-encoder fine-tuned on ``train`` (at most 2,500 triplets per domain) and exported to int8 ONNX
    under ``work``; returns the export's folder (each step is skipped when its output exists)."""
    from training.embedder_finetune import REPORT_FILE, EmbedderTrainConfig, finetune_embedder
    from training.export_embedder import export_embedder

    model, onnx = work / "embedder-tuned", work / "embedder-tuned-onnx"
    if not (onnx / "manifest.json").is_file():
        if not (model / REPORT_FILE).is_file():
            shutil.rmtree(model, ignore_errors=True)  # a run stopped while training left no report: start again
            finetune_embedder(load_pairs(train).pairs, model, EmbedderTrainConfig(
                seed=config.embedder_seed, max_minutes=config.embedder_max_minutes, device=config.device))
        export_embedder(onnx, source=model, name=EMBEDDER_NAME)
    return onnx


def untrained_embedder(work: Path) -> Path:
    """For ``tune_embedder=False``: all-MiniLM-L6-v2 as the package ships it, exported under ``work`` (the shipped
    embedder is the fine-tuned one, so it cannot stand for the untrained model)."""
    from training.export_embedder import export_embedder

    onnx = work / "embedder-untrained-onnx"
    if not (onnx / "manifest.json").is_file():
        export_embedder(onnx)
    return onnx


def recipe_embedder(train: Path, work: Path, config: RecipeConfig) -> Path:
    """The embedder the recipe fuses: fine-tuned on ``train`` (stage 4), or the untrained one
    (``tune_embedder=False``)."""
    return tuned_embedder(train, work, config) if config.tune_embedder else untrained_embedder(work)


def run_default_recipe(
    data_dir: str | Path, work: str | Path, out: str | Path, config: RecipeConfig | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """All stages; returns the evaluation reports written into the bundle's manifest."""
    from training.baseline import biencoder_auroc
    from training.evaluate import evaluate_bundle
    from training.export import export_bundle
    from training.finetune import TrainConfig, train_grader
    from training.fusion import fuse_bundle
    from training.model_card import write_model_card

    config = config or RecipeConfig()
    if Path(out).exists():  # fuse writes it last, after an hour of training: say so now, not then
        raise ConfigError(f"--out {out} exists; the recipe writes a new bundle there at its end: choose a new "
                          "directory (then copy it over models/bundles/NAME to ship it)")
    if config.teacher:  # a misspelt teacher fails now, not after the data are prepared
        resolve_bundle(config.teacher)
    if config.layers:  # a student deeper than its base fails now, not after the data are prepared
        from grader.torch_model import check_student_layers
        from training.base_models import DEFAULT_BASE, resolve_base

        check_student_layers(resolve_base(DEFAULT_BASE), config.layers)
    work = Path(work)
    files = prepare_default_data(data_dir, work, config)
    mix = json.loads((work / "mix.json").read_text(encoding="utf-8"))
    suffix = (f"-l{config.layers}" if config.layers else "") + ("-cos" if config.cosine_offset else "")
    trained = work / f"trained{suffix}"
    embedder = None
    if config.cosine_offset:  # the cross-encoder learns on top of the cosine it is fused with: that embedder first
        embedder = recipe_embedder(files["train"], work, config)
    if not (trained / "manifest.json").is_file():
        train_grader(
            load_pairs(files["train"]),
            load_pairs(files["val"]),
            trained,
            TrainConfig(
                max_length=config.max_length, epochs=config.epochs, max_steps=config.max_steps,
                max_minutes=config.max_minutes,
                batch_size=config.batch_size, learning_rate=config.learning_rate, layer_decay=config.layer_decay,
                seed=config.seed, target_error=config.target_error, partial_target=config.partial_target,
                eval_every=config.eval_every, patience=config.patience, select_by="domain_mean",
                threshold_groups="domain", threads=0, device=config.device, progress=progress, name=config.name,
                layers=config.layers, teacher=config.teacher, distill_weight=config.distill_weight,
                cosine_offset=config.cosine_offset, cosine_embedder=None if embedder is None else str(embedder),
                extra={"recipe": "training.recipe.run_default_recipe", "recipe_config": asdict(config),
                       "training_mix": mix},
            ),
        )
    exported = work / f"onnx{suffix}"
    if not (exported / "manifest.json").is_file():
        # int8 is gated below on the fused verdicts, which are what the bundle ships
        export_bundle(trained, exported, int8=True, keep_fp32=True, probe=files["val"], max_flip_share=1.0)
    embedder = embedder or recipe_embedder(files["train"], work, config)
    fuse_path, heldout_path = fusion_splits(files, work, config)
    fusion = fuse_bundle(exported, fuse_path, out, group_by="domain", target_error=config.target_error,
                         int8_only=True, embedder=embedder)
    (work / f"fusion{suffix}.json").write_text(json.dumps(fusion, indent=2) + "\n", encoding="utf-8")
    reports: dict[str, Any] = {}
    for domain, pairs in domain_sets(heldout_path).items():
        report = evaluate_bundle(out, pairs)
        report["biencoder_auroc"] = biencoder_auroc(pairs.pairs)
        reports[f"test:{domain}"] = report
    (work / f"reports{suffix}.json").write_text(json.dumps(reports, indent=2) + "\n", encoding="utf-8")
    write_model_card(out, reports)
    return reports
