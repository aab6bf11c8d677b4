"""Recalibration with LLM labels: measured accuracy, weights, and a guarantee tested on human labels only."""

import json

import numpy as np
import pytest

from models import ConfigError
from models.types import Verdict
from training.data import LabelledPair, PairSet, load_pairs
from training.recalibrate import LLMLabels, cross_encoder_grader, measure_llm_accuracy, recalibrate, suggest_pairs


def _flipped(pairs, every):
    """The same pairs labelled by an 'LLM' that gets every ``every``-th one wrong."""
    out = []
    for i, p in enumerate(pairs):
        label = p.label
        if i % every == 0:
            label = Verdict.IRRELEVANT if p.label.is_positive else Verdict.RELEVANT
        out.append(LabelledPair(**{**p.__dict__, "label": label}))
    return PairSet(out)


@pytest.fixture(scope="module")
def human(squad_pairs_file):
    return load_pairs(squad_pairs_file)


def test_llm_label_weight_follows_its_accuracy():
    data = PairSet([])
    assert LLMLabels(data, 1.0).weight == 1.0 and LLMLabels(data, 0.5).weight == 0.0
    assert LLMLabels(data, 0.9).weight == pytest.approx(0.64) and LLMLabels(data, 0.3).weight == 0.0
    with pytest.raises(ConfigError, match="accuracy"):
        LLMLabels(data, 1.5)


def test_accuracy_is_measured_on_pairs_both_labelled(human):
    accuracy, compared = measure_llm_accuracy(human, _flipped(human.pairs, 10))
    assert compared == len(human.pairs) and accuracy == pytest.approx(1 - 9 / 90)
    with pytest.raises(ConfigError, match="--llm-accuracy"):
        measure_llm_accuracy(human, PairSet(human.pairs[:10]))


def test_llm_labels_fit_the_map_but_never_test_the_thresholds(human):
    grader = cross_encoder_grader("default")
    logits = grader.score_pairs([(p.query, p.text) for p in human.pairs]).logits
    kwargs = {"target_error": None, "target_escalation": 0.5, "delta": None, "logits": logits}
    plain = recalibrate(grader, human, **kwargs)
    fresh = [LabelledPair(**{**p.__dict__, "query_id": f"llm-{p.query_id}", "query": p.query + " (again)"})
             for p in human.pairs]
    useless = recalibrate(grader, human, llm_labels=LLMLabels(PairSet(fresh), 0.5), **kwargs)
    assert useless.calibrator.to_dict() == plain.calibrator.to_dict()  # a coin-flip LLM changes nothing
    helped = recalibrate(grader, human, llm_labels=LLMLabels(PairSet(fresh), 0.95), **kwargs)
    assert helped.metrics["llm_labels"]["used_in_fit"] == len(fresh)
    assert helped.calibrator.to_dict() != plain.calibrator.to_dict()
    same_pairs = recalibrate(grader, human, llm_labels=LLMLabels(_flipped(human.pairs, 10), 0.9), **kwargs)
    assert same_pairs.metrics["llm_labels"]["used_in_fit"] == 0  # a person's label always wins


