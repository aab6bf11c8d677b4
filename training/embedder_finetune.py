"""``crag train-embedder``: fine-tune the bi-encoder whose cosine a fused grader reads, on your labelled pairs.

The bi-encoder is trained the way all-MiniLM-L6-v2 was made: each query against its relevant text, the other
texts of its batch and one (``negatives``: more) irrelevant text of the same query (MultipleNegativesRankingLoss,
Henderson et al. 2017).
Its weights can then be interpolated with the untrained ones (WiSE-FT, ``alpha``), as the shipped cross-encoder's
are. On the recipe's data its cosine carried to domains it never saw better than the frozen one (held-out consumer
health 0.848 against 0.809, web left out of training 0.725 against 0.700; docs/grader-experiments.md). The result is
a sentence-transformers-style model folder: `crag export-embedder --source` makes it an int8 embedder and `crag
fuse --embedder` fuses it with a cross-encoder.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections import defaultdict
from collections.abc import Collection, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from models.deps import require
from models.errors import ConfigError
from models.field_types import check_field_types
from models.output import make_output_dir
from models.types import Verdict
from training.data import LabelledPair, groups_of

__all__ = ["EmbedderTrainConfig", "embed_batch", "embedder_triplets", "finetune_embedder", "teacher_vectors",
           "train_contrastive", "triplet_texts", "wise_state"]

logger = logging.getLogger(__name__)

REPORT_FILE = "embedder_training.json"


@dataclass(frozen=True, kw_only=True)
class EmbedderTrainConfig:
    """Hyper-parameters of one bi-encoder fine-tuning run (recorded in the output folder)."""

    base: str = "default-base"
    per_group: int = 2500  # triplets per group at most, so that no one domain decides what is learnt
    group_by: str | None = "domain"  # a metadata field (or "source"); None: all pairs one group
    epochs: float = 1.0
    batch_size: int = 32
    learning_rate: float = 2e-5
    max_length: int = 128  # all-MiniLM-L6-v2 was trained on 128 tokens; it reads 256 when it embeds
    scale: float = 20.0  # cosine x scale as the logits of the contrastive loss
    symmetric: bool = False  # also each relevant text against the batch's queries (both directions, averaged)
    negatives: int = 1  # mined irrelevant texts per query, at most (a query with fewer uses all it has)
    per_positive: bool = False  # a triplet for every relevant text of a query, not one per query
    teacher: str | None = None  # a larger sentence-transformers bi-encoder's folder: distil its in-batch scores
    distill_weight: float = 0.5  # with a teacher: the loss is (1 - w) x contrastive + w x KL(teacher || student)
    guide: bool = False  # with a teacher: a query's negatives lose the texts the teacher scores above its own (GIST)
    alpha: float = 1.0  # WiSE-FT: (1 - alpha) * untrained + alpha * fine-tuned
    max_minutes: float = 0.0  # 0: no bound
    seed: int = 0
    threads: int = 0  # 0: torch's choice
    device: str = "cpu"

    def __post_init__(self) -> None:
        check_field_types(self)
        bad = [f"{name} must be {rule}, got {getattr(self, name)!r}" for ok, name, rule in (
            (self.per_group >= 1, "per_group", ">= 1"),
            (self.epochs > 0, "epochs", "> 0"),
            (self.batch_size >= 2, "batch_size", ">= 2 (the other texts of a batch are the negatives)"),
            (0 < self.learning_rate < 1, "learning_rate", "in (0, 1)"),
            (16 <= self.max_length <= 8192, "max_length", "in [16, 8192]"),
            (self.scale > 0, "scale", "> 0"),
            (self.negatives >= 1, "negatives", ">= 1"),
            (0 <= self.distill_weight <= 1, "distill_weight", "in [0, 1]"),
            (self.teacher or not self.guide, "guide", "False without a teacher (it is the teacher that guides)"),
            (0 < self.alpha <= 1, "alpha", "in (0, 1] (1: the fine-tuned weights alone)"),
            (self.max_minutes >= 0, "max_minutes", ">= 0 (0: no bound)"),
            (self.threads >= 0, "threads", ">= 0 (0: the machine's choice)"),
        ) if not ok]
        if bad:
            raise ConfigError(f"EmbedderTrainConfig: {'; '.join(bad)}")


Triplet = tuple[str, str, tuple[str, ...]]  # (query, a relevant text, irrelevant texts of the same query)


def embedder_triplets(pairs: Sequence[LabelledPair], *, per_group: int = 2500, group_by: str | None = "domain",
                      seed: int = 0, leave_out: Collection[str] = (), negatives: int = 1,
                      per_positive: bool = False) -> list[Triplet]:
    """(query, a relevant text, up to ``negatives`` irrelevant texts of the same query) for every query that has
    both (``per_positive``: for every relevant text of such a query), at most ``per_group`` per group, none of the
    groups in ``leave_out`` (to measure how it carries there), shuffled; partial pairs are left out (neither side of
    the contrast)."""
    rng = random.Random(seed)
    named = groups_of(pairs, group_by) or ["all"] * len(pairs)  # a field no pair has is an error naming the fields
    group_of: dict[str, str] = {}
    by_query: dict[str, list[LabelledPair]] = defaultdict(list)
    for pair, name in zip(pairs, named, strict=True):
        by_query[pair.query_id].append(pair)
        group_of.setdefault(pair.query_id, name)
    by_group: dict[str, list[Triplet]] = defaultdict(list)
    for group in by_query.values():
        relevant = [p.text for p in group if p.label is Verdict.RELEVANT]
        irrelevant = [p.text for p in group if p.label is Verdict.IRRELEVANT]
        if not (relevant and irrelevant):
            continue
        # sample(x, 1) draws as choice(x) does: one negative per query gives the shipped run's triplets
        by_group[group_of[group[0].query_id]] += [
            (group[0].query, positive, tuple(rng.sample(irrelevant, min(negatives, len(irrelevant)))))
            for positive in (relevant if per_positive else [rng.choice(relevant)])]
    out = []
    for name, rows in by_group.items():
        if name in leave_out:
            continue
        rng.shuffle(rows)
        out += rows[:per_group]
    rng.shuffle(out)
    return out


def embed_batch(torch: Any, tokenizer: Any, encoder: Any, texts: list[str], max_length: int) -> Any:
    """Mean-pooled, unit-normalised vectors (as all-MiniLM-L6-v2 is used), with gradients when enabled."""
    batch = tokenizer(texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
    batch = {k: v.to(encoder.device) for k, v in batch.items()}
    hidden = encoder(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
    pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    return torch.nn.functional.normalize(pooled, dim=-1)


def triplet_texts(rows: Sequence[Triplet]) -> set[str]:
    """Every distinct query and text of ``rows`` (what a teacher embeds)."""
    return {t for q, p, ns in rows for t in (q, p, *ns)}


def checked_teacher(teacher: str | Path) -> Path:
    """The teacher's folder, or a ConfigError naming it when it holds no model (said before any training)."""
    folder = Path(teacher)
    if not (folder / "config.json").is_file():
        raise ConfigError(f"teacher {folder} is not a sentence-transformers model folder (no config.json); give the "
                          f"local folder of a bi-encoder such as all-mpnet-base-v2")
    return folder


