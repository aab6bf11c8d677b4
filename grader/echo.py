"""Chunks that only repeat the question: decided irrelevant without the model.

A chunk whose content words all occur in the query ("hello" for "hello", "So is there an IKEA there?"
for "Is there an IKEA in Dubai?", "???") carries no information beyond the question, so it cannot answer
it. A cross-encoder and a bi-encoder both score such echoes high (they share every word with the query),
so this rule runs before them, like the rule for empty chunks.
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["repeats_query"]

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_STOPWORD_TEXT = (
    "a an the of to in on for and or is are was were be been being by with what which who whom whose when where "
    "why how does do did done from as at that this these those it its into than then there their they them he "
    "she his her i you your we our my me can could would should will shall may might must has have had not no "
    "yes any some all about if so but also just too same anyone someone know question problem wondering please "
    "thanks thank re"
)
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())


def _content_words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOPWORDS}


@lru_cache(maxsize=256)
def _query_words(query: str) -> frozenset[str]:
    """A query's content words, computed once for all the chunks graded against it."""
    return frozenset(_content_words(query))


def repeats_query(query: str, text: str) -> bool:
    """True when ``text`` has no content word that is not already in ``query``."""
    return _content_words(text) <= _query_words(query)