def test_calibrate_cli_reads_an_escalation_log(capsys, tmp_path, human):
    from pipeline.cli.main import main

    log = tmp_path / "escalations.jsonl"
    log.write_text("".join(json.dumps({"query": p.query, "text": p.text, "label": p.label.value,
                                       "metadata": {"labelled_by": "llm"}}) + "\n"
                           for p in _flipped(human.pairs, 15).pairs), encoding="utf-8")
    out = tmp_path / "recal"
    assert main(["calibrate", "--data", str(human.path), "--llm-labels", str(log), "--target-escalation", "0.5",
                 "--out", str(out)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["llm_labels"]["measured_on"] == 90 and report["llm_labels"]["accuracy"] == pytest.approx(84 / 90,
                                                                                                         abs=1e-3)
    assert main(["calibrate", "--data", str(human.path), "--llm-accuracy", "0.9", "--out", str(tmp_path / "x")]) == 2
    assert "--llm-accuracy needs --llm-labels" in capsys.readouterr().err
    assert np.isfinite(report["thresholds"]["lower"])


def test_adapt_refits_the_head_only_when_held_out_queries_say_so(capsys, tmp_path, human):
    from pipeline.cli.main import main

    out = tmp_path / "adapted"
    assert main(["adapt", "--data", str(human.path), "--target-escalation", "0.5", "--out", str(out)]) == 0
    report = json.loads(capsys.readouterr().out)
    held = report["held_out_auroc"]
    assert report["head_adopted"] == (held["adapted_head"] >= held["shipped_head"] + 0.005)
    assert "no guarantee: an optimistic estimate)" in report["held_out_metrics"]["measured_on"]
    from models import read_bundle

    manifest = read_bundle(out).manifest
    chosen = report["adapted_head"] if report["head_adopted"] else report["shipped_head"]
    assert manifest.fusion["weights"] == chosen["weights"] and "adaptation" in manifest.metrics
    shipped_lo, shipped_hi = report["shipped_head"]["ce_range"]  # the default bounds its cross-encoder
    lo, hi = report["adapted_head"]["ce_range"]  # a few labels never narrow what the bundle was fitted on
    assert lo <= shipped_lo and hi >= shipped_hi and manifest.fusion["ce_range"] == chosen["ce_range"]
    assert main(["adapt", "--data", str(human.path), "--out", str(out)]) == 2  # never overwrites
    assert "exists" in capsys.readouterr().err


def _asked_four_ways(tmp_path, human):
    """The human fixture's pairs with each query asked four ways: 36 queries, enough for a guarantee."""
    data = tmp_path / "pairs.jsonl"
    rows = [{"query": f"{p.query}{suffix}", "text": p.text, "label": p.label.value, "query_id": f"{p.query_id}{suffix}"}
            for suffix in ("", " Please answer.", " (asked again)", " Thanks!") for p in human.pairs]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return data, rows


def test_adapt_refusal_says_the_band_was_tested_at_half_of_delta(tmp_path, human):
    from training.adapt import adapt_bundle

    data, _ = _asked_four_ways(tmp_path, human)
    with pytest.raises(ConfigError, match=r"half of --delta, 0.05: the same held-out labels chose the head"):
        adapt_bundle("default", data, tmp_path / "out", target_error=0.001, delta=0.1)
    assert not (tmp_path / "out").exists()


def test_an_adopted_head_gets_a_calibration_map_of_its_own(tmp_path, human):
    """With fewer than 2,500 labels calibrate keeps the bundle's map and tests on every label; that map belongs to
    the shipped head's scores, so adapt must refit it when it adopts a new head (it kept it before)."""
    from models import read_bundle
    from training.adapt import adapt_bundle

    data, rows = _asked_four_ways(tmp_path, human)
    source = read_bundle(cross_encoder_grader("default").bundle.path).manifest.calibration
    runs = {}
    for adopt, min_gain in ((True, -1.0), (False, 1.0)):  # a head is adopted whatever it gains / never
        out = tmp_path / f"adopt-{adopt}"
        report = adapt_bundle("default", data, out, target_error=0.2, delta=0.2, min_gain=min_gain)
        manifest = read_bundle(out).manifest
        assert report["head_adopted"] is adopt
        assert report["thresholds"]["design_effect"] >= 1.0  # the band was tested knowing each pair's query
        # the held-out labels chose the head too: each head's band is tested at half of delta (Bonferroni)
        target = report["thresholds"]["target"]
        assert target["delta"] == 0.2 and target["delta_per_head"] == 0.1
        assert manifest.thresholds["target"]["delta_per_head"] == 0.1
        assert "design effect" in (out / "MODEL_CARD.md").read_text(encoding="utf-8")
        runs[adopt] = (manifest.calibration, manifest.metrics["recalibration"].get("calibration_map"),
                       report["held_out_metrics"]["measured_on"])
    assert runs[False][:2] == (source, "kept (all labels tested)")  # the shipped head keeps the shipped map
    assert runs[True][0] != source and runs[True][1] is None  # the new head's map was fitted on the fit half
    assert runs[False][2].startswith(f"all {len(rows)} labelled pairs") and "held-out half" in runs[True][2]


def test_adapt_reads_the_cross_encoder_a_cosine_only_head_leaves_out(capsys, tmp_path, human):
    """The fast bundle's head gives its cross-encoder no weight, so grading never runs it; adapting must, or
    every candidate mix would be scored on missing logits."""
    from pipeline.cli.main import main

    out = tmp_path / "adapted-fast"
    assert main(["adapt", "--model", "fast", "--data", str(human.path), "--target-escalation", "0.5",
                 "--out", str(out)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["shipped_head"]["weights"][0] == 0.0
    assert all(np.isfinite(v) for v in report["held_out_auroc"].values())
    assert np.isfinite(report["adapted_head"]["weights"]).all()


def test_adapt_needs_a_fused_bundle(tiny_onnx_bundle, squad_pairs_file, tmp_path):
    from training.adapt import adapt_bundle

    with pytest.raises(ConfigError, match="no fusion head"):
        adapt_bundle(tiny_onnx_bundle, squad_pairs_file, tmp_path / "x")


def test_a_guarantee_needs_pairs_from_many_queries(human):
    grader = cross_encoder_grader("default")
    few = PairSet([p for p in human.pairs if p.query_id in sorted({q.query_id for q in human.pairs})[:10]])
    with pytest.raises(ConfigError, match=r"only 10 different queries.*--no-guarantee"):
        recalibrate(grader, few, target_error=0.1, delta=0.1)
    point = recalibrate(grader, few, target_error=None, target_escalation=0.5, delta=None)  # no guarantee asked
    assert point.choice.escalation_rate <= 0.5 + 1e-9


def _echoes(pairs, n):
    """Forum-style echoes of the first ``n`` queries, labelled irrelevant (grade decides them by rule)."""
    firsts = list({p.query_id: p for p in pairs}.values())[:n]
    return [LabelledPair(query=p.query, text=f"Same problem here. {p.query} Any ideas?", label=Verdict.IRRELEVANT,
                         query_id=p.query_id, metadata={"domain": "forum"}) for p in firsts]


def test_rule_decided_pairs_move_neither_the_map_nor_the_band(human):
    grader = cross_encoder_grader("default")
    echoes = _echoes(human.pairs, 20)
    plain = recalibrate(grader, human, target_error=0.1, delta=None)
    mixed = recalibrate(grader, PairSet(human.pairs + echoes), target_error=0.1, delta=None)
    assert mixed.calibrator.to_dict() == plain.calibrator.to_dict()
    assert mixed.choice.policy == plain.choice.policy
    assert (plain.metrics["rule_decided_left_out"], mixed.metrics["rule_decided_left_out"]) == (0, 20)
    with pytest.raises(ConfigError, match="decided by rule"):
        recalibrate(grader, PairSet(echoes), target_error=0.1, delta=None)


def test_eval_reports_rule_decided_pairs_as_grade_decides_them(human):
    from training.evaluate import evaluate_grader

    grader = cross_encoder_grader("default")
    echoes = _echoes(human.pairs, 20)
    plain = evaluate_grader(grader, human)
    mixed = evaluate_grader(grader, PairSet(human.pairs + echoes))
    assert (plain["rule_decided"], mixed["rule_decided"], mixed["n"]) == (0, 20, len(human.pairs) + 20)
    # decided irrelevant at probability 0, rightly: 20 more auto-decided pairs, no more errors
    assert mixed["auto_decided"] == plain["auto_decided"] + 20
    assert round(mixed["auto_error_rate"] * mixed["auto_decided"]) == round(plain["auto_error_rate"] *
                                                                            plain["auto_decided"])


def test_an_infeasible_target_is_explained_by_what_actually_failed():
    from training.recalibrate import _infeasible

    short = str(_infeasible(0.05, 0.1, 200, 900))
    assert "about 900 labelled pairs of this data would be needed (you gave 200; estimated" in short
    assert "--calibration-map keep" not in short
    # from 2,500 labels `auto` would refit the map on half of them: the estimate is for testing every label
    beyond = str(_infeasible(0.05, 0.1, 200, 2900, kept_map=True, keep_beyond_auto=True))
    assert "tested with the bundle's map kept (`--calibration-map keep`" in beyond
    assert "--calibration-map" not in str(_infeasible(0.05, 0.1, 200, 900, kept_map=True, keep_beyond_auto=True))
    assert "will not help" in str(_infeasible(0.05, 0.1, 200, None))
    # enough pairs on the pool: the groups (or the test half) are what failed, never "you gave more than needed"
    grouped = str(_infeasible(0.05, 0.1, 4154, 295, np.array(["web", "web", "faq"])))
    assert "each of the 2 groups" in grouped and "faq 1, web 2" in grouped and "would be needed" not in grouped
    assert "did not confirm" in str(_infeasible(0.05, 0.1, 4154, 295))
    refitted = str(_infeasible(0.05, 0.1, 623, 487, test_pairs=316))  # a refitted map: half the labels test
    assert "held-out half (316 pairs; the map was fitted on the rest)" in refitted
    assert "--calibration-map keep" in refitted and "--calibration-map" not in str(_infeasible(0.05, 0.1, 4154, 295))
    kept = str(_infeasible(0.1, 0.1, 623, 619, kept_map=True))  # every label tested: there is no held-out half
    assert "testing the band on all 623 (the bundle's map kept)" in kept and "half" not in kept
    assert "Nothing was written" in grouped


def test_the_model_card_says_how_to_reproduce_a_recalibration(capsys, tmp_path, human):
    """The recorded command, run again, writes the same calibration and thresholds."""
    import shlex

    from models.bundle import read_bundle
    from pipeline.cli.main import main

    first = tmp_path / "first"
    assert main(["calibrate", "--data", str(human.path), "--target-error", "0.1", "--no-guarantee",
                 "--seed", "3", "--out", str(first)]) == 0
    capsys.readouterr()
    card = (first / "MODEL_CARD.md").read_text(encoding="utf-8")
    command = card.split("Reproduce: `crag calibrate", 1)[1].split("`", 1)[0]
    assert "--no-guarantee" in command and "--seed 3" in command and "--target-error 0.1" in command
    args = shlex.split(command.replace("<new bundle>", str(tmp_path / "again")))
    assert main(["calibrate", *args]) == 0
    a, b = read_bundle(first).manifest, read_bundle(tmp_path / "again").manifest
    assert (a.calibration, a.thresholds) == (b.calibration, b.thresholds)
    assert a.training["recalibrated_with"]["delta"] is None


def test_a_new_calibration_drops_the_answerability_floor_of_the_old_one(caplog, capsys, tmp_path, human):
    from models.bundle import read_bundle
    from models.registry import resolve_bundle
    from pipeline.cli.main import main

    assert read_bundle(resolve_bundle("default")).manifest.answerability["floor"] > 0
    for command in (["calibrate", "--target-error", "0.1", "--no-guarantee"], ["adapt", "--target-escalation", "0.5"]):
        out = tmp_path / command[0]
        with caplog.at_level("WARNING", logger="training.recalibrate"):
            assert main([*command, "--data", str(human.path), "--out", str(out)]) == 0
        assert read_bundle(out).manifest.answerability == {}
        assert "answerability floor" in caplog.text and "crag answerability" in caplog.text
        caplog.clear()
    capsys.readouterr()


def test_without_a_guarantee_few_labels_choose_on_the_maps_expected_errors(human, capsys, tmp_path):
    from pipeline.cli.main import main

    grader = cross_encoder_grader("default")
    auto = recalibrate(grader, human, target_error=0.1, delta=None)  # fewer than 600 labels
    counted = recalibrate(grader, human, target_error=0.1, delta=None, error_estimate="counted")
    assert auto.choice.target.get("error_estimate") == "calibrated" and "expect" in \
        auto.metrics["measured_on"]
    assert "error_estimate" not in counted.choice.target and "counted" in counted.metrics["measured_on"]
    assert auto.calibrator.to_dict() == counted.calibrator.to_dict()  # one map; only the band's choice differs
    with pytest.raises(ConfigError, match="error_estimate"):
        recalibrate(grader, human, target_error=0.1, delta=None, error_estimate="guess")
    assert main(["calibrate", "--data", str(human.path), "--error-estimate", "counted",
                 "--out", str(tmp_path / "x")]) == 2  # a guarantee is tested on counted errors anyway
    assert "--no-guarantee" in capsys.readouterr().err and not (tmp_path / "x").exists()
    assert main(["adapt", "--data", str(human.path), "--error-estimate", "calibrated",
                 "--out", str(tmp_path / "a")]) == 2  # adapt takes the same option, by the same rule
    assert "--no-guarantee" in capsys.readouterr().err and not (tmp_path / "a").exists()
    assert main(["calibrate", "--data", str(human.path), "--target-error", "0.1", "--no-guarantee",
                 "--error-estimate", "counted", "--out", str(tmp_path / "y")]) == 0
    card = (tmp_path / "y" / "MODEL_CARD.md").read_text(encoding="utf-8")
    assert "--error-estimate counted" in card  # the reproduce line keeps the choice


@pytest.mark.parametrize("command", [["eval"], ["calibrate", "--out", "new-bundle"], ["adapt", "--out", "new-bundle"],
                                     ["answerability", "--out", "new-bundle"]])
def test_measuring_and_calibrating_need_the_eval_extra_and_say_so_before_scoring(command, squad_pairs_file,
                                                                                 tmp_path):
    """Evaluation and calibration need scikit-learn and scipy, not torch: without them the command names the
    extra to install before it reads or scores a pair, and writes nothing."""
    import subprocess
    import sys

    code = ("import sys\nfor name in ('sklearn', 'sklearn.metrics', 'scipy', 'scipy.stats'): sys.modules[name] = None\n"
            "from pipeline.cli.main import main\nsys.exit(main(sys.argv[1:]))")
    result = subprocess.run([sys.executable, "-c", code, command[0], "--model", "default", "--data",
                             str(squad_pairs_file), *command[1:]], capture_output=True, text=True, cwd=tmp_path,
                            timeout=120)
    assert result.returncode != 0
    assert "pip install 'crag-grader[eval]'" in result.stderr and "scoring" not in result.stderr
    assert not (tmp_path / "new-bundle").exists()


def test_suggested_pairs_are_a_uniform_sample_of_the_model_decided_pairs():
    pool = [LabelledPair(query=f"how do I reset router model {q}", text=f"Hold the reset button of model {q} for "
                         f"{t} seconds.", label=Verdict.IRRELEVANT, query_id=str(q))
            for q in range(5) for t in range(4)]
    echo = LabelledPair(query="how do I reset it", text="how do I reset it", label=Verdict.IRRELEVANT, query_id="e")
    counts = {p.text: 0 for p in pool}
    for seed in range(2000):
        chosen = suggest_pairs([*pool, echo], 5, seed=seed)
        assert len(chosen) == 5 and echo not in chosen
        for p in chosen:
            counts[p.text] += 1
    # each of the 20 pairs is drawn with probability 1/4: 500 of 2,000 draws, sd 19.4
    assert all(400 < c < 600 for c in counts.values()), counts


def test_suggesting_no_pairs_is_refused():
    with pytest.raises(ConfigError, match="positive number"):
        suggest_pairs([], 0)
