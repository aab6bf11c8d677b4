"""Whether a config dataclass's fields hold values of their annotated types, named when they do not.

A number from a form or a config file arrives as text ("8", "2e-5"); compared with a bound it raises a bare
TypeError, and a bool passes for an int. Each config's ``__post_init__`` calls :func:`check_field_types` first.
"""

from __future__ import annotations

import numbers
from dataclasses import fields
from typing import Any

import numpy as np

from models.errors import ConfigError

__all__ = ["check_field_types", "wrong_types"]

_KINDS: dict[str, tuple[type, ...]] = {"int": (numbers.Integral,), "float": (numbers.Real,), "str": (str,),
                                       "bool": (bool, np.bool_)}  # numpy's int64 and float32 are numbers too
_SAID = {"int": "an int", "float": "a number", "str": "a string", "bool": "True or False", "None": "None"}


def _fits(value: object, annotation: str) -> bool:
    kinds = [part.strip() for part in annotation.split("|")]
    if value is None:
        return "None" in kinds
    for kind in kinds:
        if kind == "None":
            continue
        allowed = _KINDS.get(kind)
        if allowed is None:  # a type this check does not read (a dict, a policy object): not its business
            return True
        if isinstance(value, allowed) and (kind == "bool" or not isinstance(value, (bool, np.bool_))):
            return True
    return False


def wrong_types(config: Any) -> list[str]:
    """One line per field of ``config`` (a dataclass) whose value is not of its annotated int / float / str / bool
    type (``float`` takes an int, ``int`` never a bool, ``X | None`` takes None); other annotations are not read."""
    out = []
    for f in fields(config):
        value = getattr(config, f.name)
        annotation = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
        annotation = annotation.replace("NoneType", "None")  # `float | None` written without postponed annotations
        if not _fits(value, annotation):
            wanted = " or ".join(_SAID.get(part.strip(), part.strip()) for part in annotation.split("|"))
            out.append(f"{f.name} must be {wanted}, got {type(value).__name__} {value!r:.80}")
    return out


def check_field_types(config: Any) -> None:
    """A ConfigError naming every field of ``config`` whose value is of the wrong type (:func:`wrong_types`), as
    ``invalid <its class>: ...``, before any of its bounds is compared."""
    wrong = wrong_types(config)
    if wrong:  # learning_rate="2e-5" or k="8" from a config file: named, not a TypeError from a comparison
        raise ConfigError(f"invalid {type(config).__name__}: {'; '.join(wrong)}")
