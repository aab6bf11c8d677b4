"""The lists of texts and of (query, text) pairs that the models read, checked once where they come in.

A single string where a list belongs is the common slip: iterated, it becomes one text per character, embedded or
scored without complaint. These checks refuse it, and anything that is not text, naming what was given; they also
make each text of whole characters (:func:`models.unicode_text.whole_characters`), which the tokenizer needs.
"""

from __future__ import annotations

from collections.abc import Iterable

from models.errors import ConfigError
from models.unicode_text import whole_characters

__all__ = ["pair_list", "text_list"]


def text_list(texts: Iterable[str], what: str = "embed") -> list[str]:
    """``texts`` as a list of whole-character strings; a ConfigError for one string alone or an item that is not a
    string."""
    if isinstance(texts, (str, bytes)):
        raise ConfigError(f"{what} takes a list of texts, got one {type(texts).__name__}: wrap it in a list "
                          f"([text]), got {texts!r:.80}")
    out = []
    for position, text in enumerate(texts):
        if not isinstance(text, str):
            raise ConfigError(f"{what}: text {position} is a {type(text).__name__}, not a str: {text!r:.80}")
        out.append(whole_characters(text))
    return out


def pair_list(pairs: Iterable[tuple[str, str]], what: str = "score_pairs") -> list[tuple[str, str]]:
    """``pairs`` as a list of (query, text) string pairs of whole characters; a ConfigError for one pair alone, a
    string, or an item that is not two strings."""
    if isinstance(pairs, (str, bytes)) or (isinstance(pairs, tuple) and len(pairs) == 2
                                            and all(isinstance(p, str) for p in pairs)):
        raise ConfigError(f"{what} takes a list of (query, text) pairs, got one {type(pairs).__name__}: wrap it in "
                          f"a list ([(query, text)]), got {pairs!r:.80}")
    out = []
    for position, pair in enumerate(pairs):
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2 and all(isinstance(p, str) for p in pair)):
            raise ConfigError(f"{what}: pair {position} is not a (query, text) pair of two strings: {pair!r:.80}")
        out.append((whole_characters(pair[0]), whole_characters(pair[1])))
    return out
