"""How documents write a list item's number: Roman numerals and letters, as Word, OpenDocument and HTML count."""

from __future__ import annotations

__all__ = ["letters", "list_number", "roman"]

ROMAN = ((1000, "m"), (900, "cm"), (500, "d"), (400, "cd"), (100, "c"), (90, "xc"), (50, "l"), (40, "xl"), (10, "x"),
         (9, "ix"), (5, "v"), (4, "iv"), (1, "i"))


def roman(value: int) -> str:
    """``value`` in lower-case Roman numerals ("xiv"); decimal outside 1-3999, which they do not write."""
    if not 0 < value < 4000:
        return str(value)
    numerals, rest = "", value
    for amount, numeral in ROMAN:
        count, rest = divmod(rest, amount)
        numerals += numeral * count
    return numerals


def letters(value: int, *, repeated: bool = False) -> str:
    """``value`` as a lower-case letter count: a..z, then aa, ab, ... (HTML's and OpenDocument's), or with
    ``repeated`` aa, bb, ... (Word's); decimal below 1."""
    if value < 1:
        return str(value)
    if repeated:
        return chr(ord("a") + (value - 1) % 26) * ((value - 1) // 26 + 1)
    found = ""
    while value > 0:
        value, rest = divmod(value - 1, 26)
        found = chr(ord("a") + rest) + found
    return found


def list_number(value: int, kind: str) -> str:
    """``value`` as a list numbered in ``kind`` writes it: "1" decimal, "a" / "A" letters, "i" / "I" Roman numerals
    (HTML's ``type`` and OpenDocument's ``num-format`` name them alike); decimal for any other kind."""
    if kind in ("a", "A"):
        return letters(value).upper() if kind == "A" else letters(value)
    if kind in ("i", "I"):
        return roman(value).upper() if kind == "I" else roman(value)
    return str(value)
