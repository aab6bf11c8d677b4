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
from training.fusion import choose_fusion


def _two_domains(seed=0, n=200):
    """Domain 'a': the cross-encoder separates, the cosine is noise; domain 'b': the reverse, less sharply."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, 2 * n)
    ce = np.where(np.arange(2 * n) < n, 3.0 * y, 0.0) + rng.normal(0, 1, 2 * n)
    cos = np.where(np.arange(2 * n) >= n, 0.3 * y, 0.0) + rng.normal(0, 0.15, 2 * n)
    groups = ["a"] * n + ["b"] * n
    return ce, cos, y, groups


def test_the_mix_serves_the_worst_domain_not_the_average():
    ce, cos, y, groups = _two_domains()
    choice = choose_fusion(ce, cos, y, groups)
    assert 0.0 < choice.cosine_share < 1.0  # neither input alone serves both domains
    fused = choice.head.combine(ce, cos)
    from sklearn.metrics import roc_auc_score

    g = np.asarray(groups)

    def worst_regret(score):
        return max(max(choice.per_group[n]["auroc_cross_encoder"], choice.per_group[n]["auroc_biencoder"])
                   - roc_auc_score(y[g == n], score[g == n]) for n in ("a", "b"))

    for name in ("a", "b"):
        m = g == name
        assert choice.per_group[name]["auroc_fused"] == pytest.approx(roc_auc_score(y[m], fused[m]))
    assert worst_regret(fused) < 0.15
    assert worst_regret(fused) < min(worst_regret(ce), worst_regret(cos)) - 0.2
    assert set(choice.leave_one_out) == set()  # two domains: nothing left to choose on when one is held out


def test_one_domain_is_refused():
    ce, cos, y, _ = _two_domains()
    with pytest.raises(ConfigError, match="at least 2 groups"):
        choose_fusion(ce, cos, y, ["only"] * len(y))


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

    fused = load_grader(out)
    source = load_grader(tiny_onnx_bundle, variant="int8")
    pairs = load_pairs(squad_pairs_file).pairs[:6]
    texts = [(p.query, p.text) for p in pairs]
    scored = fused.score_pairs(texts)
    expected = fused.fusion.combine(source.score_pairs(texts).logits,
                                    cosines(OnnxMiniLMEmbedder(EMBEDDER_DIR), texts))
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
    assert "at least 2 groups" in capsys.readouterr().err and not (tmp_path / "x").exists()
