"""Fine-tuning a cross-encoder grader from labelled pairs (transformers + torch, CPU or GPU).

Binary head (one logit): relevant -> 1, partial -> ``partial_target``, irrelevant -> 0, trained with
BCE. With a ``teacher`` (a bundle of a larger grader) the model is distilled: each pair's target mixes its
label with the teacher's probability (``distill_weight`` of the teacher), the usual soft-target recipe for
a student with fewer ``layers``. With ``cosine_offset`` the model is trained on top of the frozen
bi-encoder's cosine: the loss (and checkpoint selection) sees the cross-encoder's logit plus a fixed
logistic of the cosine (fitted on the training labels), so the cross-encoder learns what the cosine misses
and starts from the cosine's own ranking; ``crag fuse`` then mixes the two again. Length-bucketed
batches with dynamic padding keep CPU training fast.
The best checkpoint by validation AUROC is kept, with early stopping; the seed is fixed and recorded. After training the
model is calibrated and its thresholds are chosen on the validation split, and the result is written
as a torch bundle (``crag export`` turns it into ONNX). With a guarantee (``delta``) half of the validation queries
are kept back from all of that and only test the thresholds (:func:`guarantee_halves`).
"""

from __future__ import annotations

import json
import logging
import math
import random
import shutil
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from grader.calibration import CALIBRATION_METHODS, fit_calibrator
from grader.encoding import EncodedBatch, PairEncoder
from grader.shift import MIN_REFERENCE_PAIRS, make_reference
from grader.thresholds import check_targets, choose_thresholds, learn_then_test, small_sample_note
from models.bundle import write_manifest
from models.deps import require
from models.errors import ConfigError
from models.field_types import check_field_types
from models.output import make_output_dir
from models.types import Verdict
from training.base_models import resolve_base
from training.data import LabelledPair, PairSet, model_decided, write_pairs
from training.metrics import binary_labels, compute_metrics
from training.versions import library_versions

__all__ = ["TrainConfig", "TrainResult", "check_device", "freeze_lower_layers", "guarantee_halves", "pair_logits",
           "train_grader"]

logger = logging.getLogger(__name__)
PROBE_FILE = "probe.jsonl"
PROBE_SIZE = 256
EVALS_PER_EPOCH = 4  # validations an epoch when eval_every is 0 (early stopping and the best checkpoint)
EVAL_MIN_STEPS = 10
SELECTION = ("pooled", "domain_mean")
TEACHER_SCORES = ("cross_encoder", "fused")


def _is_checkpoint(path: Path) -> bool:
    return (path / "head_config.json").is_file() and (path / "model.safetensors").is_file()


def _initial_model(config: TrainConfig, base_dir: Path, train: PairSet) -> tuple[Any, dict[str, Any] | None]:
    """The model training starts from: the base model, a trained checkpoint (the folder of `crag train`), or
    the cross-encoder of a grader bundle such as ``default``, rebuilt from its ONNX file; plus, for a bundle,
    what to record of it."""
    from grader.torch_model import build_cross_encoder, load_cross_encoder

    if not config.init:
        return build_cross_encoder(base_dir, layers=config.layers), None
    path = Path(config.init).expanduser()
    if _is_checkpoint(path):
        return load_cross_encoder(path).train(), None
    from models.bundle import read_bundle
    from models.errors import BundleError
    from models.registry import resolve_bundle
    from training.start_weights import model_from_bundle

    try:
        bundle = read_bundle(resolve_bundle(config.init))
    except BundleError as exc:
        raise ConfigError(f"init {config.init!r} is neither a trained checkpoint (head_config.json and "
                          "model.safetensors, as `crag train` writes) nor a grader bundle (a name such as "
                          f"'default' or an exported folder): {exc}") from exc
    check = [(p.query, p.text) for p in train.pairs[:16]]
    model, record = model_from_bundle(config.init, base_dir, check, bundle=bundle)
    return model.train(), record


