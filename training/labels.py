"""Label parsing: canonical labels, common synonyms, and explicit maps for graded integers."""

from __future__ import annotations

import difflib
import re

from models.errors import ConfigError
from models.types import Verdict

__all__ = ["LabelMap", "parse_label", "parse_label_map"]

SYNONYMS: dict[str, Verdict] = {
    **dict.fromkeys(["relevant", "correct", "yes", "true", "1", "positive", "pos"], Verdict.RELEVANT),
    **dict.fromkeys(["partial", "ambiguous", "partially_relevant", "partially relevant"], Verdict.PARTIAL),
    **dict.fromkeys(
        ["irrelevant", "incorrect", "no", "false", "0", "negative", "neg", "not_relevant", "not relevant"],
        Verdict.IRRELEVANT,
    ),
}

LabelMap = dict[str, Verdict]


def parse_label_map(spec: str | None) -> LabelMap | None:
    """Parse ``"3=relevant,2=partial,0-1=irrelevant"`` into {"3": RELEVANT, "2": PARTIAL, "0": ..., "1": ...};
    a dataset's own label names map too (``"Good=relevant,PotentiallyUseful=partial,Bad=irrelevant"``, any case)."""
    if spec is None or not spec.strip():
        return None
    mapping: LabelMap = {}
    for part in spec.split(","):
        key, sep, value = part.partition("=")
        key, value = key.strip(), value.strip().lower()
        if not sep or not key or value not in SYNONYMS:
            raise ConfigError(
                f"bad label-map entry {part.strip()!r} in {spec!r}; write entries like "
                "'3=relevant,2=partial,0-1=irrelevant'"
            )
        verdict = SYNONYMS[value]
        span = re.fullmatch(r"(-?\d+)\s*-\s*(-?\d+)", key)
        keys = [str(v) for v in range(int(span[1]), int(span[2]) + 1)] if span else [key.lower()]
        if span and int(span[1]) > int(span[2]):
            raise ConfigError(f"label-map range {key!r} is empty; write the low end first, e.g. '0-1'")
        for k in keys:
            if k in mapping and mapping[k] is not verdict:
                raise ConfigError(f"label-map gives {k!r} two labels in {spec!r}")
            mapping[k] = verdict
    return mapping


def parse_label(value: object, label_map: LabelMap | None = None) -> Verdict:
    """Turn a raw label into a Verdict; raise ConfigError with a 'did you mean' for near misses."""
    if isinstance(value, bool):
        key = "true" if value else "false"
    elif isinstance(value, float) and value.is_integer():
        key = str(int(value))
    else:
        key = str(value).strip().lower()
    if label_map is not None and key in label_map:
        return label_map[key]
    if key in SYNONYMS and (label_map is None or not key.lstrip("-").isdigit()):
        return SYNONYMS[key]
    if label_map is not None:
        raise ConfigError(f"label {value!r} is not in the label map; known values: {sorted(label_map)}")
    close = difflib.get_close_matches(key, list(SYNONYMS), n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    if key.lstrip("-").isdigit():
        how = " For graded integers pass a label map such as --label-map '3=relevant,2=partial,0-1=irrelevant'."
    else:
        how = (" For a dataset's own label names pass a label map such as "
               "--label-map 'Good=relevant,Potential=partial,Bad=irrelevant'.")
    raise ConfigError(
        f"unknown label {value!r}{hint} Use relevant / partial / irrelevant (or correct / ambiguous / incorrect, "
        f"1 / 0, yes / no, true / false).{how}"
    )
