import json
from dataclasses import replace

import numpy as np
import pytest

from grader import load_grader
from models import BundleError, ConfigError, ParityError, read_bundle
from training.data import load_pairs
from training.evaluate import evaluate_bundle, write_plots
from training.export import export_bundle
from training.finetune import TrainConfig

REPORT_KEYS = {"auroc", "auroc_strict", "accuracy", "macro_f1", "escalation_rate", "auto_error_rate", "ece",
               "brier", "n"}


def test_trained_bundle_is_self_describing(tiny_torch_bundle):
    m = read_bundle(tiny_torch_bundle).manifest
    assert m.backend == "torch" and m.max_length == 64
    assert m.training["config"]["seed"] == 13 and m.training["steps"] == 3
    assert m.training["train_data"]["pairs"] > 0 and m.training["val_data"]["pairs"] > 0
    assert m.calibration["method"] == "platt"
    assert m.thresholds["target"]["max_escalation"] == 0.3
    assert m.thresholds["escalation_rate"] <= 0.3
    assert set(m.metrics["validation"]) >= REPORT_KEYS
    assert {"torch", "transformers", "python"} <= set(m.versions)
    assert (tiny_torch_bundle / "probe.jsonl").is_file()


def test_torch_and_onnx_backends_agree(tiny_torch_bundle, tiny_onnx_bundle):
    torch_grader = load_grader(tiny_torch_bundle, backend="torch")
    onnx_grader = load_grader(tiny_onnx_bundle, variant="fp32")
    chunks = ["Normandy is a region in France.", "Bananas are yellow.", "The Normans came from Norway."]
    a = [g.probability for g in torch_grader.grade("Where is Normandy?", chunks)]
    b = [g.probability for g in onnx_grader.grade("Where is Normandy?", chunks)]
    np.testing.assert_allclose(a, b, atol=1e-4)
    with pytest.raises(BundleError, match="export it to ONNX first"):
        load_grader(tiny_torch_bundle, backend="onnx")
    with pytest.raises(BundleError, match="torch backend needs"):
        load_grader(tiny_onnx_bundle, backend="torch")


def test_export_records_parity(tiny_onnx_bundle):
    m = read_bundle(tiny_onnx_bundle).manifest
    assert m.backend == "onnx" and set(m.model_files) == {"fp32", "int8"}
    assert m.parity["fp32"]["max_logit_diff"] < 1e-3
    assert m.parity["int8"]["verdict_flip_share"] <= 0.02
    assert m.calibration == read_bundle(tiny_onnx_bundle).manifest.calibration
    assert (tiny_onnx_bundle / "model.int8.onnx").stat().st_size < (tiny_onnx_bundle / "model.onnx").stat().st_size


def test_exported_bundle_follows_the_umask_so_other_users_can_read_it(tiny_onnx_bundle):
    import os

    mask = os.umask(0)
    os.umask(mask)
    assert tiny_onnx_bundle.stat().st_mode & 0o777 == 0o777 & ~mask
    assert (tiny_onnx_bundle / "manifest.json").stat().st_mode & 0o777 == 0o666 & ~mask


def test_failed_parity_gate_leaves_no_bundle(tiny_torch_bundle, tmp_path):
    out = tmp_path / "never"
    with pytest.raises(ParityError, match="bundle not written"):
        export_bundle(tiny_torch_bundle, out, int8=False, fp32_tolerance=0.0)
    assert not out.exists()


def test_export_input_errors(tiny_onnx_bundle, tiny_torch_bundle, tmp_path):
    with pytest.raises(BundleError, match="already an onnx bundle"):
        export_bundle(tiny_onnx_bundle, tmp_path / "x")
    with pytest.raises(ConfigError, match="nothing to export"):
        export_bundle(tiny_torch_bundle, tmp_path / "x", int8=False, keep_fp32=False)
    with pytest.raises(ConfigError, match="no probe pairs"):
        export_bundle(tiny_torch_bundle, tmp_path / "x", probe=tmp_path / "nope.jsonl")


