"""Chunks that cannot answer anything: decided irrelevant without the model.

- Echoes: a chunk whose content words all occur in the query ("hello" for "hello", "So is there an IKEA
  there?" for "Is there an IKEA in Dubai?") carries no information beyond the question; nor does one made only of
  common words or punctuation ("???", "a", "is it?").
- No words: a chunk without a word of two letters or a digit ("y", "- -", "a b c").

A cross-encoder and a bi-encoder both score echoes high (they share every word with the query), so these
rules run before them, like the rule for empty chunks. Chunks made only of questions are left to the model:
in tech support, answers are often phrased as questions ("Have you looked at your account's permissions?"
was the accepted answer to 9 held-out StackFAQ queries).

Pairs these rules decide never reach the model's thresholds, so calibration, threshold choice, shift references
and evaluation must treat them the way ``grade`` does (:func:`rule_decided`): fitted on such pairs, a map and a
band describe scores that are never used (echoes were the highest-scored pairs of the default's calibration data
and pinned its upper threshold at 1.0).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

__all__ = ["STOPWORDS", "non_answer_reason", "repeats_query", "rule_decided", "words"]

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_REAL_WORD = re.compile(r"[^\W\d_]{2,}|\d", re.UNICODE)
_STOPWORD_TEXT = (
    "a an the of to in on for and or is are was were be been being by with what which who whom whose when where "
    "why how does do did done from as at that this these those it its into than then there their they them he "
    "she his her i you your we our my me can could would should will shall may might must has have had not no "
    "yes any some all about if so but also just too same anyone someone know question problem wondering please "
    "thanks thank re here idea ideas tell hi hey anybody everyone"
)
STOPWORDS = frozenset(_STOPWORD_TEXT.split())


def words(text: str) -> list[str]:
    """The lower-cased words (letters and digits) of ``text``, in order."""
    return _WORD.findall(text.lower())


def _content_words(text: str) -> set[str]:
    return {w for w in words(text) if w not in STOPWORDS}


@lru_cache(maxsize=256)
def _query_words(query: str) -> frozenset[str]:
    """A query's content words, computed once for all the chunks graded against it."""
    return frozenset(_content_words(query))


def repeats_query(query: str, text: str) -> bool:
    """True when ``text`` has no content word that is not already in ``query``."""
    return _content_words(text) <= _query_words(query)


def non_answer_reason(query: str, text: str) -> str | None:
    """Why ``text`` cannot answer ``query`` whatever a model says, or None when the model must judge it."""
    if not text.strip():
        return "empty chunk text"
    content = _content_words(text)
    if not content:  # "a", "???", "is it?": nothing of the query repeated, and nothing else either
        return "the chunk has only common words (such as 'the', 'is') or punctuation; nothing that could answer"
    if content <= _query_words(query):
        return "the chunk only repeats words of the query; it adds nothing that could answer it"
    if not _REAL_WORD.search(text):
        return "the chunk has no word of two letters or more and no number"
    return None


def rule_decided(pairs: Sequence[tuple[str, str]]) -> np.ndarray:
    """Which (query, text) pairs the rules above decide (True), as ``grade`` would, without any model."""
    return np.fromiter((non_answer_reason(q, t) is not None for q, t in pairs), dtype=bool, count=len(pairs))