def domain_of(pair: LabelledPair) -> str:
    """The domain a pair belongs to (``metadata["domain"]``, else its source, else "all")."""
    return str(pair.metadata.get("domain") or pair.source or "all")


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """Hyper-parameters of one fine-tuning run; every field is recorded in the manifest."""

    base: str = "default-base"
    max_length: int = 256
    epochs: float = 3.0  # one epoch of a few hundred pairs is ~40 steps: far from trained (bench_train_from_default)
    batch_size: int = 16
    learning_rate: float = 4e-5
    layer_decay: float = 1.0
    head_learning_rate: float = 1e-3
    warmup_ratio: float = 0.1
    weight_decay: float = 0.01
    partial_target: float = 0.75
    seed: int = 13
    eval_every: int = 0  # 0: about four times an epoch, at least 10 steps apart
    patience: int = 3
    max_steps: int = 0
    max_minutes: float = 0.0
    threads: int = 0
    device: str = "cpu"
    calibration: str = "auto"
    select_by: str = "pooled"
    threshold_groups: str | None = None
    target_error: float | None = 0.05
    target_escalation: float | None = None
    delta: float | None = None
    progress: bool = True
    name: str = "grader"
    layers: int = 0  # keep only the base encoder's first N layers (0: all of them)
    freeze_layers: int = 0  # leave the embeddings and the first N encoder layers as they start (0: train all)
    teacher: str | None = None  # a grader bundle whose scores the student learns from, besides the labels
    distill_weight: float = 0.5
    teacher_score: str = "cross_encoder"  # or "fused": a fused teacher's full probability, cosine included
    init: str | None = None  # start from a trained checkpoint (the folder of `crag train`) or a bundle ('default')
    cosine_offset: bool = False  # learn on top of the frozen bi-encoder's cosine (see the module docstring)
    cosine_embedder: str | None = None  # the exported embedder whose cosine is the offset (None: the shipped one)
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_field_types(self)
        checks = [
            (16 <= self.max_length <= 8192, "max_length must be in [16, 8192]"),
            (self.epochs > 0, "epochs must be > 0"),
            (self.batch_size >= 1, "batch_size must be >= 1"),
            (0 < self.learning_rate < 1, "learning_rate must be in (0, 1)"),
            (0 < self.head_learning_rate < 1, "head_learning_rate must be in (0, 1)"),
            (0 <= self.warmup_ratio < 1, "warmup_ratio must be in [0, 1)"),
            (0 < self.layer_decay <= 1, "layer_decay must be in (0, 1]"),
            (self.select_by in SELECTION, f"select_by must be one of {list(SELECTION)}"),
            (self.threshold_groups in (None, "domain"), "threshold_groups must be None or 'domain'"),
            (0 <= self.partial_target <= 1, "partial_target must be in [0, 1]"),
            (self.patience >= 1, "patience must be >= 1"),
            (self.calibration in CALIBRATION_METHODS, f"calibration must be one of {list(CALIBRATION_METHODS)}"),
            ((self.target_error is None) != (self.target_escalation is None),
             "set exactly one of target_error and target_escalation"),
            (isinstance(self.layers, int) and self.layers >= 0, "layers must be an int >= 0 (0 keeps all)"),
            (isinstance(self.freeze_layers, int) and self.freeze_layers >= 0,
             "freeze_layers must be an int >= 0 (0 trains every layer)"),
            (not self.layers or self.freeze_layers <= self.layers,
             "freeze_layers must not exceed the layers kept (layers)"),
            (0 <= self.distill_weight <= 1, "distill_weight must be in [0, 1]"),
            (self.teacher_score in TEACHER_SCORES, f"teacher_score must be one of {list(TEACHER_SCORES)}"),
            (self.init is None or not self.layers, "init and layers exclude each other (init keeps its layers)"),
            (self.max_steps >= 0, "max_steps must be >= 0 (0: no bound)"),
            (self.max_minutes >= 0, "max_minutes must be >= 0 (0: no bound)"),
            (self.eval_every >= 0, "eval_every must be >= 0 (0: about four times an epoch)"),
            (self.threads >= 0, "threads must be >= 0 (0: the machine's choice)"),
            (self.weight_decay >= 0, "weight_decay must be >= 0"),
        ]
        for ok, message in checks:
            if not ok:  # name the value that fails, not the whole config
                field_name = message.split()[0]
                got = (f"got {field_name}={getattr(self, field_name)!r}" if hasattr(self, field_name)
                       else f"got {self}")
                raise ConfigError(f"TrainConfig: {message}; {got}")
        check_targets(max_error=self.target_error, max_escalation=self.target_escalation, delta=self.delta)