def test_export_never_deletes_what_is_not_an_earlier_export(tiny_torch_bundle, tiny_onnx_bundle, tmp_path):
    work = tmp_path / "my project"
    work.mkdir()
    (work / "notes.txt").write_text("mine")
    for out in (work, tiny_torch_bundle, work / "notes.txt"):
        with pytest.raises(ConfigError, match="not an exported ONNX bundle"):
            export_bundle(tiny_torch_bundle, out, int8=False)
    assert (work / "notes.txt").read_text() == "mine" and read_bundle(tiny_torch_bundle).manifest.backend == "torch"
    again = tmp_path / "again"  # an earlier export is replaced once the gate passes; an empty directory is fine
    export_bundle(tiny_torch_bundle, again, int8=False)
    (again / "stale.txt").write_text("from the earlier export")
    export_bundle(tiny_torch_bundle, again, int8=False)
    assert not (again / "stale.txt").exists() and read_bundle(again).manifest.backend == "onnx"
    (tmp_path / "empty").mkdir()
    assert read_bundle(export_bundle(tiny_torch_bundle, tmp_path / "empty", int8=False)).manifest.backend == "onnx"


def test_export_embedder_refuses_a_directory_it_did_not_write(tiny_onnx_bundle, tmp_path):
    from training.export_embedder import export_embedder

    before = {p.name: p.read_bytes() for p in tiny_onnx_bundle.iterdir() if p.is_file()}
    work = tmp_path / "mine"
    work.mkdir()
    (work / "model.int8.onnx").write_text("my own model")
    for out in (tiny_onnx_bundle, work):  # a grader bundle has a model.int8.onnx too: it used to be overwritten
        with pytest.raises(ConfigError, match="is not an exported embedder"):
            export_embedder(out)
    assert {p.name: p.read_bytes() for p in tiny_onnx_bundle.iterdir() if p.is_file()} == before
    assert (work / "model.int8.onnx").read_text() == "my own model"
    for length, named in ((3, "max_length must be an int >= 16"), (1024, "max_length=1024, but all-MiniLM-L6-v2 "
                                                                       "has 512 positions")):
        with pytest.raises(ConfigError, match=named):  # 1024 used to export a model that failed on long texts
            export_embedder(tmp_path / "new", max_length=length)
    for name in ("", "  ", 7):  # an index tells embedders apart by name: an empty one would match nothing
        with pytest.raises(ConfigError, match="name must be a non-empty string"):
            export_embedder(tmp_path / "new", name=name)
    assert not (tmp_path / "new").exists()


def test_a_max_length_beyond_the_base_models_positions_is_refused_before_training(squad_pairs_file, tmp_path):
    from training.finetune import train_grader

    pairs = load_pairs(squad_pairs_file)
    with pytest.raises(ConfigError, match=r"max_length=1024, but the model to train .* has 512 positions"):
        train_grader(pairs, pairs, tmp_path / "m", TrainConfig(max_length=1024, max_steps=1, progress=False))
    assert not (tmp_path / "m").exists()  # it used to fail inside the model at the first long batch


def test_replaceable_dir_accepts_new_empty_and_earlier_outputs(tmp_path):
    from models.output import check_replaceable_dir

    earlier = tmp_path / "earlier"
    earlier.mkdir()
    (earlier / "manifest.json").write_text(json.dumps({"kind": "embedder"}))
    (tmp_path / "empty").mkdir()
    for out in (tmp_path / "new", tmp_path / "empty", earlier):
        check_replaceable_dir(out, key="kind", value="embedder", what="an exported embedder")
    (earlier / "manifest.json").write_text("{not json")
    with pytest.raises(ConfigError, match="choose a new directory"):
        check_replaceable_dir(earlier, key="kind", value="embedder", what="an exported embedder")


