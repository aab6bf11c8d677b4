"""Sentence strips of a chunk: the units the corrective loop's refinement grades and quotes.

They live with retrieval because the index can store each strip's vector when it writes a chunk (``crag index
add --strip-vectors``): a fused grader then reads the strips' cosines from the index instead of embedding
every sentence of every kept chunk at question time. Both sides must cut a chunk the same way, so this is
the one place that does it.
"""

from __future__ import annotations

import re

__all__ = ["FENCE", "LIST_ITEM", "MIN_STRIP_WORDS", "TABLE_ROW", "blocks", "closes_fence", "fence_for",
           "heading_level", "sentence_strips", "strips_with_sections", "under_heading"]

FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")  # a code fence as CommonMark reads one: three or more of one kind
MARKDOWN_HEADING = re.compile(r"^\s{0,3}#{1,6}\s")  # headings are titles, not statements to quote
LIST_ITEM = re.compile(r"^\s*(?:[*+-]|\d{1,9}[.)])\s+(?=\S)")  # "* item", "- item", "2. step", "3) step"
LIST_LEAD_IN = (".", ":", ";", "!", "?")
TABLE_ROW = re.compile(r"^\s*\|.*\|\s*$|\S \| \S")  # "| a | b |" (Markdown) or "a | b" (HTML and Word tables)
SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
MIN_STRIP_WORDS = 3  # shorter fragments ("See below.") are not statements worth grading


def sentence_strips(text: str) -> list[str]:
    """The chunk's sentences of at least ``MIN_STRIP_WORDS`` words, headings left out, in document order.

    A blank line ends a sentence too: a title, list or caption without a full stop is not run into the
    sentence of the next paragraph. Lines within a paragraph are joined (text wrapped mid-sentence), except
    that each list item (its bullet or number left out) and each table row is a unit of its own: steps and rows
    are graded and quoted one at a time, not run together. A fenced code block is one strip, fences and line
    breaks kept, so that a quoted example still reads as code."""
    return [strip for strip, _ in strips_with_sections(text)]


def strips_with_sections(text: str) -> list[tuple[str, str | None]]:
    """:func:`sentence_strips`, each with the section it sits in: the text of the last heading of level 2 or
    deeper above it in the chunk (a level-1 heading titles the whole document), None before any. In API
    documentation the section heading names what a sentence describes (``pub fn dedup(&mut self)``); a generic
    heading of one to three plain words ("Examples", "§Time complexity", "Parameters") is named under the heading
    above it (``pub fn push(&mut self, value: T) › §Panics``), which says whose panics they are."""
    out: list[tuple[str, str | None]] = []
    path: list[tuple[int, str]] = []  # the headings (level >= 2) above the current line: under_heading
    section: str | None = None
    for is_code, block in blocks(text):
        if is_code:
            if len(block.split()) >= MIN_STRIP_WORDS + 2:  # + its two fence lines
                out.append((block, section))
            continue
        for unit, heading in _units(block):
            if heading is not None:
                path = under_heading(path, heading)
                section = _section_name(path)
                continue
            out += [(s.strip(), section) for s in SENTENCE_END.split(unit) if len(s.split()) >= MIN_STRIP_WORDS]
    return out


# "Examples", "§Panics", "Time complexity", "Return value": one to three plain words, no code (a heading such as
# "`child_process.execSync(command[, options])`" names its subject, however few spaces it has)
GENERIC_HEADING = re.compile(r"§?\s*[^\W\d_]+(?:[ '-][^\W\d_]+){0,2}")


def heading_level(heading: str) -> int:
    """The level of a Markdown heading line: its number of leading ``#``."""
    line = heading.strip()
    return len(line) - len(line.lstrip("#"))


def headings_down(text: str, levels: int) -> str:
    """``text`` with its Markdown headings ``levels`` deeper (level 6 at most), code blocks untouched: a document
    read inside another (an e-book's chapter, a mail's attachment) keeps its sections under the heading it sits in."""
    def down(block: str) -> str:
        stripped = block.lstrip()
        level = heading_level(stripped)
        return "#" * min(6, level + levels) + stripped[level:]

    return "\n\n".join(down(block) if not is_code and MARKDOWN_HEADING.match(block) else block
                       for is_code, block in blocks(text))