@dataclass
class TrainResult:
    """Where the bundle went and what training achieved."""

    out: Path
    best_val_auroc: float
    steps: int
    seconds: float
    metrics: dict[str, Any]
    thresholds: dict[str, Any]


def _target(label: Verdict, partial_target: float) -> float:
    return {Verdict.RELEVANT: 1.0, Verdict.PARTIAL: partial_target, Verdict.IRRELEVANT: 0.0}[label]


def teacher_probabilities(teacher: str | Path, pairs: list[LabelledPair], score: str = "cross_encoder") -> np.ndarray:
    """The teacher's probability per pair. ``cross_encoder``: from its cross-encoder logit alone (a fused
    teacher's cosine is left out: the student is fused with its own cosine afterwards). ``fused``: the
    teacher's calibrated probability, cosine included (a student meant to carry the cosine in one pass)."""
    from grader.factory import load_grader

    grader = load_grader(teacher, backend="auto", cache_pairs=0, cross_encoder=True if score != "fused" else None)
    scored = grader.score_pairs([(p.query, p.text) for p in pairs])  # type: ignore[attr-defined]
    if score == "fused":
        return np.asarray(grader.probabilities(scored.logits), dtype=np.float64)  # type: ignore[attr-defined]
    ce = scored.fusion_inputs[0] if scored.fusion_inputs is not None else scored.logits
    return 1.0 / (1.0 + np.exp(-np.asarray(ce, dtype=np.float64)))


def cosine_offsets(train: list[LabelledPair], val: list[LabelledPair], embedder_dir: str | Path | None = None
                   ) -> tuple[np.ndarray, np.ndarray, dict]:
    """Per-pair offsets a * cosine + b for training and validation pairs, (a, b) a logistic fit on the training
    labels of the cosine of ``embedder_dir`` (an exported embedder: the one the model will be fused with; None: the
    shipped models/embedders/minilm-l6), first window, as the cross-encoder reads a pair while training."""
    from grader.embedder import EMBEDDER_DIR, OnnxMiniLMEmbedder
    from grader.fusion import cosines

    linear_model = require("sklearn.linear_model", "train")
    embedder = OnnxMiniLMEmbedder(EMBEDDER_DIR if embedder_dir is None else Path(embedder_dir))
    cos_train = cosines(embedder, [(p.query, p.text) for p in train])
    cos_val = cosines(embedder, [(p.query, p.text) for p in val])
    fit = linear_model.LogisticRegression(C=100.0).fit(cos_train[:, None], binary_labels(train))
    a, b = float(fit.coef_[0, 0]), float(fit.intercept_[0])
    return ((a * cos_train + b).astype(np.float32), (a * cos_val + b).astype(np.float32),
            {"weight": a, "bias": b, "embedder": embedder.name})


