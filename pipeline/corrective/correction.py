"""Corrective steps that need no LLM: chunk heuristics, authority ordering, refinement into strips, rewriting."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from grader.protocol import Grader
from models.types import Grade
from pipeline.corrective.context_quality import question_of
from pipeline.corrective.strip_selection import StripChoice
from pipeline.retrieval.documents import StoredChunk
from pipeline.retrieval.strips import strips_with_sections
from pipeline.retrieval.words import content_words

__all__ = [
    "Strip",
    "drop_bad_chunks",
    "first_search",
    "identifiers",
    "keep_identifiers",
    "order_by_authority",
    "refine",
    "rewrite_query",
]

IDENTIFIER = re.compile(
    r"\b(?:[A-Z]{2,}[-_]?\d+[\w-]*|\d{4}-\d{2}-\d{2}|\d+(?:[.,/]\d+)*|[A-Z][a-z]+(?:[A-Z][a-z0-9]+)+|"
    r"[A-Za-z]+-\d+[\w-]*|v\d+(?:\.\d+)*)\b"
)


BAD_CATEGORIES = ("Cc", "Co", "Cs", "Cn")  # control, private use, surrogate, unassigned
LINE_BREAKS_AND_TABS = str.maketrans("", "", "\n\t")


def _is_corrupt(text: str) -> bool:
    stripped = text.strip()
    if len(stripped) < 3:
        return True
    bad = _bad_characters(stripped)
    return bad / len(stripped) > 0.1 or stripped.count("\ufffd") / len(stripped) > 0.05


def _bad_characters(text: str) -> int:
    """Characters of :data:`BAD_CATEGORIES` other than line breaks and tabs. A printable text has none (every
    such category is unprintable), and ``str.isprintable`` answers that in C, for the usual clean chunk."""
    if text.translate(LINE_BREAKS_AND_TABS).isprintable():
        return 0
    return sum(1 for ch in text if unicodedata.category(ch) in BAD_CATEGORIES and ch not in "\n\t")


def drop_bad_chunks(chunks: Sequence[StoredChunk]) -> tuple[list[StoredChunk], list[str]]:
    """Remove empty, corrupt and duplicate chunks before any model sees them; returns (kept, reasons)."""
    kept, reasons, seen = [], [], set()
    for chunk in chunks:
        key = " ".join(chunk.text.lower().split())
        if _is_corrupt(chunk.text):
            reasons.append(f"{chunk.chunk_id}: empty or corrupt text")
        elif key in seen:
            reasons.append(f"{chunk.chunk_id}: duplicate of an earlier chunk")
        else:
            seen.add(key)
            kept.append(chunk)
    return kept, reasons


def order_by_authority(chunks: Sequence[StoredChunk]) -> tuple[list[StoredChunk], list[str]]:
    """Deterministic preference: active before superseded, then newest effective date, then authority rank.

    Returns the ordered chunks and the recorded conflicts (same source title, different status or date).
    """
    ordered = sorted(chunks, key=lambda c: (c.status != "active", _neg_date(c.effective_date), -c.authority))
    conflicts = []
    by_title: dict[str, list[StoredChunk]] = {}
    for chunk in ordered:
        if chunk.title:
            by_title.setdefault(chunk.title, []).append(chunk)
    for title, group in by_title.items():
        versions = {(c.status, c.effective_date) for c in group}
        if len(versions) > 1:
            winner = group[0]
            when = winner.effective_date or "no date"
            conflicts.append(f"{title!r}: preferred {winner.chunk_id} ({winner.status}, {when})"
                             f" over {[c.chunk_id for c in group[1:]]}")
    return ordered, conflicts


def _neg_date(date: str) -> tuple[int, ...]:
    digits = [int(part) for part in re.findall(r"\d+", date)[:3]] or [0]
    return tuple(-d for d in digits)


@dataclass(frozen=True)
class Strip:
    """A sentence-level piece of a chunk with its grade."""

    chunk_id: str
    order: int
    text: str
    grade: Grade
    section: str | None = None  # the heading of the chunk's section it sits in (level 2 or deeper), if any
    completes: bool = False  # kept because the strip before it announces it ("... in editable mode:"), not on its grade
    record: bool = False  # a whole table record (``StoredChunk.is_record``), lines and all


def refine(query: str, chunks: Sequence[StoredChunk], grader: Grader, *, token_budget: int = 300,
           min_probability: float = 0.1, relative_floor: float = 0.0) -> list[Strip]:
    """Split chunks into sentence strips, grade them with the same grader, keep the best within the budget
    (none below ``min_probability`` or below ``relative_floor`` times the best strip's probability), and return
    them in document order. A kept strip that ends with a colon brings the strip after it in its chunk (the code,
    list item or sentence it announces), whatever that one's grade, within the budget (``Strip.completes``). A
    sentence that repeats an earlier one (same words, whatever the case
    and punctuation; chunks come in authority order) is neither graded nor kept twice; one whose grade is
    withheld (it speaks of the opposite of what was asked: :mod:`grader.contrast`) is not kept. A table's record
    (``StoredChunk.is_record``) is one strip: a FAQ's question is no answer without the answer beside it. Strips
    that cannot change the choice are not read by the cross-encoder (:mod:`pipeline.corrective.strip_selection`)."""
    strips: list[tuple[str, int, str]] = []
    sections: list[str | None] = []
    records: set[int] = set()
    seen: set[tuple[str, ...]] = set()
    for chunk in chunks:
        for sentence, section in [(chunk.text, None)] if chunk.is_record else strips_with_sections(chunk.text):
            words = tuple(re.findall(r"\w+", sentence.lower()))
            if words not in seen:
                seen.add(words)
                if chunk.is_record:
                    records.add(len(strips))
                strips.append((chunk.chunk_id, len(strips), sentence))
                sections.append(section)
    if not strips:
        return []
    choice = StripChoice(query, strips, grader, min_probability)
    kept, completing = choice.choose(token_budget, relative_floor)
    return [Strip(strips[i][0], strips[i][1], strips[i][2], choice.grades[i], sections[i],
                  completes=i in completing, record=i in records)
            for i in sorted(kept)]


def identifiers(text: str) -> set[str]:
    """Invoice numbers, product names, dates, IDs and numbers a rewrite must keep."""
    return set(IDENTIFIER.findall(text))


PLAIN_NUMBER = re.compile(r"\d+(?:[.,/]\d+)*")  # "2 weeks", "in 2001": told numbers, rarely what to search on


def _told(query: str, focus: str) -> list[str]:
    """The identifiers of a long message outside its question that are worth searching on: codes, names, dates,
    versions; not the plain numbers of a story (searched for, they cost 3 points of recall@8 in the bench)."""
    return sorted(i for i in identifiers(query) - identifiers(focus) if not PLAIN_NUMBER.fullmatch(i))


def _focus(query: str) -> tuple[str, list[str]]:
    """A query's question (:func:`question_of`) and the identifiers told outside it (none for a short query)."""
    focus = question_of(query)
    return focus, (_told(query, focus) if focus != query else [])


def _searched(query: str, focus: str, told: list[str]) -> str:
    """What the first search looks for, from :func:`_focus`'s parts: the query, or its question and told ids."""
    return query if focus == query else " ".join([focus, *told])


def first_search(query: str) -> str:
    """What the first search looks for: the query itself, or for a long message its question (:func:`question_of`)
    with the identifiers told elsewhere in the message. 150 words told around a question drown its words in both
    the lexical and the dense search (recall@8 3-5% against ~0.9 for the question in
    ``bench/bench_index_recall.py --story-words``); the grader still reads the whole message."""
    return _searched(query, *_focus(query))


def rewrite_query(query: str, missing: Sequence[str] = ()) -> str:
    """A keyword query focused on the content words (and any missing aspects), keeping every identifier.

    A long message is searched on its question's words (:func:`question_of`), the identifiers told elsewhere in it
    added (an invoice number told in the story still matters); a story's words would drown the question's in any
    search. If the rewrite would drop an identifier, what the first search looked for is returned instead (for a
    short query, the query itself).
    """
    focus, told = _focus(query)
    words = content_words(re.findall(r"[\w'-]+", focus))
    kept: list[str] = []
    for word in [*words, *missing, *told]:
        if word.strip() and word.lower() not in (k.lower() for k in kept):
            kept.append(word.strip())
    searched = _searched(query, focus, told)  # what first_search(query) looks for
    if not any(len(w) >= 3 for w in words):
        return searched
    return keep_identifiers(searched, " ".join(kept))


def keep_identifiers(query: str, candidate: str) -> str:
    """``candidate`` when it keeps every identifier of ``query`` (any rewriter's output), else the raw query."""
    return candidate if candidate.strip() and identifiers(query) <= identifiers(candidate) else query
