"""Sentence strips of a chunk: the units the corrective loop's refinement grades and quotes.

They live with retrieval because the index can store each strip's vector when it writes a chunk (``crag index
add --strip-vectors``): a fused grader then reads the strips' cosines from the index instead of embedding
every sentence of every kept chunk at question time. Both sides must cut a chunk the same way, so this is
the one place that does it.
"""

from __future__ import annotations

import re

__all__ = ["MIN_STRIP_WORDS", "sentence_strips"]

MARKDOWN_HEADING = re.compile(r"^\s{0,3}#{1,6}\s")  # headings are titles, not statements to quote
SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
PARAGRAPH_BREAK = re.compile(r"\n\s*\n")  # as chunk_text splits paragraphs (\r\n too)
MIN_STRIP_WORDS = 3  # shorter fragments ("See below.") are not statements worth grading


def sentence_strips(text: str) -> list[str]:
    """The chunk's sentences of at least ``MIN_STRIP_WORDS`` words, headings left out, in document order.

    A blank line ends a sentence too: a title, list or caption without a full stop is not run into the
    sentence of the next paragraph. Lines within a paragraph are joined (text wrapped mid-sentence)."""
    strips: list[str] = []
    for paragraph in PARAGRAPH_BREAK.split(text):
        body = " ".join(line for line in paragraph.splitlines() if not MARKDOWN_HEADING.match(line))
        strips += [s.strip() for s in SENTENCE_END.split(body) if len(s.split()) >= MIN_STRIP_WORDS]
    return strips