def _bucketed_batches(
    encoder: PairEncoder, pairs: list[LabelledPair], batch_size: int, rng: random.Random
) -> list[EncodedBatch]:
    """Shuffle, group into pools of 50 batches, sort each pool by length, then shuffle the batches."""
    order = list(range(len(pairs)))
    rng.shuffle(order)
    pool = batch_size * 50
    batches: list[EncodedBatch] = []
    for start in range(0, len(order), pool):
        chunk = order[start : start + pool]
        for batch in encoder.encode([(pairs[i].query, pairs[i].text) for i in chunk], batch_size=batch_size):
            rows = np.asarray([chunk[i] for i in batch.index])
            batches.append(EncodedBatch(rows, batch.input_ids, batch.attention_mask, batch.token_type_ids,
                                        batch.truncated))
    rng.shuffle(batches)
    return batches


def pair_logits(model: Any, encoder: PairEncoder, pairs: list[LabelledPair], device: str) -> np.ndarray:
    """The model's logit for each pair (inference mode; the model is left in training mode, as training needs)."""
    torch = require("torch", "train")
    logits = np.zeros(len(pairs))
    model.eval()
    with torch.inference_mode():
        for batch in encoder.encode([(p.query, p.text) for p in pairs], batch_size=64):
            out = model(
                input_ids=torch.from_numpy(batch.input_ids).to(device),
                attention_mask=torch.from_numpy(batch.attention_mask).to(device),
                token_type_ids=torch.from_numpy(batch.token_type_ids).to(device),
            )[:, 0]
            logits[batch.index] = out.float().cpu().numpy()
    model.train()
    return logits


def _auroc(logits: np.ndarray, pairs: list[LabelledPair]) -> float:
    metrics = require("sklearn.metrics", "train")
    y = binary_labels(pairs)
    if y.min() == y.max():
        return float("nan")
    return float(metrics.roc_auc_score(y, logits))


def _selection_score(logits: np.ndarray, pairs: list[LabelledPair], select_by: str) -> tuple[float, dict[str, float]]:
    """Pooled AUROC, or the mean of per-domain AUROCs (each domain counts once, whatever its size)."""
    per_domain: dict[str, float] = {}
    if select_by == "domain_mean":
        names = np.array([domain_of(p) for p in pairs])
        for name in sorted(set(names.tolist())):
            idx = np.flatnonzero(names == name)
            value = _auroc(logits[idx], [pairs[i] for i in idx])
            if not math.isnan(value):
                per_domain[name] = value
        return float(np.mean(list(per_domain.values()))), per_domain
    return _auroc(logits, pairs), per_domain


def _layer_depth(name: str, layers: int) -> int:
    """0 for the embeddings, i + 1 for encoder layer i, ``layers`` for what sits above them (the pooler)."""
    if ".layer." in name:
        return int(name.split(".layer.")[1].split(".")[0]) + 1
    return 0 if "embeddings" in name else layers


def freeze_lower_layers(model: Any, freeze_layers: int) -> int:
    """Leave the embeddings and the first ``freeze_layers`` encoder layers as they are (no gradient, no optimiser
    state): backpropagation stops above them, so a step costs less (3 of 6 frozen: a run 1.3x faster on 2 CPU
    cores at the same AUROC, bench/results_train_freeze*.json), and those layers keep what the base model knows.
    Returns how many parameters were frozen; a count above the model's layers is a :class:`ConfigError`."""
    layers = model.encoder.config.num_hidden_layers
    if freeze_layers > layers:
        raise ConfigError(f"freeze_layers={freeze_layers}, but the model has {layers} layers: freeze at most {layers} "
                          "(then only the head trains)")
    frozen = 0
    for name, param in model.encoder.named_parameters():
        if freeze_layers and _layer_depth(name, layers) <= freeze_layers:
            param.requires_grad_(False)
            frozen += param.numel()
    return frozen


