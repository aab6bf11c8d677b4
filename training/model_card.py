"""The model card of a bundle: data, licences, metrics and intended use, written next to the manifest."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from grader.fusion import FusionHead
from grader.policy import answer_floor_of
from models.bundle import read_bundle
from training.recalibrate import calibrate_command

__all__ = ["ce_range_sentence", "rewrite_card_section", "rewrite_reference_section", "write_model_card"]

METRIC_KEYS = ("n", "auroc", "auroc_strict", "accuracy", "macro_f1", "escalation_rate", "auto_error_rate",
               "ece", "brier")


def _fmt(value: Any) -> str:
    if value is None:
        return "n/a"
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def _metrics_table(reports: dict[str, dict[str, Any]]) -> list[str]:
    lines = ["| data set | " + " | ".join(METRIC_KEYS) + " |", "|---" * (len(METRIC_KEYS) + 1) + "|"]
    for name, report in reports.items():
        lines.append(f"| {name} | " + " | ".join(_fmt(report.get(k)) for k in METRIC_KEYS) + " |")
    return lines


def _trained_domains(m: Any) -> set[str]:
    """Domains of the training split, from the recipe's mix summary (empty when the bundle has none)."""
    mix = m.training.get("config", {}).get("extra", {}).get("training_mix", {})
    return set(mix.get("train", {}).get("by_domain", {}))


def _label(name: str, trained: set[str]) -> str:
    """A data set's name, marked when its domain was never trained on."""
    domain = name.split(":", 1)[-1]
    return f"{name} (not in training)" if trained and domain not in trained else name


def _threshold_rows(m: Any, trained: set[str]) -> list[str]:
    """Auto-decided error and escalation at the bundle's thresholds, per domain of the calibration data."""
    per_group = m.thresholds.get("per_group") or {}
    if not per_group:
        return []
    lines = ["", "### At the bundle's thresholds, per domain of the calibration data (not held out)",
             "| domain | pairs | auto-decided | auto-decided error | escalated |", "|---|---|---|---|---|"]
    for name, g in per_group.items():
        lines.append(f"| {_label(name, trained)} | {g['n']} | {g['auto_decided']} | {g['auto_error_rate']:.2%} | "
                     f"{g['escalation_rate']:.1%} |")
    return lines


def _baseline_rows(reports: dict[str, dict[str, Any]], trained: set[str]) -> list[str]:
    """Per held-out domain: the grader's AUROC next to the untrained bi-encoder's, when measured."""
    rows = [(name, r) for name, r in reports.items() if r.get("biencoder_auroc") is not None]
    if not rows:
        return []
    lines = ["", "### Against the untrained all-MiniLM-L6-v2 bi-encoder (cosine), same pairs",
             "| data set | grader AUROC | bi-encoder AUROC | difference |", "|---|---|---|---|"]
    for name, r in rows:
        lines.append(f"| {_label(name, trained)} | {r['auroc']:.4f} | {r['biencoder_auroc']:.4f} | "
                     f"{r['auroc'] - r['biencoder_auroc']:+.4f} |")
    return lines


