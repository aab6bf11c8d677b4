import pytest

from models import ConfigError, Verdict
from training.labels import parse_label, parse_label_map


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("relevant", Verdict.RELEVANT), ("Correct", Verdict.RELEVANT), (1, Verdict.RELEVANT), ("yes", Verdict.RELEVANT),
     (True, Verdict.RELEVANT), ("partial", Verdict.PARTIAL), ("ambiguous", Verdict.PARTIAL),
     ("irrelevant", Verdict.IRRELEVANT), ("incorrect", Verdict.IRRELEVANT), (0, Verdict.IRRELEVANT),
     ("no", Verdict.IRRELEVANT), (False, Verdict.IRRELEVANT), (0.0, Verdict.IRRELEVANT)],
)
def test_synonyms(raw, expected):
    assert parse_label(raw) is expected


def test_did_you_mean():
    with pytest.raises(ConfigError, match="did you mean 'relevant'"):
        parse_label("relevnt")


def test_graded_integers_need_a_map():
    with pytest.raises(ConfigError, match="label map"):
        parse_label(3)
    mapping = parse_label_map("3=relevant,2=partial,0-1=irrelevant")
    assert mapping == {"3": Verdict.RELEVANT, "2": Verdict.PARTIAL, "1": Verdict.IRRELEVANT, "0": Verdict.IRRELEVANT}
    assert parse_label(1, mapping) is Verdict.IRRELEVANT  # the map wins over the 1/0 synonym
    assert parse_label("2", mapping) is Verdict.PARTIAL
    assert parse_label("relevant", mapping) is Verdict.RELEVANT
    with pytest.raises(ConfigError, match="not in the label map"):
        parse_label(4, mapping)


@pytest.mark.parametrize("spec", ["3=great", "3", "=relevant", "3-1=relevant", "1=relevant,1=irrelevant"])
def test_bad_label_maps(spec):
    with pytest.raises(ConfigError):
        parse_label_map(spec)


def test_empty_map_is_none():
    assert parse_label_map(None) is None and parse_label_map("  ") is None


def test_a_datasets_own_label_names_map_in_any_case():
    mapping = parse_label_map("Good=relevant, PotentiallyUseful=partial, Bad=irrelevant")
    assert parse_label("Good", mapping) is Verdict.RELEVANT and parse_label("good", mapping) is Verdict.RELEVANT
    assert parse_label("POTENTIALLYUSEFUL", mapping) is Verdict.PARTIAL
    assert parse_label("Bad", mapping) is Verdict.IRRELEVANT
    with pytest.raises(ConfigError, match=r"'Dialogue' is not in the label map; known values: \['bad', 'good'"):
        parse_label("Dialogue", mapping)
    with pytest.raises(ConfigError, match="--label-map 'Good=relevant"):  # without a map, the error says how
        parse_label("Good")