def _layer_groups(model: Any, config: TrainConfig) -> list[dict[str, Any]]:
    """AdamW groups: layer-wise learning-rate decay (top layer full rate, each lower one ``layer_decay`` times
    less, embeddings least) so fine-tuning moves the pretrained lower layers little; no decay on biases/norms;
    frozen parameters (``freeze_lower_layers``) left out."""
    no_decay = ("bias", "LayerNorm.weight")
    layers = model.encoder.config.num_hidden_layers
    groups: dict[tuple[float, bool], list[Any]] = {}
    for name, param in model.encoder.named_parameters():
        if not param.requires_grad:
            continue
        lr = config.learning_rate * config.layer_decay ** (layers - _layer_depth(name, layers))
        groups.setdefault((lr, any(k in name for k in no_decay)), []).append(param)
    out = [{"params": params, "lr": lr, "weight_decay": 0.0 if nd else config.weight_decay}
           for (lr, nd), params in groups.items()]
    out.append({"params": model.head_parameters(), "weight_decay": 0.0, "lr": config.head_learning_rate})
    return out


def check_device(torch: Any, device: str) -> None:
    """A device torch can train on here, refused before anything is written when it cannot."""
    try:
        kind = torch.device(device).type
    except (RuntimeError, ValueError) as exc:
        raise ConfigError(f"device {device!r} is not a torch device ({exc}); use cpu or cuda") from None
    if kind == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"device {device!r}: torch {torch.__version__} sees no CUDA GPU here (a CPU build, or no "
                          "driver); train with --device cpu, or install a CUDA build of torch on a GPU machine")
    if kind not in ("cpu", "cuda", "mps"):
        raise ConfigError(f"device {device!r} is not supported for training; use cpu or cuda")


def check_training_out(out: Path) -> None:
    """``out`` must be new, empty, or what an interrupted run left (its ``checkpoint/``): training writes its
    files there and deletes ``checkpoint/``, so a finished bundle or anything else stored there would be lost."""
    if not out.exists():
        return
    if not out.is_dir():
        raise ConfigError(f"--out {out} is a file; training writes a bundle directory: choose a new path")
    found = sorted(entry.name for entry in out.iterdir())
    if found and found != ["checkpoint"]:
        what = "a trained bundle" if "manifest.json" in found else f"other files ({', '.join(found[:5])})"
        raise ConfigError(f"--out {out} already holds {what}; training would overwrite it: choose a new "
                          "directory (or delete that one first)")


