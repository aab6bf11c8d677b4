"""argparse types for counts, so a bad value is refused by name before any file is read or model loaded."""

from __future__ import annotations

import argparse
from collections.abc import Callable

__all__ = ["int_at_least"]


def int_at_least(minimum: int, meaning: str = "") -> Callable[[str], int]:
    """An argparse ``type``: an integer >= ``minimum``; ``meaning`` says what the smallest value does (e.g.
    "0: all of them"), so a user reading the refusal knows which value to pass."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
        if value < minimum:
            hint = f" ({meaning})" if meaning else ""
            raise argparse.ArgumentTypeError(f"must be >= {minimum}{hint}, got {value}")
        return value

    parse.__name__ = f"int >= {minimum}"  # what argparse names in its own messages
    return parse