def test_training_never_overwrites_a_bundle_or_other_files(tiny_torch_bundle, squad_pairs_file, tmp_path):
    from training.data import PairSet
    from training.finetune import train_grader

    pairs = load_pairs(squad_pairs_file).pairs
    before = (tiny_torch_bundle / "manifest.json").read_bytes()
    stray = tmp_path / "stray"
    stray.mkdir()
    (stray / "data.csv").write_text("q,t")
    for out, what in ((tiny_torch_bundle, "a trained bundle"), (stray, "other files"),
                      (stray / "data.csv", "is a file"), (stray / "data.csv" / "out", "cannot make this folder")):
        with pytest.raises(ConfigError, match=what):
            train_grader(PairSet(pairs[:16]), PairSet(pairs[40:70]), out, TrainConfig(max_steps=1, progress=False))
    assert (tiny_torch_bundle / "manifest.json").read_bytes() == before and (stray / "data.csv").read_text() == "q,t"
    interrupted = tmp_path / "interrupted"  # what a stopped run leaves is picked up again (the recipe resumes so)
    (interrupted / "checkpoint").mkdir(parents=True)
    train_grader(PairSet(pairs[:16]), PairSet(pairs[40:70]), interrupted,
                 TrainConfig(max_length=64, max_steps=1, batch_size=8, progress=False))
    assert read_bundle(interrupted).manifest.backend == "torch" and not (interrupted / "checkpoint").exists()


def test_evaluate_report_and_plots(tiny_onnx_bundle, squad_pairs_file, tmp_path):
    with pytest.raises(ConfigError, match=r"data must be a PairSet \(training.data.load_pairs\(path\)\), got list"):
        evaluate_bundle(tiny_onnx_bundle, [("q", "t", 1)])  # was an AttributeError: 'list' ... 'pairs'
    report = evaluate_bundle(tiny_onnx_bundle, load_pairs(squad_pairs_file))
    assert set(report) >= REPORT_KEYS
    assert report["n"] == 90 and 0 <= report["auroc"] <= 1
    assert report["latency_ms_per_batch"]["p95"] >= report["latency_ms_per_batch"]["p50"] > 0
    cm = report["confusion_matrix"]["rows_gold_cols_predicted"]
    assert sum(map(sum, cm)) == 90
    paths = write_plots(report, tmp_path / "plots" / "tiny")
    assert [p.name for p in paths] == ["tiny_reliability.png", "tiny_tradeoff.png"]
    assert all(p.read_bytes()[:4] == b"\x89PNG" for p in paths)
    json.dumps(report)


@pytest.mark.parametrize("kwargs", [{"epochs": 0}, {"calibration": "magic"}, {"target_error": None},
                                    {"target_escalation": 0.2}, {"partial_target": 2}, {"layers": -1},
                                    {"distill_weight": 1.5}, {"teacher_score": "cosine"},
                                    {"init": "runs/x", "layers": 2}, {"freeze_layers": -1},
                                    {"freeze_layers": 1.5}, {"layers": 2, "freeze_layers": 3}])
def test_train_config_validation(kwargs):
    with pytest.raises(ConfigError, match="TrainConfig"):
        TrainConfig(**kwargs)


@pytest.mark.parametrize(("kwargs", "named"), [
    ({"max_minutes": -3}, "max_minutes must be >= 0 (0: no bound); got max_minutes=-3"),  # used to train unbounded
    ({"max_steps": -1}, "got max_steps=-1"), ({"eval_every": -5}, "got eval_every=-5"),
    ({"epochs": 0}, "epochs must be > 0; got epochs=0"),
    ({"target_error": 0.0}, "max_error (--target-error) must be strictly between 0 and 1, got 0.0"),
    ({"delta": 1.0}, "delta (--delta) must be strictly between 0 and 1, got 1.0"),
    ({"learning_rate": "2e-5"}, "learning_rate must be a number, got str '2e-5'"),  # was a TypeError
    ({"seed": "x"}, "seed must be an int, got str 'x'"), ({"batch_size": True}, "batch_size must be an int"),
])
def test_train_config_names_the_value_that_fails(kwargs, named):
    with pytest.raises(ConfigError) as caught:
        TrainConfig(**kwargs)
    assert named in str(caught.value)