def train_grader(train: PairSet, val: PairSet, out: str | Path, config: TrainConfig,
                 soft_targets: np.ndarray | None = None) -> TrainResult:
    """Fine-tune, calibrate, choose thresholds, and write a torch bundle to ``out``. ``soft_targets``: a teacher's
    probability per training pair from any source (e.g. the frozen bi-encoder's calibrated cosine), mixed with
    the labels by ``distill_weight`` as a ``teacher`` bundle's are; not with ``teacher``."""
    torch = require("torch", "train")
    transformers = require("transformers", "train")
    tqdm = require("tqdm", "train").tqdm
    from grader.torch_model import check_positions, load_cross_encoder, save_cross_encoder

    check_device(torch, config.device)
    soft = None if soft_targets is None else np.asarray(soft_targets, dtype=np.float32)
    if soft is not None and (config.teacher or soft.shape != (len(train),) or not np.all((soft >= 0) & (soft <= 1))):
        raise ConfigError(f"soft_targets must be {len(train)} probabilities in [0, 1], one per training pair, "
                          f"and exclude TrainConfig.teacher (got shape {soft.shape}, teacher {config.teacher})")
    # validation, calibration and thresholds see what the model decides in service: rule-decided echoes are not
    val = model_decided(val)[0]
    if len(train) == 0 or len(val) == 0:
        raise ConfigError("training needs non-empty train and validation sets (other than query echoes)")
    val_labels = binary_labels(val.pairs)
    everything = np.concatenate([binary_labels(train.pairs), val_labels])
    if everything.min() == everything.max():
        kind, fix = (("relevant or partial", "add irrelevant ones with `crag mine`") if everything.min() else
                     ("irrelevant", "label the pairs that answer their query relevant"))
        raise ConfigError(f"all {len(everything)} pairs are labelled {kind}: a grader learns from both relevant "
                          f"and irrelevant pairs; {fix}")
    if val_labels.min() == val_labels.max():
        raise ConfigError("the validation set needs both relevant and irrelevant pairs to calibrate and stop early")
    val, guarantee_test = guarantee_halves(val, config)
    out = Path(out)
    check_training_out(out)
    base_dir = resolve_base(config.base)
    random.seed(config.seed)
    np.random.seed(config.seed)
    torch.manual_seed(config.seed)
    if config.threads:
        torch.set_num_threads(config.threads)
    encoder = PairEncoder(base_dir / "tokenizer.json", config.max_length)
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    model, started_from = _initial_model(config, base_dir, train)
    check_positions(model.encoder.config, config.max_length, f"the model to train ({config.init or base_dir})")
    model = model.to(config.device)
    frozen = freeze_lower_layers(model, config.freeze_layers)
    if frozen:
        logger.info("froze the embeddings and %d lower layers (%d parameters)", config.freeze_layers, frozen)
    make_output_dir(out)  # only once the starting model is known to be usable
    if started_from:
        config = replace(config, extra={**config.extra, "init_bundle": started_from})  # recorded in the manifest
    rng = random.Random(config.seed)
    pairs = train.pairs
    targets = np.array([_target(p.label, config.partial_target) for p in pairs], dtype=np.float32)
    if config.teacher:  # soft targets from the teacher bundle (given soft_targets exclude one: checked above)
        t0 = time.perf_counter()
        soft = teacher_probabilities(config.teacher, pairs, config.teacher_score)
        logger.info("teacher %s scored %d pairs in %.0f s", config.teacher, len(pairs), time.perf_counter() - t0)
    elif soft is not None:
        config = replace(config, extra={**config.extra, "soft_targets": {  # recorded in the manifest
            "pairs": int(soft.size), "mean": round(float(soft.mean()), 4), "weight": config.distill_weight}})
    if soft is not None:
        targets = ((1 - config.distill_weight) * targets + config.distill_weight * soft).astype(np.float32)
    offset = np.zeros(len(pairs), dtype=np.float32)
    val_offset = np.zeros(len(val.pairs))
    if config.cosine_offset:
        t0 = time.perf_counter()
        offset, val_offset, fitted = cosine_offsets(pairs, val.pairs, config.cosine_embedder)
        config = replace(config, extra={**config.extra, "cosine_offset": fitted})  # recorded in the manifest
        logger.info("cosine offsets %s for %d pairs in %.0f s", fitted, len(pairs) + len(val.pairs),
                    time.perf_counter() - t0)
    steps_per_epoch = math.ceil(len(pairs) / config.batch_size)
    total_steps = config.max_steps or max(1, round(steps_per_epoch * config.epochs))
    eval_every = config.eval_every or min(max(EVAL_MIN_STEPS, math.ceil(steps_per_epoch / EVALS_PER_EPOCH)),
                                          total_steps)
    optimizer = torch.optim.AdamW(_layer_groups(model, config), lr=config.learning_rate)
    scheduler = transformers.get_linear_schedule_with_warmup(
        optimizer, int(config.warmup_ratio * total_steps), total_steps
    )
    loss_fn = torch.nn.BCEWithLogitsLoss()
    checkpoint = out / "checkpoint"
    best, best_step, bad_evals, step, history = -1.0, 0, 0, 0, []
    start = time.perf_counter()
    model.train()
    bar = tqdm(total=total_steps, desc="training", unit="step", disable=not config.progress)
    stop = False
    while not stop:
        for batch in _bucketed_batches(encoder, pairs, config.batch_size, rng):
            logits = model(
                input_ids=torch.from_numpy(batch.input_ids).to(config.device),
                attention_mask=torch.from_numpy(batch.attention_mask).to(config.device),
                token_type_ids=torch.from_numpy(batch.token_type_ids).to(config.device),
            )[:, 0]
            logits = logits + torch.from_numpy(offset[batch.index]).to(config.device)
            loss = loss_fn(logits, torch.from_numpy(targets[batch.index]).to(config.device))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            step += 1
            out_of_time = bool(config.max_minutes) and time.perf_counter() - start > 60 * config.max_minutes
            if out_of_time:
                logger.info("time budget of %.0f minutes reached at step %d", config.max_minutes, step)
                total_steps = step
            bar.update(1)
            bar.set_postfix(loss=f"{loss.item():.3f}", best_auroc="n/a" if best < 0 else f"{best:.4f}")
            if step % eval_every == 0 or step == total_steps:
                auroc, per_domain = _selection_score(
                    pair_logits(model, encoder, val.pairs, config.device) + val_offset, val.pairs, config.select_by)
                history.append({"step": step, "val_auroc": auroc, "val_auroc_by_domain": per_domain,
                                "seconds": time.perf_counter() - start})
                logger.info("step %d: validation AUROC %.4f %s", step, auroc, per_domain)
                if auroc > best:
                    best, best_step, bad_evals = auroc, step, 0
                    save_cross_encoder(model, checkpoint)
                else:
                    bad_evals += 1
                    if bad_evals >= config.patience:
                        logger.info("early stop at step %d (best %.4f at step %d)", step, best, best_step)
                        stop = True
                        break
            if step >= total_steps:
                stop = True
                break
    bar.close()
    seconds = time.perf_counter() - start
    model = load_cross_encoder(checkpoint).to(config.device)
    return _finish(model, encoder, base_dir, train, val, out, config, history, best, best_step, step, seconds,
                   guarantee_test)