def teacher_vectors(rows: Sequence[Triplet], teacher: str | Path, max_length: int,
                    batch_size: int = 32) -> dict[str, np.ndarray]:
    """Every query and text of ``rows`` embedded (unit vectors) by a larger sentence-transformers bi-encoder, read
    from its local folder at the length the student trains on; the teacher of ``train_contrastive``."""
    folder = checked_teacher(teacher)
    sentence_transformers = require("sentence_transformers", "train")
    model = sentence_transformers.SentenceTransformer(str(folder), device="cpu", local_files_only=True)
    model.max_seq_length = max_length
    texts = sorted(triplet_texts(rows))
    vectors = model.encode(texts, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True,
                           show_progress_bar=False)
    return dict(zip(texts, vectors, strict=True))


def train_contrastive(torch: Any, tokenizer: Any, encoder: Any, rows: list[Triplet],
                      config: EmbedderTrainConfig,
                      teacher: dict[str, np.ndarray] | None = None) -> dict[str, Any]:
    """Contrastive passes over ``rows`` (at most ``config.epochs``, stopped after ``max_minutes``); the loss curve.
    With ``teacher`` (each text's vector from ``teacher_vectors``) the student also learns the teacher's scores of
    every text of the batch for each query (in-batch distillation), weighted by ``config.distill_weight``, and with
    ``config.guide`` a query's negatives lose the texts the teacher prefers to its relevant one."""
    steps = max(1, int(len(rows) * config.epochs) // config.batch_size)
    optimiser = torch.optim.AdamW(encoder.parameters(), lr=config.learning_rate)
    warmup = max(1, steps // 10)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda s: min((s + 1) / warmup, max(0.0, (steps - s) / max(1, steps - warmup))))
    encoder.train()
    start, losses, negatives_seen, guide_masked = time.perf_counter(), [], 0, 0
    wrapped = rows + rows  # a batch that runs past the last triplet continues from the first
    for step in range(steps):
        first = (step * config.batch_size) % len(rows)
        chunk = wrapped[first:first + config.batch_size]
        query_texts = [q for q, _, _ in chunk]
        queries = embed_batch(torch, tokenizer, encoder, query_texts, config.max_length)
        text_list = [p for _, p, _ in chunk] + [n for *_, ns in chunk for n in ns]
        texts = embed_batch(torch, tokenizer, encoder, text_list, config.max_length)
        logits = _without_own_query_texts(torch, config.scale * queries @ texts.T, query_texts)
        taught = _teacher_scores(torch, teacher, query_texts, text_list, logits.device) if teacher else None
        if taught is not None:
            taught = _without_own_query_texts(torch, config.scale * taught, query_texts)
            if config.guide:  # the student and the teacher lose the same texts
                preferred = _teacher_preferred(torch, taught)
                logits, taught = logits.masked_fill(preferred, -1e4), taught.masked_fill(preferred, -1e4)
                guide_masked += int(preferred.sum())
        targets = torch.arange(len(chunk), device=logits.device)
        loss = torch.nn.functional.cross_entropy(logits, targets)
        if taught is not None and config.distill_weight:
            target = torch.nn.functional.softmax(taught, dim=-1)
            loss = (1 - config.distill_weight) * loss + config.distill_weight * torch.nn.functional.kl_div(
                torch.nn.functional.log_softmax(logits, dim=-1), target, reduction="batchmean")
        if config.symmetric:  # which query is this text's? (the mined irrelevant texts ask nothing)
            loss = (loss + torch.nn.functional.cross_entropy(logits[:, :len(chunk)].T, targets)) / 2
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        schedule.step()
        losses.append(float(loss.detach()))
        negatives_seen += sum(len(ns) for *_, ns in chunk)
        if config.max_minutes and time.perf_counter() - start > 60 * config.max_minutes:
            logger.info("stopped after %d of %d steps: --max-minutes %g reached", step + 1, steps, config.max_minutes)
            break
    encoder.eval()
    done, seconds = len(losses), time.perf_counter() - start
    return {"steps": done, "planned_steps": steps, "seconds": seconds, "mined_negatives_seen": negatives_seen,
            "guide_masked": guide_masked,
            "triplets_per_s": done * config.batch_size / seconds if seconds else None,
            "loss_by_tenth": [float(np.mean(part)) if len(part) else None
                              for part in np.array_split(np.asarray(losses), 10)]}


def _teacher_scores(torch: Any, teacher: dict[str, np.ndarray], queries: list[str], texts: list[str],
                    device: Any) -> Any:
    """The teacher's cosine of every query of the batch with every text of it (the student's logits' layout)."""
    t_q = torch.from_numpy(np.stack([teacher[q] for q in queries])).to(device)
    t_t = torch.from_numpy(np.stack([teacher[t] for t in texts])).to(device)
    return t_q @ t_t.T


def _teacher_preferred(torch: Any, taught: Any) -> Any:
    """Where the teacher scores a text of the batch above the query's own relevant text: likely an unlabelled answer,
    not a wrong one (GISTEmbed, Solatorio 2024), so it is no negative of that query."""
    n = taught.shape[0]
    own = taught[torch.arange(n), torch.arange(n)].unsqueeze(1)
    preferred = taught > own
    preferred[torch.arange(n), torch.arange(n)] = False
    return preferred


def _without_own_query_texts(torch: Any, logits: Any, queries: list[str]) -> Any:
    """The logits with another row's relevant text of the same query masked out: it is not a wrong answer to it
    (only when rows share a query, as ``per_positive`` triplets do; otherwise the logits unchanged)."""
    if len(set(queries)) == len(queries):
        return logits
    n = len(queries)
    same = torch.tensor([[a == b and i != j for j, b in enumerate(queries)] for i, a in enumerate(queries)],
                        device=logits.device)
    mask = torch.zeros_like(logits, dtype=torch.bool)
    mask[:, :n] = same
    return logits.masked_fill(mask, -1e4)


def wise_state(untrained: dict[str, Any], tuned: dict[str, Any], alpha: float) -> dict[str, Any]:
    """WiSE-FT weights: ``(1 - alpha) * untrained + alpha * tuned`` for every float tensor (integer buffers, such
    as position ids, are the tuned model's)."""
    return {k: (1 - alpha) * untrained[k] + alpha * tuned[k] if untrained[k].is_floating_point() else tuned[k]
            for k in untrained}


def finetune_embedder(pairs: Sequence[LabelledPair], out: str | Path,
                      config: EmbedderTrainConfig | None = None) -> dict[str, Any]:
    """Fine-tune the bi-encoder on ``pairs`` and write it (model, tokenizer and a training report) to ``out``, a new
    or empty folder; returns the report."""
    from grader.torch_model import check_positions
    from training.base_models import resolve_base
    from training.finetune import check_device

    config = config or EmbedderTrainConfig()
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(f"--out {out} exists and is not empty; choose a new folder so nothing stored there is lost")
    rows = embedder_triplets(pairs, per_group=config.per_group, group_by=config.group_by, seed=config.seed,
                             negatives=config.negatives, per_positive=config.per_positive)
    if len(rows) < 2:
        raise ConfigError(f"fine-tuning the bi-encoder needs queries with both a relevant and an irrelevant text; "
                          f"{len(pairs)} pairs give {len(rows)} (mine irrelevant ones with `crag mine`, or label more)")
    if config.teacher:
        checked_teacher(config.teacher)
    torch = require("torch", "train")
    transformers = require("transformers", "train")
    check_device(torch, config.device)
    torch.manual_seed(config.seed)
    if config.threads:
        torch.set_num_threads(config.threads)
    base_dir = resolve_base(config.base)
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(base_dir), local_files_only=True)
    encoder = transformers.AutoModel.from_pretrained(str(base_dir), local_files_only=True)
    check_positions(encoder.config, config.max_length, f"the base model {base_dir}")
    untrained = {k: v.detach().clone() for k, v in encoder.state_dict().items()}
    make_output_dir(out)  # a path that cannot be written is said now, not after the training
    teacher = teacher_vectors(rows, config.teacher, config.max_length) if config.teacher else None
    encoder.to(config.device)
    curve = train_contrastive(torch, tokenizer, encoder, rows, config, teacher)
    encoder.to("cpu")
    if config.alpha < 1:
        encoder.load_state_dict(wise_state(untrained, encoder.state_dict(), config.alpha))
    encoder.save_pretrained(out)
    tokenizer.save_pretrained(out)
    report = {"config": asdict(config), "base": str(base_dir), "pairs": len(pairs), "triplets": len(rows),
              "training": curve}
    (out / REPORT_FILE).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return report