def test_parity_gate_is_a_binomial_test_not_a_raw_share():
    from training.export import FLIP_SIGNIFICANCE, flip_p_value

    one_flip_small_probe = {"probe_pairs": 45, "verdict_flip_share": 1 / 45}  # 2.2% > 2%, yet no evidence
    assert flip_p_value(one_flip_small_probe, 0.02) > FLIP_SIGNIFICANCE
    many_flips = {"probe_pairs": 1000, "verdict_flip_share": 0.04}
    assert flip_p_value(many_flips, 0.02) < FLIP_SIGNIFICANCE
    assert flip_p_value({"probe_pairs": 10, "verdict_flip_share": 0.0}, 0.0) == 1.0


def test_small_validation_split_warns_and_tops_up_the_probe(squad_pairs_file, tmp_path, caplog):
    import logging

    from training.data import PairSet
    from training.finetune import train_grader
    from training.model_card import write_model_card
    from training.splits import group_split

    train, val = group_split(load_pairs(squad_pairs_file).pairs, test_size=0.3, by="query", seed=3)
    out = tmp_path / "small"
    with caplog.at_level(logging.WARNING):
        train_grader(PairSet(train), PairSet(val), out,
                     TrainConfig(max_length=32, max_steps=1, batch_size=8, progress=False, name="small"))
    note = read_bundle(out).manifest.thresholds["small_sample_note"]
    assert "needs at least 45 auto-decided pairs" in note and note in caplog.text
    assert len(load_pairs(out / "probe.jsonl").pairs) == len(train) + len(val)  # fewer than 256: all of them
    write_model_card(out, {})
    assert f"**Warning:** {note}" in (out / "MODEL_CARD.md").read_text(encoding="utf-8")


def test_a_student_has_fewer_layers_and_learns_from_its_teacher(tiny_onnx_bundle, squad_pairs_file, tmp_path):
    from training.data import PairSet
    from training.finetune import teacher_probabilities, train_grader

    pairs = load_pairs(squad_pairs_file).pairs
    teacher = load_grader(tiny_onnx_bundle, cache_pairs=0)
    soft = teacher_probabilities(tiny_onnx_bundle, pairs[:6])
    logits = teacher.score_pairs([(p.query, p.text) for p in pairs[:6]]).logits
    assert np.allclose(soft, 1 / (1 + np.exp(-logits)))  # the teacher's own cross-encoder probability
    out = tmp_path / "student"
    result = train_grader(PairSet(pairs[:40]), PairSet(pairs[40:70]), out,
                          TrainConfig(max_length=64, max_steps=2, batch_size=8, progress=False, layers=2,
                                      teacher=str(tiny_onnx_bundle), distill_weight=0.5, target_escalation=0.5,
                                      target_error=None, name="student"))
    config = json.loads((out / "config.json").read_text())
    assert config["num_hidden_layers"] == 2 and result.steps == 2
    recorded = read_bundle(out).manifest.training
    assert recorded["config"]["layers"] == 2 and recorded["config"]["teacher"] == str(tiny_onnx_bundle)


def test_a_fused_student_starts_from_a_checkpoint_and_learns_the_fused_probability(tiny_torch_bundle,
                                                                                  squad_pairs_file, tmp_path):
    from training.data import PairSet
    from training.finetune import teacher_probabilities, train_grader

    pairs = load_pairs(squad_pairs_file).pairs
    teacher = load_grader("default", cache_pairs=0)
    soft = teacher_probabilities("default", pairs[:6], "fused")
    scored = teacher.score_pairs([(p.query, p.text) for p in pairs[:6]])
    assert np.allclose(soft, teacher.probabilities(scored.logits))  # calibrated, cosine included
    assert not np.allclose(soft, teacher_probabilities("default", pairs[:6]))  # not the cross-encoder alone
    out = tmp_path / "fused-student"
    train_grader(PairSet(pairs[:24]), PairSet(pairs[40:70]), out,
                 TrainConfig(max_length=64, max_steps=1, batch_size=8, progress=False, init=str(tiny_torch_bundle),
                             teacher="default", teacher_score="fused", target_escalation=0.5, target_error=None,
                             name="fused-student"))
    assert json.loads((out / "config.json").read_text()) == json.loads((tiny_torch_bundle / "config.json").read_text())
    assert read_bundle(out).manifest.training["config"]["init"] == str(tiny_torch_bundle)


