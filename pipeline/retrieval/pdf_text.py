"""Paragraphs from the text lines a PDF gives: what a page's layout meant, recovered from line lengths.

pypdf hands back a page as lines, with nothing to say where a paragraph ends: read as one block, a heading
("Exchanges") runs into the sentence after it and the running header or footer of every page ("Company Ltd -
Confidential - Page 2") into the page's first or last sentence. Four rules recover the rest:

- a line that is much shorter than the page's full lines ends a paragraph when it ends a sentence, and is
  a heading of its own when it does not (and the next line starts a new sentence);
- a line that starts with a bullet ("•", a symbol font's) or a list number ("3.", "b)") starts a list item, a
  paragraph of its own (a bullet written "- ", as the other readers write one); a number does only where a list
  can start (after a sentence's or a lead-in's end, or another item), not in a sentence wrapped before "(b) of";
- a word hyphenated across lines ("circum-" / "stances") is joined;
- a line that opens or closes most pages of a document (numbers aside) is a running header or footer and
  is left out; it takes three pages to tell.

The dot leaders of a table of contents ("Introduction . . . . . 3") are read as a space.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

__all__ = ["pdf_paragraphs"]

SENTENCE_END = re.compile(r"[.!?:;][\"')\]]*$")
HYPHENATED = re.compile(r"[^\W\d_]-$")
DOT_LEADER = re.compile(r"[ \t]*(?:\.[ \t]*){4,}")  # "Introduction . . . . . 3" in a table of contents: not text
# a list item's start: a bullet glyph (Symbol and Wingdings bullets come out as private-use characters), or a number
# or lower-case letter with "." or ")" ("3.", "b)", "(iv)"); not "A." or "I.", which start names and sentences
BULLETS = "\u2022\u25e6\u25aa\u25ab\u25cf\u25cb\u25a0\u25a1\u2023\u2043\u2219\u00b7\u27a2\uf0a7\uf0b7\uf0d8\uf076\uf0fc"
BULLET = re.compile(f"^[{BULLETS}]\\s*")
NUMBERED = re.compile(r"^\(?(?:\d{1,3}(?:\.\d{1,3})*|[a-z]|[ivx]{1,5})[.)]\s+(?=\S)")
SHORT_SENTENCE_END = 0.75   # a sentence-ending line shorter than this share of a full line ends its paragraph
SHORT_HEADING = 0.6         # an unpunctuated line shorter than this share of a full line is a heading
EDGE_LINES = 2              # running headers and footers are among a page's first and last lines
MIN_PAGES_FOR_RUNNING = 3


def pdf_paragraphs(pages: Sequence[str]) -> str:
    """The pages' text as paragraphs separated by blank lines (pages end paragraphs too)."""
    lines = [[text for line in page.splitlines() if (text := DOT_LEADER.sub(" ", line).strip())] for page in pages]
    running = _running_lines(lines)
    paragraphs: list[str] = []
    for page in lines:
        kept = [line for i, line in enumerate(page) if not (_is_edge(i, len(page)) and _shape(line) in running)]
        paragraphs += _page_paragraphs(kept)
    return "\n\n".join(paragraphs)


def _shape(line: str) -> str:
    return re.sub(r"\d+", "#", line.lower())


def _is_edge(index: int, count: int) -> bool:
    """Among the page's first or last lines; a short page has fewer (a page of 3 lines: the first and last)."""
    edge = min(EDGE_LINES, (count - 1) // 2)
    return index < edge or index >= count - edge


def _running_lines(pages: list[list[str]]) -> set[str]:
    """Line shapes that open or close at least half of the pages (of a document of three or more)."""
    if len(pages) < MIN_PAGES_FOR_RUNNING:
        return set()
    seen = Counter(shape for page in pages for shape in {_shape(line) for i, line in enumerate(page)
                                                           if _is_edge(i, len(page))})
    return {shape for shape, count in seen.items() if 2 * count >= len(pages)}


def _page_paragraphs(lines: list[str]) -> list[str]:
    if not lines:
        return []
    full = sorted(len(line) for line in lines)[int(0.8 * (len(lines) - 1))]  # a full line's length, roughly
    paragraphs: list[str] = []
    current = ""
    in_list = False
    for i, line in enumerate(lines):
        following = lines[i + 1] if i + 1 < len(lines) else ""
        bullet = BULLET.match(line)
        # a number only starts an item where a list can start: "(b) of the contract" wrapped from "see subsection"
        # runs on; after a sentence's or lead-in's end (". : ;"), after another item, or on a paragraph's first line
        item = bullet or (NUMBERED.match(line) if not current or in_list or SENTENCE_END.search(current) else None)
        if item and current:  # a list item starts a paragraph of its own, however long the line before it
            paragraphs.append(current)
            current = ""
        in_list = bool(item) or (in_list and bool(current))  # an item's wrapped lines keep the list open
        if bullet:
            line = "- " + line[bullet.end():]  # as the other readers write a bullet
        heading = not item and _is_heading(line, following, full)
        if heading and current:
            paragraphs.append(current)
            current = ""
        current = current[:-1] + line if HYPHENATED.search(current) and line[:1].islower() else \
            f"{current} {line}".strip()
        if heading or not following or (SENTENCE_END.search(line) and len(line) < SHORT_SENTENCE_END * full):
            paragraphs.append(current)
            current = ""
    return paragraphs


def _is_heading(line: str, following: str, full: int) -> bool:
    """A short line that ends no sentence, followed by a line that starts one."""
    return (not SENTENCE_END.search(line) and len(line) < SHORT_HEADING * full and line[:1].isupper()
            and following[:1].isupper())