def embedder_description(bundle_dir: Path, m: Any) -> str:
    """What a fused bundle's embedder folder holds, from its manifest: the frozen all-MiniLM-L6-v2 or another export
    (the recipe's fine-tuned one, which the index embeds with too)."""
    from training.recipe import EMBEDDER_NAME  # lazily: the recipe module imports this one to write cards

    try:
        embedder = json.loads((bundle_dir / FusionHead.from_dict(m.fusion).embedder / "manifest.json")
                              .read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "the bi-encoder whose cosine is fused, int8"
    name = str(embedder.get("name", "all-MiniLM-L6-v2"))
    if name == "all-MiniLM-L6-v2":
        return "the frozen all-MiniLM-L6-v2 bi-encoder, int8"
    if name == EMBEDDER_NAME:
        return (f"the bi-encoder `{name}`: all-MiniLM-L6-v2 fine-tuned contrastively on the recipe's training split "
                "(`crag train-embedder`, `training.recipe.tuned_embedder`), int8; the shipped index embedder "
                "(`models/embedders/minilm-l6`) is the same model, so a search's vectors are reused")
    return f"the bi-encoder `{name}` ({embedder.get('source', 'an export of crag export-embedder')}), int8"


def ce_range_sentence(head: FusionHead) -> str:
    """The model card's words for a head's cross-encoder range (empty when it has none or does not use it)."""
    if head.ce_range is None or not head.uses_cross_encoder:
        return ""
    return (f" The cross-encoder logit is kept in [{head.ce_range[0]:.2f}, {head.ce_range[1]:.2f}] (the fusion data's"
            " range and a tenth of it each way), so the cosine alone tells which pairs cannot reach a floor"
            " (refinement skips their reads).")


def _fusion_lines(m: Any, trained: set[str]) -> list[str]:
    """How the cosine was mixed in (crag fuse) and what each domain gained, leaving it out or not."""
    fusion = m.metrics.get("fusion")
    if not m.fusion or not fusion:
        return []
    head = FusionHead.from_dict(m.fusion)
    w_ce, w_cos = head.weights
    lines = ["", "## Fusion with the bi-encoder (`crag fuse`)",
             f"score = {w_ce:.4f} * cross-encoder logit + {w_cos:.4f} * bi-encoder cosine + {head.bias:.4f}"
             f" (cosine share {fusion['cosine_share']:.2f} of the standardised score), chosen so that the worst"
             " domain of the fusion data gains the most over the cosine alone; then calibrated and thresholded."
             + ("" if head.uses_cross_encoder else " The cross-encoder got no weight: this bundle grades by the"
                " calibrated cosine alone and never runs it (`crag adapt` still reads it, to refit the mix).")
             + ce_range_sentence(head),
             "| domain (fusion data) | pairs | cross-encoder | bi-encoder | fused | fused, domain left out |",
             "|---|---|---|---|---|---|"]
    for name, r in fusion["per_group"].items():
        held = fusion.get("leave_one_domain_out", {}).get(name, {})
        lines.append(f"| {_label(name, trained)} | {r['pairs']} | {r['auroc_cross_encoder']:.4f} | "
                     f"{r['auroc_biencoder']:.4f} | {r['auroc_fused']:.4f} | {_fmt(held.get('auroc_fused'))} |")
    parity = m.parity.get("fused_int8")
    if parity:
        lines.append(f"\nint8 vs fp32 cross-encoder, fused verdicts on {parity['probe_pairs']} pairs: "
                     f"{parity['verdict_flip_share']:.2%} flipped, {parity['decision_change_share']:.2%} changed band.")
    parity = m.parity.get("fused_embedder_int8")
    if parity:
        lines.append(f"int8 vs fp32 bi-encoder, fused verdicts on {parity['probe_pairs']} pairs: "
                     f"{parity['verdict_flip_share']:.2%} flipped, {parity['decision_change_share']:.2%} changed band "
                     f"(`{parity.get('measured_by', 'bench/bench_fused_embedder_parity.py')}`).")
    return lines


def _reference_lines(m: Any) -> list[str]:
    """What the shift alarm compares live scores with (grader.shift)."""
    ref = m.reference
    if not ref:
        return []
    effect = ref.get("design_effect") or {}
    detail = (f" ({effect['queries']} queries); design effects {effect['logit']:.3f} on scores and "
              f"{effect['length']:.3f} on chunk lengths (windows of {effect['chunks_per_query']} chunks per query)"
              if {"queries", "logit", "length", "chunks_per_query"} <= set(effect) else "; no design effects (an "
              "older reference: the alarm treats chunks as independent)")
    groups = ref.get("groups") or {}
    sizes = ", ".join(f"{name} {int(sub.get('n', 0)):,}" for name, sub in groups.items())
    per_group = (f" Each of its {len(groups)} domains also has a reference of its own ({sizes} pairs): live data "
                 "like any one of them is not taken for a shift." if groups else "")
    return ["", "## Shift reference",
            f"{ref.get('n', 0):,} pairs of the calibration data{detail}.{per_group} Remake it for other calibration "
            "data with `crag reference --model <bundle> --data <pairs.jsonl> --out <new bundle> [--group-by domain]`."]


def _answerability_lines(m: Any) -> list[str]:
    """The grader-only answer floor (`crag answerability`) and what it does to each domain's answer rate."""
    floor = answer_floor_of(m.answerability, m.name)
    if floor is None:
        return []
    entry = m.answerability
    fitted = entry.get("fitted_on") or {}
    lines = ["", "## Answerability floor (grader-only answers)",
             f"Without an LLM, the pipeline answers only when some retrieved chunk reaches P = {floor:.3f};",
             "otherwise it abstains instead of quoting related text. Fitted by `crag answerability` on "
             f"{fitted.get('queries')} questions",
             f"(`{fitted.get('path')}`) as the {entry.get('objective')} (binding: {entry.get('binding_group')}).",
             "Per domain: answerable questions and the share answered, unanswerable ones (no relevant or partial",
             "chunk) and the share abstained on, and the AUROC of the best chunk's probability for answerability:", "",
             "| data | domain | answerable | answered | unanswerable | abstained | AUROC |",
             "|---|---|---|---|---|---|---|"]
    for part, groups in (("fit", entry.get("fit") or {}), ("test", (entry.get("test") or {}).get("groups") or {})):
        for name, row in groups.items():
            lines.append(f"| {part} | {name} | {row['answerable']} | {_fmt(row['answer_rate'])} | {row['unanswerable']}"
                         f" | {_fmt(row['abstention_rate'])} | {_fmt(row['auroc'])} |")
    settings = entry.get("fitted_with") or {}
    command = " ".join(["crag answerability --model <bundle>", f"--data {settings.get('data')}",
                        *([f"--test {settings['test']}"] if settings.get("test") else []),
                        *([f"--columns '{settings['columns']}'"] if settings.get("columns") else []),
                        *([f"--label-map '{settings['label_map']}'"] if settings.get("label_map") else []),
                        *([f"--group-by {settings['group_by']}"] if settings.get("group_by") else []),
                        f"--min-answer-rate {settings.get('min_answer_rate')}", "--out <new bundle>"])
    return [*lines, "", f"Reproduce: `{command}`. Turn it off or move it per run with `crag ask --answer-floor P`",
            "(`RAGConfig(answer_floor=P)`; 0 = off)."]


SECTIONS = {"## Shift reference": _reference_lines,
            "## Answerability floor (grader-only answers)": _answerability_lines}


def rewrite_card_section(bundle_dir: str | Path, title: str) -> Path | None:
    """Re-render only one section of the card (``title``, a key of SECTIONS) from the manifest, after a command
    that changes only that part (`crag reference`, `crag answerability`): the copied card keeps every other
    section, which hold tables only `crag recipe` measures. None: no card."""
    bundle = read_bundle(bundle_dir)
    path = bundle.path / "MODEL_CARD.md"
    if not path.is_file():
        return None
    lines = path.read_text(encoding="utf-8").splitlines()
    fresh = SECTIONS[title](bundle.manifest)[1:]  # without the blank line that separates it in a new card
    start = next((i for i, line in enumerate(lines) if line.strip() == title), None)
    if start is None:  # an older card: the section goes before "Intended use", or at the end
        start = next((i for i, line in enumerate(lines) if line.startswith("## Intended use")), len(lines))
        lines[start:start] = [*fresh, ""]
    else:
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
        lines[start:end] = [*fresh, ""] if end < len(lines) else fresh
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def rewrite_reference_section(bundle_dir: str | Path) -> Path | None:
    """Re-render only the card's "Shift reference" section (after `crag reference`)."""
    return rewrite_card_section(bundle_dir, "## Shift reference")


def _recalibration_lines(m: Any) -> list[str]:
    """Say so when the calibration and thresholds were refitted after training (`crag calibrate` / `adapt`)."""
    data = m.training.get("recalibrated_on")
    if not data:
        return []
    ruled = m.metrics.get("recalibration", {}).get("rule_decided_left_out")
    settings = m.training.get("recalibrated_with")
    return [f"- Recalibrated after training (`crag calibrate`) on {data.get('pairs')} labelled pairs of"
            f" {data.get('queries')} queries (`{data.get('path')}`)"
            + (f"; {ruled} of them decided by rule (query echoes, no words) were left out of the fit" if ruled
               else "") + "."
            + (f" Reproduce: `{calibrate_command(settings)}`." if settings else "")]


def _weight_ensemble_lines(m: Any) -> list[str]:
    """Say so when the weights are an interpolation of the fine-tuned and the base model (WiSE-FT)."""
    ensemble = m.training.get("weight_ensemble")
    if not ensemble:
        return []
    alpha = float(ensemble.get("alpha", 1.0))
    return [f"- Weights: {alpha:.0%} the fine-tuned cross-encoder, {1 - alpha:.0%} its untrained base"
            f" (weight-space ensembling, WiSE-FT; {ensemble.get('fine_tuned')}), to keep what the base model knows"
            f" on domains not trained on. Made with `{ensemble.get('command')}`, then `crag export` and `crag fuse`."]


def _recipe_command(m: Any) -> str:
    """The `crag recipe` command that made this bundle: the options of its recorded recipe settings that differ
    from the recipe's defaults (a distilled student's --layers and --teacher, its --name, ...)."""
    from training.recipe import RecipeConfig  # lazily: the recipe module imports this one to write cards

    recorded = m.training.get("config", {}).get("extra", {}).get("recipe_config") or {}
    default = RecipeConfig()
    options = [f"--{key.replace('_', '-')} {recorded[key]:g}" if isinstance(recorded[key], float)
               else f"--{key.replace('_', '-')} {recorded[key]}"
               for key in ("seed", "layers", "teacher", "distill_weight", "max_minutes", "device")
               if key in recorded and recorded[key] != getattr(default, key)
               and (key != "distill_weight" or recorded.get("teacher"))]
    if recorded.get("cosine_offset"):
        options.append("--cosine-offset")
    name = recorded.get("name", default.name)
    if name != default.name:
        options.append(f"--name {name}")
    return " ".join(["crag recipe --data ../shared/data --work runs/v3", *options, f"--out runs/v3/{name}"])


def _weight_ensemble_reproduce(m: Any) -> list[str]:
    """For weights interpolated after the recipe: the steps after it, which the recipe does not take."""
    if not m.training.get("weight_ensemble"):
        return []
    return ["These weights are not the recipe's own: from its bundle, the weight ensemble, `crag calibrate` of the",
            "interpolated cross-encoder (a calibration of its own logits for the export's parity check), `crag export",
            "--int8`, `crag fuse` and `python bench/remeasure_heldout.py --model <bundle> --work runs/v3 --card` make",
            "this bundle and its tables (the README's *The shipped default grader* gives each command)."]


def write_model_card(bundle_dir: str | Path, reports: dict[str, dict[str, Any]]) -> Path:
    """Write MODEL_CARD.md into the bundle directory (it is not part of the hashed files)."""
    bundle = read_bundle(bundle_dir)
    m = bundle.manifest
    training = m.training
    t = m.thresholds
    validation = m.metrics.get("validation", {})
    trained = _trained_domains(m)
    config = training.get("config", {})
    layers = config.get("layers") or 6
    student = (f" Keeps the first {layers} of its 6 layers and was distilled from the teacher `{config['teacher']}` "
               f"(each target {config.get('distill_weight', 0.5):.0%} the teacher's probability, the rest the "
               "label)." if config.get("teacher") else f" Keeps the first {layers} of its 6 layers."
               if config.get("layers") else "")
    lines = [
        f"# Model card: crag-grader `{m.name}`",
        "",
        "A cross-encoder relevance grader for Corrective RAG: it reads (query, chunk) and returns a calibrated",
        "P(chunk is relevant), auto-accepting above `upper`, auto-rejecting below `lower` and flagging the band",
        "between for an LLM grader.",
        "",
        "## Model",
        f"- Base: all-MiniLM-L6-v2 (`{m.base_model}`, 6 layers, 384 hidden, Apache-2.0), fine-tuned as a binary",
        f"  cross-encoder ({training.get('head', 'binary')}), max_length {m.max_length}.{student}",
        f"- Files: {', '.join(sorted(m.model_files.values()))} (dynamic int8, onnxruntime); tokenizer.json"
        + (f"; embedder/ ({embedder_description(bundle.path, m)})." if m.fusion else "."),
        f"- Calibration: {m.calibration.get('method')}"
        + (" fitted on the fused logit of the fusion data." if m.fusion else " fitted on the validation split."),
        f"- Thresholds: lower {t.get('lower', 0):.4f}, upper {t.get('upper', 0):.4f},"
        f" chosen for target {t.get('target')};"
        f" on validation they escalate {t.get('escalation_rate', 0):.1%} with auto-decided error"
        f" {t.get('auto_error_rate', 0):.2%}."
        + (f" The guarantee was tested on effective pairs: design effect {t['design_effect']:.2f} of the errors"
           " by query (`grader/clustered.py`)." if t.get("design_effect") else "")
        + (f" **Warning:** {t['small_sample_note']}." if t.get("small_sample_note") else ""),
        *_weight_ensemble_lines(m),
        *_recalibration_lines(m),
        f"- Training: {training.get('steps')} steps in {training.get('seconds')} s on this project's 2-core CPU,"
        f" seed {training.get('config', {}).get('seed')};"
        f" best validation AUROC {_fmt(training.get('best_val_auroc'))}.",
        "",
        "## Data and licences",
        "Training mix (recipe in `training/recipe.py`, counts per domain and kind of negative in the manifest's",
        "`training.config.extra.training_mix`): Wikipedia (SQuAD 1.1 train and SQuAD 2.0 dev, CC BY-SA 4.0: own",
        "paragraph relevant, same-article and random paragraphs and adversarial unanswerables as negatives;",
        "WikiQA, Microsoft Research Data License, research use), web (TREC DL 2020/2021 judged MS MARCO passages,",
        "non-commercial research use), biomedical (PubMedQA-L, MIT) and tech-support FAQ (StackFAQ, CC BY-SA user",
        "content, research use), plus degenerate negatives written here (echoes of the question, near-empty text,",
        "page furniture). Consumer health (JHU COVID FAQ) and NovelEval are held out of training entirely. No",
        "dataset text is shipped; because of the research-only licences, check them before commercial use of the",
        "weights.",
        f"- Training pairs: {training.get('train_data', {}).get('pairs')}, validation pairs:"
        f" {training.get('val_data', {}).get('pairs')}.",
        "",
        "## Metrics (held-out data; measured by `crag recipe`, or for a bundle changed after it by",
        "`python bench/remeasure_heldout.py --model <bundle> --work runs/v3 --card`)",
        *_metrics_table({**({"validation of the cross-encoder (before fusion)": validation} if validation else {}),
                         **{_label(k, trained): v for k, v in reports.items()}}
                        if m.fusion else {"validation (thresholds chosen here)": validation, **reports}),
        *_baseline_rows(reports, trained),
        *_threshold_rows(m, trained),
        *_fusion_lines(m, trained),
        *_reference_lines(m),
        *_answerability_lines(m),
        "",
        "## Intended use and limits",
        "- Grading retrieved English chunks (sentences to ~250 tokens) for question-like queries in a CRAG",
        "  pipeline; longer chunks are read in overlapping windows of max_length (at most 8 by default; the",
        "  cross-encoder and the bi-encoder cosine each count their best window; `Grade.windows`), and text past",
        "  the last window is flagged `truncated`.",
        "- The thresholds were chosen so that the error target holds in each domain of the calibration data; on",
        "  a new domain, recalibrate on 100-300 labelled pairs with `crag calibrate` (finite-sample guarantee by",
        "  default), or fine-tune with `crag train`.",
        "- It judges whether a passage answers the question, not whether the passage is true.",
        "- A passage that copies the question's words but speaks of the opposite (\"right ventricular\" for",
        "  \"left ventricular\") can score above the upper threshold; `grade` withholds acceptance of such a",
        "  chunk (uncertain, with the reason: `grader/contrast.py`), but only for the opposites it lists.",
        "",
        f"Reproduce: `{_recipe_command(m)}` (trains, exports,",
        "fuses with `crag fuse`, calibrates and measures every table above; stages already in `--work` are reused;",
        f"the new bundle replaces `models/bundles/{m.name}` when copied over it).",
        *_weight_ensemble_reproduce(m),
        "",
    ]
    path = bundle.path / "MODEL_CARD.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path
