"""crag fuse: the mix chosen for the worst domain, the fused bundle verified, calibrated and parity-gated."""

import json

import numpy as np
import pytest

from grader import load_grader
from grader.embedder import EMBEDDER_DIR, OnnxMiniLMEmbedder
from grader.fusion import cosines
from models.errors import BundleError, ConfigError
from pipeline.cli.main import main
from training.data import load_pairs
from training.fusion import choose_fusion, fusion_choosers
from training.recalibrate import query_split


def _two_domains(seed=0, n=300):
    """Domain 'a': the cross-encoder separates well, the cosine a little; domain 'b': both a little, with
    independent noise, so that a mix beats either alone there."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, 2 * n)
    in_a = np.arange(2 * n) < n
    ce = np.where(in_a, 3.0, 1.0) * y + rng.normal(0, 1, 2 * n)
    cos = 0.1 * y + rng.normal(0, 0.1, 2 * n)
    return ce, cos, y, np.where(in_a, "a", "b").tolist()


def _min_gain(score, cos, y, groups):
    from sklearn.metrics import roc_auc_score

    g = np.asarray(groups)
    return min(roc_auc_score(y[g == n], score[g == n]) - roc_auc_score(y[g == n], cos[g == n]) for n in ("a", "b"))


def test_the_mix_serves_the_worst_domain_not_the_average():
    ce, cos, y, groups = _two_domains()
    choice = choose_fusion(ce, cos, y, groups)
    fused = choice.head.combine(ce, cos)
    assert 0.0 < choice.cosine_share < 1.0
    assert _min_gain(fused, cos, y, groups) > 0.02  # above the base model in both domains
    z_ce, z_cos = (ce - ce.mean()) / ce.std(), (cos - cos.mean()) / cos.std()
    for share in (0.0, 0.25, 0.5, 0.75, 1.0):  # no other mix does better for the worse domain
        assert _min_gain(fused, cos, y, groups) >= _min_gain((1 - share) * z_ce + share * z_cos, cos, y, groups) - 1e-3
    for name in ("a", "b"):
        assert choice.per_group[name]["auroc_fused"] >= choice.per_group[name]["auroc_biencoder"]
    assert choice.leave_one_out == {}  # two domains: nothing left to choose on when one is held out


def test_a_cross_encoder_that_hurts_a_domain_at_every_mix_is_left_out():
    ce, cos, y, groups = _two_domains()
    flipped = np.where(np.asarray(groups) == "b", -5.0 * y, ce)  # ranks domain b backwards
    assert choose_fusion(flipped, cos, y, groups).cosine_share == 1.0


def test_one_domain_gets_the_mix_best_for_it_and_too_few_pairs_are_refused():
    ce, cos, y, groups = _two_domains()
    b = np.asarray(groups) == "b"
    choice = choose_fusion(ce[b], cos[b], y[b], ["only"] * int(b.sum()))
    assert 0.0 < choice.cosine_share < 1.0 and choice.leave_one_out == {}
    assert choice.per_group["only"]["auroc_fused"] > choice.per_group["only"]["auroc_biencoder"]
    with pytest.raises(ConfigError, match="none of \\['only'\\] has that many"):
        choose_fusion(ce[:10], cos[:10], y[:10], ["only"] * 10)


def test_crag_fuse_on_data_of_one_domain_warns_that_nothing_checked_other_domains(tiny_onnx_bundle,
                                                                                  squad_pairs_file, tmp_path, capsys):
    out = tmp_path / "fused"
    assert main(["fuse", "--model", str(tiny_onnx_bundle), "--data", str(squad_pairs_file), "--group-by", "none",
                 "--out", str(out), "--target-escalation", "0.5"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report["per_domain"]) == {"all"} and report["leave_one_domain_out"] == {}
    assert "chosen on one domain" in report["warning"]
    assert load_grader(out).fusion is not None


def test_crag_fuse_writes_a_verified_calibrated_int8_bundle(tiny_onnx_bundle, squad_pairs_file, tmp_path, capsys):
    out = tmp_path / "fused"
    code = main(["fuse", "--model", str(tiny_onnx_bundle), "--data", str(squad_pairs_file), "--group-by", "source",
                 "--out", str(out), "--int8-only", "--max-flip", "0.5", "--target-escalation", "0.5"])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report["per_domain"]) == {"Normans", "Computational_complexity_theory", "Huguenot"}
    assert set(report["leave_one_domain_out"]) == set(report["per_domain"])
    assert report["parity"]["probe_pairs"] > 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["model_files"] == {"int8": "model.int8.onnx"} and not (out / "model.onnx").exists()
    assert "embedder/model.int8.onnx" in manifest["files"] and (out / "MODEL_CARD.md").is_file()
    card = (out / "MODEL_CARD.md").read_text(encoding="utf-8")
    assert "## Fusion with the bi-encoder" in card and "| Huguenot |" in card
    assert "embedder/ (the bi-encoder `crag-minilm-l6-tuned-v1`: all-MiniLM-L6-v2 fine-tuned contrastively" in card
    assert "per domain of the calibration data" in card and "fused verdicts on" in card
    lo, hi = manifest["fusion"]["ce_range"]  # the fusion data's cross-encoder range, widened: none of it clipped
    data_ce = load_grader(tiny_onnx_bundle).score_pairs([(p.query, p.text) for p in load_pairs(squad_pairs_file).pairs])
    assert lo < data_ce.logits.min() and data_ce.logits.max() < hi
    assert (f"is kept in [{lo:.2f}, {hi:.2f}]" in card) == (manifest["fusion"]["weights"][0] != 0.0)

    fused = load_grader(out)
    source = load_grader(tiny_onnx_bundle, variant="int8")
    pairs = load_pairs(squad_pairs_file).pairs[:6]
    texts = [(p.query, p.text) for p in pairs]
    scored = fused.score_pairs(texts)
    expected = fused.fusion.combine(source.score_pairs(texts).logits,
                                    cosines(OnnxMiniLMEmbedder(EMBEDDER_DIR), texts, max_windows=fused.max_windows))
    assert np.allclose(scored.logits, expected, atol=1e-4)
    grades = fused.grade_many([(p.query, [p.text]) for p in pairs])
    assert [g[0].logit for g in grades] == pytest.approx(scored.logits.tolist(), abs=1e-4)


def test_fused_bundle_refuses_a_swapped_embedder_and_a_second_fusion(tiny_onnx_bundle, squad_pairs_file, tmp_path):
    out = tmp_path / "fused"
    assert main(["fuse", "--model", str(tiny_onnx_bundle), "--data", str(squad_pairs_file), "--group-by", "source",
                 "--out", str(out), "--target-escalation", "0.5"]) == 0
    with pytest.raises(ConfigError, match="already fused"):
        from training.fusion import fusion_inputs

        fusion_inputs(load_grader(out), load_pairs(squad_pairs_file).pairs[:3])
    (out / "embedder" / "tokenizer.json").write_text("{}", encoding="utf-8")
    with pytest.raises(BundleError, match="tampered or corrupt"):
        load_grader(out)


def test_crag_fuse_input_errors(tiny_onnx_bundle, squad_pairs_file, tmp_path, capsys):
    assert main(["fuse", "--model", str(tiny_onnx_bundle), "--data", str(squad_pairs_file),
                 "--out", str(tiny_onnx_bundle)]) == 2
    assert "--out must differ" in capsys.readouterr().err
    assert main(["fuse", "--model", str(tiny_onnx_bundle), "--data", str(squad_pairs_file), "--group-by", "nothing",
                 "--out", str(tmp_path / "x")]) == 2
    assert "no pair has that field" in capsys.readouterr().err and not (tmp_path / "x").exists()


def test_a_fuse_with_a_guarantee_fits_a_calibration_map_of_the_fused_score(tiny_onnx_bundle, squad_pairs_file,
                                                                           tmp_path):
    """The source bundle's map reads its cross-encoder's logits, not the fused score: with a guarantee on few
    labels `auto` keeps a bundle's map, which fuse must never do."""
    from models import read_bundle
    from training.fusion import fuse_bundle

    out = tmp_path / "fused"
    report = fuse_bundle(tiny_onnx_bundle, squad_pairs_file, out, group_by=None, target_error=0.5, delta=0.5,
                         max_flip=0.5)
    assert report["thresholds"]["feasible"] and report["thresholds"]["design_effect"] >= 1.0
    assert read_bundle(out).manifest.calibration != read_bundle(tiny_onnx_bundle).manifest.calibration
    # the mix was chosen on the fit half of recalibrate's split by query: the half that tested the band chose nothing
    pairs = load_pairs(squad_pairs_file).pairs
    fit, test = query_split(pairs, 0)
    assert fit.size and test.size and report["chosen_on"].startswith(f"{fit.size} of the {len(pairs)} pairs (the fit")
    assert fusion_choosers(pairs, 0.5, None, 0).size == len(pairs)  # no guarantee: every pair chooses


