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