def test_training_on_top_of_the_cosine_learns_from_the_sum_and_records_the_offset(squad_pairs_file, tmp_path):
    from grader.embedder import OnnxMiniLMEmbedder
    from grader.fusion import cosines
    from training.data import PairSet
    from training.finetune import cosine_offsets, train_grader

    pairs = load_pairs(squad_pairs_file).pairs
    train, val = pairs[:40], pairs[40:70]
    offset, val_offset, fitted = cosine_offsets(train, val)
    cos_val = cosines(OnnxMiniLMEmbedder(), [(p.query, p.text) for p in val])
    assert fitted["weight"] > 0  # relevant pairs are the closer ones
    assert np.allclose(val_offset, fitted["weight"] * cos_val + fitted["bias"], atol=1e-5)
    assert offset.shape == (40,)
    out = tmp_path / "on-cosine"
    train_grader(PairSet(train), PairSet(val), out,
                 TrainConfig(max_length=64, max_steps=2, batch_size=8, progress=False, layers=1, cosine_offset=True,
                             target_escalation=0.5, target_error=None, name="on-cosine"))
    recorded = read_bundle(out).manifest.training["config"]
    assert recorded["cosine_offset"] is True
    assert recorded["extra"]["cosine_offset"] == pytest.approx(fitted)


def test_the_offset_reads_the_embedder_it_is_given_the_one_the_recipe_fuses(squad_pairs_file, tmp_path):
    from training.export_embedder import export_embedder
    from training.finetune import cosine_offsets

    pairs = load_pairs(squad_pairs_file).pairs
    export_embedder(tmp_path / "untrained", name="untrained-for-offset")
    _, shipped_val, shipped = cosine_offsets(pairs[:40], pairs[40:70])
    _, other_val, other = cosine_offsets(pairs[:40], pairs[40:70], tmp_path / "untrained")
    assert other["embedder"] == "untrained-for-offset" and shipped["embedder"] == "crag-minilm-l6-tuned-v1"
    assert not np.allclose(other_val, shipped_val)


def test_soft_targets_are_learnt_from_recorded_and_checked(squad_pairs_file, tmp_path):
    from safetensors.numpy import load_file

    from training.data import PairSet
    from training.finetune import train_grader

    pairs = load_pairs(squad_pairs_file).pairs
    train, val = PairSet(pairs[:16]), PairSet(pairs[40:70])
    config = TrainConfig(max_length=64, max_steps=2, batch_size=8, progress=False, layers=1, distill_weight=1.0,
                         target_escalation=0.5, target_error=None, name="soft")
    train_grader(train, val, tmp_path / "labels", config)
    train_grader(train, val, tmp_path / "ones", config, soft_targets=np.ones(16))
    labels, ones = (load_file(str(tmp_path / name / "model.safetensors")) for name in ("labels", "ones"))
    assert ones["bias"] > labels["bias"]  # every target 1: the bias is pushed up, not as the labels push it
    recorded = read_bundle(tmp_path / "ones").manifest.training["config"]["extra"]["soft_targets"]
    assert recorded == {"pairs": 16, "mean": 1.0, "weight": 1.0}
    for bad in (np.ones(15), np.full(16, 1.5)):
        with pytest.raises(ConfigError, match="soft_targets must be 16 probabilities"):
            train_grader(train, val, tmp_path / "bad", config, soft_targets=bad)
    with pytest.raises(ConfigError, match=r"exclude TrainConfig\.teacher"):
        train_grader(train, val, tmp_path / "bad", replace(config, teacher="default"), soft_targets=np.ones(16))
    assert not (tmp_path / "bad").exists()  # refused before anything is written


@pytest.mark.parametrize("device", ["cuda", "tpu", "not-a-device"])
def test_a_device_torch_cannot_train_on_here_is_refused_before_anything_is_written(device, squad_pairs_file,
                                                                                  tmp_path):
    import torch

    from training.data import PairSet
    from training.finetune import train_grader

    if device == "cuda" and torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    pairs = load_pairs(squad_pairs_file).pairs
    with pytest.raises(ConfigError, match=f"device '{device}'"):
        train_grader(PairSet(pairs[:16]), PairSet(pairs[40:70]), tmp_path / "out",
                     TrainConfig(max_steps=1, progress=False, device=device))
    assert not (tmp_path / "out").exists()


