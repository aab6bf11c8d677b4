"""Config fields checked against their annotated types before any bound is compared."""

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from models import ConfigError
from models.field_types import check_field_types, wrong_types


@dataclass
class Example:
    count: int = 1
    share: float = 0.5
    name: str = "x"
    flag: bool = False
    floor: float | None = None
    label: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def test_values_of_their_types_pass_and_an_int_is_a_number():
    assert wrong_types(Example()) == []
    assert wrong_types(Example(share=1, floor=0, label="y", extra={"any": "thing"})) == []
    assert wrong_types(Example(count=np.int64(3), share=np.float32(0.5), flag=np.bool_(True))) == []  # computed


def test_each_wrong_value_is_named_with_what_it_should_be():
    assert wrong_types(Example(count="8", share="0.5", name=3, flag=1, floor="0.2", label=2.0)) == [
        "count must be an int, got str '8'", "share must be a number, got str '0.5'",
        "name must be a string, got int 3", "flag must be True or False, got int 1",
        "floor must be a number or None, got str '0.2'", "label must be a string or None, got float 2.0"]
    assert wrong_types(Example(count=True, share=False)) == [  # a bool is never a count or a share
        "count must be an int, got bool True", "share must be a number, got bool False"]
    assert wrong_types(Example(count=None)) == ["count must be an int, got NoneType None"]


def test_the_check_names_the_class_and_every_wrong_field_at_once():
    check_field_types(Example())
    with pytest.raises(ConfigError, match=r"^invalid Example: count must be an int, got str '8'; flag must be True or "
                                          r"False, got int 1$"):
        check_field_types(Example(count="8", flag=1))
