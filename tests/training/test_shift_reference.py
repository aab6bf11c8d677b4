"""crag reference: a new bundle with a reference made from its calibration pairs, weights untouched."""

import json

from models.bundle import read_bundle
from models.registry import resolve_bundle
from pipeline.cli.main import main


def test_reference_is_remade_with_design_effects_and_the_source_is_kept(tmp_path, capsys, squad_pairs_file):
    source = read_bundle(resolve_bundle("default"))
    before = (source.path / "manifest.json").read_text()
    out = tmp_path / "refreshed"
    assert main(["reference", "--model", "default", "--data", str(squad_pairs_file), "--out", str(out)]) == 0
    summary = json.loads(capsys.readouterr().out)
    fresh = read_bundle(out)  # verifies every file against the new manifest
    assert fresh.manifest.reference["n"] == summary["pairs"] == sum(1 for _ in squad_pairs_file.open())
    effect = fresh.manifest.reference["design_effect"]
    assert effect["logit"] >= 1.0 and effect["length"] >= 1.0 and effect["chunks_per_query"] == 10
    assert fresh.manifest.files == source.manifest.files and fresh.manifest.thresholds == source.manifest.thresholds
    assert (source.path / "manifest.json").read_text() == before
    card = (out / "MODEL_CARD.md").read_text(encoding="utf-8")  # the source's card, its reference re-rendered
    assert f"{summary['pairs']:,} pairs of the calibration data" in card and card.count("## Shift reference") == 1
    assert "## Intended use and limits" in card and "Against the untrained all-MiniLM-L6-v2 bi-encoder" in card
    assert "7 domains also has a reference" not in card  # the shipped default's per-domain references are gone
    assert main(["reference", "--model", "default", "--data", str(squad_pairs_file), "--out", str(out)]) == 2
    assert "exists; choose a new directory" in capsys.readouterr().err


def test_reference_by_group_keeps_one_reference_per_domain(tmp_path, capsys, squad_pairs_file):
    out = tmp_path / "grouped"
    assert main(["reference", "--model", "default", "--data", str(squad_pairs_file), "--out", str(out),
                 "--group-by", "source"]) == 0
    summary = json.loads(capsys.readouterr().out)
    groups = read_bundle(out).manifest.reference["groups"]
    assert set(groups) == set(summary["groups"]) == {"Normans", "Computational_complexity_theory", "Huguenot"}
    assert sum(g["n"] for g in groups.values()) == summary["pairs"]
    assert "Each of its 3 domains also has a reference of its own" in (out / "MODEL_CARD.md").read_text()