def test_validation_runs_several_times_an_epoch_by_default(squad_pairs_file, tmp_path):
    from training.data import PairSet
    from training.finetune import train_grader

    pairs = load_pairs(squad_pairs_file).pairs
    out = tmp_path / "cadence"
    # 24 steps in one epoch: validated every 10 steps (a quarter epoch is 6, below the 10-step floor) and at the end
    train_grader(PairSet(pairs[:24]), PairSet(pairs[40:70]), out,
                 TrainConfig(max_length=32, epochs=1, batch_size=1, progress=False, target_escalation=0.5,
                             target_error=None, patience=5))
    history = json.loads((out / "training_history.json").read_text())
    assert [h["step"] for h in history] == [10, 20, 24]
    assert TrainConfig().epochs == 3.0 and TrainConfig().patience == 3


def test_training_on_one_kind_of_label_says_what_is_missing(squad_pairs_file, tmp_path):
    from dataclasses import replace

    from models.types import Verdict
    from training.data import PairSet
    from training.finetune import train_grader

    pairs = load_pairs(squad_pairs_file).pairs
    for label, fix in ((Verdict.IRRELEVANT, "label the pairs that answer"), (Verdict.RELEVANT, "crag mine")):
        same = [replace(p, label=label) for p in pairs]
        with pytest.raises(ConfigError, match=f"pairs are labelled .*{fix}"):
            train_grader(PairSet(same[:16]), PairSet(same[40:70]), tmp_path / "out",
                         TrainConfig(max_steps=1, progress=False))
        assert not (tmp_path / "out").exists()  # refused before anything is written


def test_frozen_lower_layers_keep_their_starting_weights_and_the_rest_trains(squad_pairs_file, tmp_path, capsys):
    from safetensors.torch import load_file

    from grader.torch_model import WEIGHTS_FILE, build_cross_encoder
    from pipeline.cli.main import main
    from training.base_models import resolve_base

    out = tmp_path / "frozen"
    assert main(["train", "--data", str(squad_pairs_file), "--out", str(out), "--freeze-layers", "2",
                 "--max-length", "48", "--batch-size", "8", "--max-steps", "3", "--eval-every", "3",
                 "--target-escalation", "0.3", "--compare-with", "none", "--no-progress"]) == 0
    capsys.readouterr()
    trained = load_file(str(out / WEIGHTS_FILE))
    start = build_cross_encoder(resolve_base("default-base")).state_dict()
    frozen = [k for k in start if "embeddings" in k or ".layer.0." in k or ".layer.1." in k]
    moved = [k for k in start if ".layer.5." in k and k.endswith("weight")]
    assert frozen and moved
    assert all(np.array_equal(trained[k].numpy(), start[k].numpy()) for k in frozen)
    assert all(not np.array_equal(trained[k].numpy(), start[k].numpy()) for k in moved)
    assert read_bundle(out).manifest.training["config"]["freeze_layers"] == 2


def test_freezing_more_layers_than_the_model_has_is_refused_by_name():
    from grader.torch_model import build_cross_encoder
    from training.base_models import resolve_base
    from training.finetune import freeze_lower_layers

    model = build_cross_encoder(resolve_base("default-base"), layers=2)
    with pytest.raises(ConfigError, match="freeze_layers=3, but the model has 2 layers"):
        freeze_lower_layers(model, 3)
    assert freeze_lower_layers(model, 0) == 0 and all(p.requires_grad for p in model.parameters())
    frozen = freeze_lower_layers(model, 2)  # every layer: only the head trains
    assert frozen == sum(p.numel() for p in model.encoder.parameters())
    assert all(p.requires_grad for p in model.head_parameters())