def guarantee_halves(val: PairSet, config: TrainConfig) -> tuple[PairSet, PairSet | None]:
    """(the validation pairs that choose, the pairs that only test). With a guarantee (``delta``) the validation
    queries split in two: one half chooses the checkpoint, fits the calibration map and orders the candidate
    bands, the other only tests the bands (Learn-then-Test holds only on labels nothing else has seen). Without
    one, all of validation does everything and the second part is None."""
    if config.delta is None or config.target_error is None:
        return val, None
    from training.recalibrate import query_split

    choose, test = query_split(val.pairs, config.seed)
    halves = (PairSet([val.pairs[i] for i in choose], path=val.path),
              PairSet([val.pairs[i] for i in test], path=f"{val.path} (queries that test the thresholds)"))
    for half, job in zip(halves, ("chooses the checkpoint and the calibration", "tests the thresholds"),
                         strict=True):
        y = binary_labels(half.pairs)
        if not len(y) or y.min() == y.max():
            raise ConfigError(f"with --delta the validation queries are split in two, and the half that {job} has "
                              f"{len(y)} pairs, {int(y.sum())} relevant: it needs relevant and irrelevant pairs; "
                              "give a larger validation set (--val, or a larger --val-share) with pairs of more "
                              "queries, or train without --delta and recalibrate with `crag calibrate`")
    return halves