def test_a_fine_tuned_embedder_is_exported_fused_and_shipped_in_the_bundle(tiny_onnx_bundle, squad_pairs_file, tmp_path,
                                                                           capsys):
    import shutil

    import transformers

    from training.base_models import resolve_base

    base = resolve_base("default-base")  # a small encoder with the base's vocabulary stands for a fine-tuned copy
    source = tmp_path / "my-encoder"
    config = transformers.BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=64)
    transformers.BertModel(config).save_pretrained(source)
    shutil.copyfile(base / "tokenizer.json", source / "tokenizer.json")
    shutil.copyfile(base / "tokenizer_config.json", source / "tokenizer_config.json")
    embedder_dir = tmp_path / "embedder"
    assert main(["export-embedder", "--out", str(embedder_dir), "--source", str(source), "--name", "my-tuned"]) == 0
    manifest = json.loads((embedder_dir / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["name"] == "my-tuned" and str(source) in manifest["source"] and manifest["dim"] == 32
    out = tmp_path / "fused"
    assert main(["fuse", "--model", str(tiny_onnx_bundle), "--data", str(squad_pairs_file), "--group-by", "source",
                 "--out", str(out), "--target-escalation", "0.5", "--embedder", str(embedder_dir)]) == 0
    capsys.readouterr()
    assert json.loads((out / "embedder" / "manifest.json").read_text(encoding="utf-8"))["name"] == "my-tuned"
    card = (out / "MODEL_CARD.md").read_text(encoding="utf-8")
    assert f"embedder/ (the bi-encoder `my-tuned` (local model folder {source}), int8)" in card
    pairs = [(p.query, p.text) for p in load_pairs(squad_pairs_file).pairs[:6]]
    fused = load_grader(out)
    _, cos = fused.score_pairs(pairs).fusion_inputs
    windows = fused.max_windows  # read as the grader reads them
    assert np.allclose(cos, cosines(OnnxMiniLMEmbedder(embedder_dir), pairs, max_windows=windows), atol=1e-6)
    assert not np.allclose(cos, cosines(OnnxMiniLMEmbedder(EMBEDDER_DIR), pairs, max_windows=windows), atol=1e-3)
    assert main(["fuse", "--model", str(tiny_onnx_bundle), "--data", str(squad_pairs_file), "--group-by", "source",
                 "--out", str(tmp_path / "f2"), "--embedder", str(source)]) == 2  # a model folder, not an export
    assert "re-export it with `crag export-embedder" in capsys.readouterr().err and not (tmp_path / "f2").exists()
