"""The shipped model card marks the domains never trained on and shows thresholds per domain."""

import shutil

from models.registry import resolve_bundle
from training.model_card import write_model_card


def test_card_of_the_default_marks_untrained_domains(tmp_path):
    bundle = tmp_path / "default"
    shutil.copytree(resolve_bundle("default"), bundle)
    reports = {"test:consumer_health": {"n": 10, "auroc": 0.8, "biencoder_auroc": 0.75},
               "test:web": {"n": 10, "auroc": 0.7, "biencoder_auroc": 0.72}}
    card = write_model_card(bundle, reports).read_text(encoding="utf-8")
    assert "| test:consumer_health (not in training) | 0.8000 | 0.7500 | +0.0500 |" in card
    assert "| test:web | 0.7000 | 0.7200 | -0.0200 |" in card
    assert "| web_novel (not in training) | 324 |" in card  # thresholds per domain of the calibration data
    assert "- Weights: 75% the fine-tuned cross-encoder, 25% its untrained base" in card  # WiSE-FT
    assert "bench/bench_wise_ft.py --model" in card and "then `crag export` and `crag fuse`" in card
    assert "Recalibrated after training" not in card  # fusion recalibrated from scratch: no stale line
    assert "Reproduce: `crag recipe --data ../shared/data --work runs/v3 --out runs/v3/default`" in card
    assert "These weights are not the recipe's own" in card and "bench/remeasure_heldout.py --model" in card
    assert "validation of the cross-encoder (before fusion) | n/a" not in card  # no row of empty cells
    assert "got no weight" not in card  # the default's fusion uses its cross-encoder


def test_the_card_of_a_bundle_whose_fusion_drops_the_cross_encoder_says_it_never_runs_it(tmp_path):
    bundle = tmp_path / "fast"
    shutil.copytree(resolve_bundle("fast"), bundle)
    card = write_model_card(bundle, {}).read_text(encoding="utf-8")
    assert ("The cross-encoder got no weight: this bundle grades by the calibrated cosine alone and never runs it"
            in card)
    # the recipe command that made this student, not the default's
    assert ("Reproduce: `crag recipe --data ../shared/data --work runs/v3 --layers 3 --teacher runs/v3/onnx "
            "--max-minutes 35 --name fast --out runs/v3/fast`") in card


def test_the_reference_section_is_rendered_again_in_place_or_added_to_an_older_card(tmp_path):
    from training.model_card import rewrite_reference_section

    bundle = tmp_path / "copy"
    shutil.copytree(resolve_bundle("default"), bundle)
    card = bundle / "MODEL_CARD.md"
    card.write_text("# Card\n\n## Metrics\nkept\n\n## Intended use and limits\n- kept too\n", encoding="utf-8")
    rewrite_reference_section(bundle)
    text = card.read_text(encoding="utf-8")
    assert text.index("## Metrics") < text.index("## Shift reference") < text.index("## Intended use")
    assert "kept\n" in text and "- kept too" in text
    rewrite_reference_section(bundle)  # again: replaced, not added twice
    assert card.read_text(encoding="utf-8") == text
    card.unlink()
    assert rewrite_reference_section(bundle) is None and not card.exists()


def test_a_bundle_trained_on_a_gpu_names_the_device_in_its_reproduce_line(tmp_path):
    import json

    from models.bundle import write_manifest

    bundle = tmp_path / "gpu"
    shutil.copytree(resolve_bundle("default"), bundle)
    manifest = json.loads((bundle / "manifest.json").read_text(encoding="utf-8"))
    manifest["training"]["config"]["extra"]["recipe_config"]["device"] = "cuda"
    write_manifest(bundle, {k: v for k, v in manifest.items() if k != "files"}, list(manifest["files"]))
    card = write_model_card(bundle, {}).read_text(encoding="utf-8")
    assert ("Reproduce: `crag recipe --data ../shared/data --work runs/v3 --device cuda "
            "--out runs/v3/default`") in card
