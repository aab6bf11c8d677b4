"""Python's codec for a Windows code page number, as RTF (``\\ansicpgN``), Outlook messages and Office property sets
name a text's 8-bit character set."""

from __future__ import annotations

import codecs

__all__ = ["windows_codec"]

# Windows code page numbers that Python knows by another name than cpN
NAMED = {65001: "utf-8", 20127: "ascii", 1200: "utf-16-le", 10000: "mac_roman", 50220: "iso2022_jp",
         50221: "iso2022_jp", 50222: "iso2022_jp", 51932: "euc_jp", 51949: "euc_kr", 52936: "hz", 54936: "gb18030",
         **{28590 + n: f"iso8859_{n}" for n in range(1, 16)}}


def windows_codec(number: int | None, default: str = "cp1252") -> str:
    """The Python codec of Windows code page ``number`` (1252: cp1252, 65001: utf-8, 28591: iso8859_1...);
    ``default`` when it is absent or Python has no such codec."""
    if not number:
        return default
    try:
        return codecs.lookup(NAMED.get(number, f"cp{number}")).name
    except LookupError:
        return default
