"""Text that can be stored: every character a real one.

A JSON string's ``\\ud83d\\ude00`` escapes, RTF's ``\\u-10179?\\u-8704?`` and similar spell a character beyond the
Basic Multilingual Plane as two UTF-16 halves (surrogates); read one by one, Python keeps them as two code points
that are no characters, and a half with no partner cannot be encoded at all (hashing a chunk or storing it in
SQLite fails on it, and so does tokenising it). Documents are read through :func:`whole_characters`, and the
graders and the embedder pass what they are given through it too.
"""

from __future__ import annotations

import re

__all__ = ["whole_characters"]

SURROGATE = re.compile("[\ud800-\udfff]")


def whole_characters(text: str) -> str:
    """``text`` with each surrogate pair made the character it stands for and a lone half replaced by U+FFFD."""
    if not SURROGATE.search(text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