def under_heading(path: list[tuple[int, str]], heading: str) -> list[tuple[int, str]]:
    """The section path, (level, heading line) outermost first, once ``heading`` is read: it closes every section
    of its level or deeper and opens its own if it is of level 2 or deeper and has a title (a level-1 heading
    titles the document, or a new part of it, and closes them all)."""
    level = heading_level(heading)
    kept = [(lvl, h) for lvl, h in path if lvl < level]
    return [*kept, (level, heading.strip())] if level >= 2 and _title(heading) else kept


def _title(heading: str) -> str:
    return heading.strip().lstrip("#").strip()


def _section_name(path: list[tuple[int, str]]) -> str | None:
    if not path:
        return None
    inner = _title(path[-1][1])
    if len(path) > 1 and GENERIC_HEADING.fullmatch(inner):
        return f"{_title(path[-2][1])} › {inner}"
    return inner


def blocks(text: str) -> list[tuple[bool, str]]:
    """The text's paragraphs (split at blank lines) and fenced code blocks (fences included, blank lines inside
    kept; a fence left open runs to the end), in order, each as (is_code, text): what chunking keeps whole
    where it fits, and what strips are cut from."""
    out: list[tuple[bool, str]] = []
    lines: list[str] = []
    fence = ""  # the open fence's marker, "" outside code

    def flush(is_code: bool) -> None:
        block = "\n".join(lines).strip()
        if block:
            out.append((is_code, block))
        lines.clear()

    for line in text.splitlines():
        opener = FENCE.match(line)
        if not fence and opener is not None:
            flush(False)
            fence = opener.group(1)
            lines.append(line)
        elif fence:
            lines.append(line)
            if len(lines) > 1 and closes_fence(line, fence):
                flush(True)
                fence = ""
        elif not line.strip():
            flush(False)
        else:
            lines.append(line)
    flush(bool(fence))
    return out


def closes_fence(line: str, fence: str) -> bool:
    """Whether ``line`` closes the code block opened by ``fence`` (its marker, such as ```` ``` ````): as CommonMark
    has it, the same character at least as many times and nothing after it (```` ```python ```` is code)."""
    closer = FENCE.match(line)
    marker = closer.group(1) if closer else ""
    return marker[:1] == fence[:1] and len(marker) >= len(fence) and not line.strip()[len(marker):].strip()


def fence_for(code_lines: list[str], info: str = "") -> tuple[str, str]:
    """(opening, closing) fence lines for a code block whose lines are ``code_lines``: three backticks, or more
    than the longest backtick fence inside it, so that a block quoting Markdown (an HTML ``<pre>`` showing a
    fenced example, an indented block) is not closed early by its own content."""
    inner = [len(m.group(1)) for line in code_lines if (m := FENCE.match(line)) and m.group(1)[0] == "`"]
    fence = "`" * max(3, max(inner, default=0) + 1)
    return fence + info, fence


def _units(paragraph: str) -> list[tuple[str, str | None]]:
    """The paragraph's lines joined into units, each as (text, None), and its heading lines as ("", heading):
    prose (and a list item's wrapped lines) run on; a list item or a table row starts a unit, and nothing runs
    on from a row. A line that only looks like an item ("1066. The Normans" wrapped from the line before) is
    one only where a list can start: the paragraph's first line, after a line that ends a sentence or a lead-in
    (". : ; ! ?") or after another item."""
    units: list[tuple[list[str], str | None]] = []
    row_open = in_list = False
    previous = ""
    for line in paragraph.splitlines():
        if not line.strip():
            continue
        if MARKDOWN_HEADING.match(line):
            units.append(([], line.strip()))
            row_open, previous = False, ""
            continue
        item = LIST_ITEM.match(line)
        if item is not None and units and units[-1][1] is None and \
                not (in_list or row_open or previous.endswith(LIST_LEAD_IN)):
            item = None
        row = TABLE_ROW.search(line) is not None
        if item is not None or row or row_open or not units or units[-1][1] is not None:
            units.append(([], None))
            in_list = item is not None
        units[-1][0].append(line[item.end():] if item is not None else line.strip())
        row_open, previous = row, line.rstrip()
    return [(" ".join(lines), heading) for lines, heading in units]
