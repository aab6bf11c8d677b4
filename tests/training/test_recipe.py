import dataclasses

import pytest

from models.errors import ConfigError
from training.recipe import RecipeConfig


@pytest.mark.parametrize(("knobs", "named"), [
    ({"max_minutes": -5}, "max_minutes must be >= 0 (0: no bound), got -5"),  # used to fail after the data was made
    ({"max_steps": -1, "layers": -2}, "max_steps must be >= 0 (0: no bound), got -1; layers must be >= 0"),
    ({"distill_weight": 2.0}, "distill_weight must be in [0, 1], got 2.0"),
    ({"target_error": 0.0}, "max_error (--target-error) must be strictly between 0 and 1, got 0.0"),
    ({"max_steps": "10"}, "max_steps must be an int, got str '10'"),  # was a TypeError from a comparison
    ({"name": "team/v2"}, "name must be a non-empty word without '/'"),  # trained for an hour, then named a path
    ({"name": " "}, "name must be a non-empty word"),
])
def test_a_bad_recipe_knob_is_refused_before_any_data_is_prepared(knobs, named):
    with pytest.raises(ConfigError) as caught:
        RecipeConfig(**knobs)
    assert named in str(caught.value)
    assert RecipeConfig().max_minutes == 70.0  # the shipped recipe's own knobs pass


def test_the_recipe_tunes_and_exports_the_embedder_once_and_names_it(squad_pairs_file, tmp_path):
    import json

    from training.data import load_pairs, write_pairs
    from training.recipe import EMBEDDER_NAME, tuned_embedder

    pairs = [dataclasses.replace(p, metadata={**p.metadata, "domain": "wikipedia"})
             for p in load_pairs(squad_pairs_file).pairs]
    train = tmp_path / "train.jsonl"
    write_pairs(pairs, train)
    work = tmp_path / "work"
    (work / "embedder-tuned").mkdir(parents=True)
    (work / "embedder-tuned" / "config.json").write_text("{}")  # a run stopped mid-training: trained again
    onnx = tuned_embedder(train, work, RecipeConfig(embedder_max_minutes=2.0))
    manifest = json.loads((onnx / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["name"] == EMBEDDER_NAME and str(work / "embedder-tuned") in manifest["source"]
    report = json.loads((work / "embedder-tuned" / "embedder_training.json").read_text(encoding="utf-8"))
    assert report["config"]["seed"] == 0 and report["config"]["max_minutes"] == 2.0 and report["triplets"] > 0
    stamp = (onnx / "model.int8.onnx").stat().st_mtime_ns
    assert tuned_embedder(train, work, RecipeConfig()) == onnx  # a resumed recipe reuses it
    assert (onnx / "model.int8.onnx").stat().st_mtime_ns == stamp


def test_without_tuning_the_recipe_fuses_the_untrained_model_not_the_shipped_one(tmp_path):
    import json

    from pipeline.retrieval.embedding import default_embedder_name
    from training.recipe import untrained_embedder

    onnx = untrained_embedder(tmp_path)
    assert json.loads((onnx / "manifest.json").read_text(encoding="utf-8"))["name"] == "all-MiniLM-L6-v2"
    assert default_embedder_name() != "all-MiniLM-L6-v2"  # the shipped one is fine-tuned: it could not stand in
    stamp = (onnx / "model.int8.onnx").stat().st_mtime_ns
    assert untrained_embedder(tmp_path) == onnx and (onnx / "model.int8.onnx").stat().st_mtime_ns == stamp