def test_a_student_deeper_than_its_base_is_refused_by_name(tmp_path):
    from grader.torch_model import build_cross_encoder
    from training.base_models import resolve_base
    from training.recipe import RecipeConfig, run_default_recipe

    base = resolve_base("default-base")
    with pytest.raises(ConfigError, match=r"layers=7, but the base model .* has 6 layers"):
        build_cross_encoder(base, layers=7)  # transformers would add a randomly initialised seventh layer
    assert build_cross_encoder(base, layers=6).encoder.config.num_hidden_layers == 6
    with pytest.raises(ConfigError, match="layers=7"):  # before any data is prepared (the data dir is not there)
        run_default_recipe(tmp_path / "no-data", tmp_path / "work", tmp_path / "out", RecipeConfig(layers=7))
    with pytest.raises(BundleError, match="no grader bundle named or at 'nope'"):
        run_default_recipe(tmp_path / "no-data", tmp_path / "work", tmp_path / "out", RecipeConfig(teacher="nope"))
    assert not (tmp_path / "work").exists()


def test_a_guarantee_tests_the_thresholds_on_validation_queries_that_chose_nothing(squad_pairs_file, tmp_path):
    from training.data import PairSet
    from training.finetune import guarantee_halves, train_grader
    from training.splits import group_split

    train, val = (PairSet(part) for part in group_split(load_pairs(squad_pairs_file).pairs, test_size=0.5,
                                                         by="query", seed=3))
    config = TrainConfig(max_length=48, batch_size=8, max_steps=2, eval_every=2, target_error=0.3, delta=0.3,
                         progress=False)
    choose, test = guarantee_halves(val, config)
    assert test is not None and len(choose) + len(test) == len(val)
    assert not {p.query_id for p in choose.pairs} & {p.query_id for p in test.pairs}  # whole queries on each side
    assert guarantee_halves(val, replace(config, delta=None)) == (val, None)  # no guarantee: all of it chooses
    result = train_grader(train, val, tmp_path / "g", config)
    training = read_bundle(tmp_path / "g").manifest.training
    assert training["val_data"]["pairs"] == len(choose) and training["threshold_test_data"]["pairs"] == len(test)
    assert result.metrics["n"] == len(test) and "neither chose the checkpoint" in result.metrics["measured_on"]
    assert result.thresholds["target"]["delta"] == 0.3


def test_an_infeasible_guarantee_says_how_many_validation_labels_would_do(squad_pairs_file, tmp_path, caplog):
    import logging

    from training.data import PairSet
    from training.finetune import train_grader
    from training.splits import group_split

    train, val = (PairSet(part) for part in group_split(load_pairs(squad_pairs_file).pairs, test_size=0.5,
                                                         by="query", seed=3))
    with caplog.at_level(logging.WARNING):
        result = train_grader(train, val, tmp_path / "g", TrainConfig(
            max_length=48, batch_size=8, max_steps=2, eval_every=2, target_error=0.05, delta=0.1, progress=False))
    needed = result.thresholds["labels_needed"]
    assert not result.thresholds["feasible"] and needed > len(val)
    note = read_bundle(tmp_path / "g").manifest.thresholds["small_sample_note"]
    assert f"about {needed} labelled validation pairs in all ({len(val)} now)" in note and note in caplog.text


def test_a_guarantee_needs_both_labels_in_each_half_of_validation(squad_pairs_file, tmp_path):
    from models.types import Verdict
    from training.data import PairSet
    from training.finetune import train_grader

    pairs = load_pairs(squad_pairs_file).pairs
    queries = sorted({p.query_id for p in pairs})
    mixed = [p for p in pairs if p.query_id == queries[0]]
    unanswered = [replace(p, label=Verdict.IRRELEVANT) for p in pairs if p.query_id == queries[1]]
    assert {p.label for p in mixed} >= {Verdict.RELEVANT, Verdict.IRRELEVANT}
    train = PairSet([p for p in pairs if p.query_id not in queries[:2]])
    with pytest.raises(ConfigError, match=r"with --delta the validation queries are split in two.*more queries"):
        train_grader(train, PairSet(mixed + unanswered), tmp_path / "out",
                     TrainConfig(max_steps=1, target_error=0.1, delta=0.1, progress=False))
    assert not (tmp_path / "out").exists()