def _finish(
    model: Any, encoder: PairEncoder, base_dir: Path, train: PairSet, val: PairSet, out: Path,
    config: TrainConfig, history: list[dict[str, Any]], best: float, best_step: int, steps: int, seconds: float,
    guarantee_test: PairSet | None = None,
) -> TrainResult:
    """Calibrate and choose thresholds on validation (tested on ``guarantee_test`` when there is a guarantee),
    then write the torch bundle."""
    logits = pair_logits(model, encoder, val.pairs, config.device)
    y = binary_labels(val.pairs)
    calibrator = fit_calibrator(config.calibration, logits, y)
    probs = calibrator.predict(logits)
    groups = [domain_of(p) for p in val.pairs] if config.threshold_groups == "domain" else None
    every_logit, every_pair = logits, val.pairs
    alpha, delta = config.target_error, config.delta  # both set whenever guarantee_halves kept a test half
    if guarantee_test is None or alpha is None or delta is None:
        choice = choose_thresholds(
            probs, y, max_error=config.target_error, max_escalation=config.target_escalation, delta=config.delta,
            groups=groups, clusters=[p.query_id for p in val.pairs],
        )
        metrics, evaluated = compute_metrics(val.pairs, probs, choice.policy), val
    else:
        evaluated = guarantee_test
        test_logits = pair_logits(model, encoder, evaluated.pairs, config.device)
        test_probs = calibrator.predict(test_logits)
        choice = learn_then_test(
            probs, y, test_probs, binary_labels(evaluated.pairs), alpha, delta,
            clusters=[p.query_id for p in evaluated.pairs],
            groups=np.array([domain_of(p) for p in evaluated.pairs]) if groups is not None else None,
            fit_clusters=[p.query_id for p in val.pairs])
        metrics = {**compute_metrics(evaluated.pairs, test_probs, choice.policy),
                   "measured_on": f"the {len(evaluated)} validation pairs of queries that neither chose the checkpoint "
                                  "nor fitted the calibration map, on which the band was tested"}
        every_logit, every_pair = np.concatenate([logits, test_logits]), [*val.pairs, *evaluated.pairs]
    auto_decided = round((1.0 - choice.escalation_rate) * len(evaluated.pairs))
    note = (small_sample_note(auto_decided, config.target_error, config.delta)
            if config.target_error is not None else None)
    if note and choice.labels_needed:
        note += (f"; by this model's error rates about {choice.labels_needed} labelled validation pairs in all "
                 f"({len(every_pair)} now) would show it")
    if note:
        logger.warning("validation split of %d pairs: %s", len(evaluated.pairs), note)
    from grader.torch_model import save_cross_encoder

    model_files = save_cross_encoder(model, out)
    shutil.copy(base_dir / "tokenizer.json", out / "tokenizer.json")
    shutil.rmtree(out / "checkpoint", ignore_errors=True)
    probe_rng = random.Random(config.seed)
    probe = probe_rng.sample(val.pairs, min(PROBE_SIZE, len(val.pairs)))
    if len(probe) < PROBE_SIZE:  # a small validation split: training pairs top the parity probe up
        probe += probe_rng.sample(train.pairs, min(PROBE_SIZE - len(probe), len(train.pairs)))
    write_pairs(probe, out / PROBE_FILE)
    (out / "training_history.json").write_text(json.dumps(history, indent=2) + "\n", encoding="utf-8")
    manifest = {
        "name": config.name,
        "backend": "torch",
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "base_model": str(config.base),
        "max_length": config.max_length,
        "input_names": ["input_ids", "attention_mask", "token_type_ids"],
        "model_files": {"torch": "model.safetensors"},
        "calibration": calibrator.to_dict(),
        "thresholds": {**choice.to_dict(), "small_sample_note": note},
        "training": {
            "config": {k: v for k, v in asdict(config).items() if k != "progress"},
            "train_data": train.summary(),
            "val_data": val.summary(),
            **({"threshold_test_data": guarantee_test.summary()} if guarantee_test is not None else {}),
            "steps": steps,
            "best_step": best_step,
            "best_val_auroc": best,
            "seconds": round(seconds, 1),
            "head": "segment-pooling cosine + linear (one logit, BCE; partial -> partial_target)",
        },
        "metrics": {"validation": metrics},
        "versions": library_versions(),
        # too few validation pairs for a meaningful reference: the bundle then has no shift detection
        "reference": (make_reference(every_logit, [len(p.text) for p in every_pair], [p.query_id for p in every_pair],
                                     groups=[domain_of(p) for p in every_pair] if config.threshold_groups else None)
                      if len(every_pair) >= MIN_REFERENCE_PAIRS else {}),
    }
    files = [*model_files, "tokenizer.json", PROBE_FILE, "training_history.json"]
    write_manifest(out, manifest, files)
    return TrainResult(out=out, best_val_auroc=best, steps=steps, seconds=seconds, metrics=metrics,
                       thresholds=choice.to_dict())
