"""The labels Word shows before list paragraphs ("1.", "2.3.", "b)", a bullet), worked out from the document's
numbering definitions as Word does, so that "step 3" of a procedure is still step 3 once indexed.

A paragraph is numbered by its own ``w:numPr`` or, failing that, by its style's (followed through the styles it is
based on). Each list (``numId``) keeps one counter per level; it goes on across paragraphs that interrupt the
list, a new item restarts the levels below it, and a ``startOverride`` of the list sets where it begins.
"""

from __future__ import annotations

import re
from typing import Any

from pipeline.retrieval.numerals import letters, roman

__all__ = ["ListLabels", "ParagraphStyles", "next_label"]

W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"


class ParagraphStyles:
    """Each paragraph's style, looked up once per style id. python-docx resolves ``paragraph.style`` from the
    paragraph's style id alone but scans every style of the document on each call for a paragraph without one (the
    default style): a 300-page specification (11,000 paragraphs) took 46 s to read, 45 of them in that scan."""

    def __init__(self) -> None:
        self._by_id: dict[str | None, Any] = {}

    def of(self, paragraph: Any) -> Any:
        """``paragraph.style`` (None when the document defines no such style)."""
        style_id = paragraph._p.style  # the paragraph's w:pStyle value, None without one (no public API for it)
        if style_id not in self._by_id:
            self._by_id[style_id] = paragraph.style
        return self._by_id[style_id]


class ListLabels:
    """Labels for one document's paragraphs, in document order (the counters are state); ``styles``: the style
    look-up to share with the caller."""

    def __init__(self, document: Any, styles: ParagraphStyles | None = None) -> None:
        self.styles = styles or ParagraphStyles()
        self._numbering = _numbering_element(document)
        self._counters: dict[str, list[int | None]] = {}
        self._definitions: dict[str, tuple[list[tuple[str, str]], list[int]] | None] = {}  # read once per list

    def label(self, paragraph: Any) -> str | None:
        """The paragraph's label ("- " for a bullet, "2.1. " for a number), "" for a list level that shows
        none, None when the paragraph is not in a list."""
        num_id, level = _num_pr(paragraph, self.styles.of(paragraph))
        if num_id is None:
            return None
        if num_id not in self._definitions:
            self._definitions[num_id] = self._level_definitions(num_id)
        definition = self._definitions[num_id]
        if definition is None:
            return None
        levels, starts = definition
        return next_label(levels, starts, self._counters.setdefault(num_id, [None] * len(levels)), level)

    def _level_definitions(self, num_id: str) -> tuple[list[tuple[str, str]], list[int]] | None:
        """(format, text) and start of each level of list ``num_id``; None when the document does not define it."""
        if self._numbering is None:
            return None
        num = next((n for n in self._numbering.iterfind(f"{W}num") if n.get(f"{W}numId") == num_id), None)
        abstract_id = _val(num.find(f"{W}abstractNumId")) if num is not None else None
        abstract = next((a for a in self._numbering.iterfind(f"{W}abstractNum")
                         if a.get(f"{W}abstractNumId") == abstract_id), None)
        if num is None or abstract is None:
            return None
        by_level = {lvl.get(f"{W}ilvl"): lvl for lvl in abstract.iterfind(f"{W}lvl")}
        starts_overridden: dict[str, int] = {}
        for override in num.iterfind(f"{W}lvlOverride"):
            level = override.get(f"{W}ilvl")
            if override.find(f"{W}lvl") is not None:
                by_level[level] = override.find(f"{W}lvl")
            start = _val(override.find(f"{W}startOverride"))
            if start is not None and start.isdigit():
                starts_overridden[level] = int(start)
        levels, starts = [], []
        for index in range(9):
            lvl = by_level.get(str(index))
            fmt = (_val(lvl.find(f"{W}numFmt")) if lvl is not None else None) or "decimal"
            text = _val(lvl.find(f"{W}lvlText")) if lvl is not None else None
            start = _val(lvl.find(f"{W}start")) if lvl is not None else None
            levels.append((fmt, f"%{index + 1}." if text is None else text))
            starts.append(starts_overridden.get(str(index), int(start) if start and start.isdigit() else 1))
        return levels, starts


def next_label(levels: list[tuple[str, str]], starts: list[int], counters: list[int | None], level: int) -> str:
    """The label of a list's next item at ``level``, its ``counters`` (one per level, None before a level's first
    item) stepped: the level counts on, the levels below it restart. ``levels``: each level's (format, text),
    Word's way (``"decimal"``, ``"%1.%2."``); ``starts``: where each level starts. "- " for a bullet, "" for a level
    that shows nothing."""
    level = min(level, len(levels) - 1)
    current = counters[level]
    counters[level] = starts[level] if current is None else current + 1
    for deeper in range(level + 1, len(counters)):
        counters[deeper] = None
    if levels[level][0] == "bullet":
        return "- "

    def number(match: re.Match[str]) -> str:
        shown = int(match.group(1)) - 1
        if not 0 <= shown < len(levels):
            return ""
        value = counters[shown] if counters[shown] is not None else starts[shown]
        return _formatted(value or 0, levels[shown][0])

    shown = re.sub(r"%([1-9])", number, levels[level][1]).strip()
    return shown + " " if shown else ""


def _numbering_element(document: Any) -> Any:
    """The document's ``w:numbering`` element, None when it has no numbering part (nothing is created)."""
    for rel in document.part.rels.values():
        if rel.reltype.endswith("/numbering") and not rel.is_external:
            return rel.target_part.element
    return None


def _num_pr(paragraph: Any, style: Any) -> tuple[str | None, int]:
    """(numId, level) from the paragraph's own numbering, else its ``style`` chain's; numId "0" means none."""
    num_id: str | None = None
    level: int | None = None
    owners = [paragraph._p]
    while style is not None and len(owners) < 12:  # a style based on itself must not loop
        owners.append(style.element)
        style = style.base_style
    for owner in owners:
        ppr = owner.find(f"{W}pPr")
        numpr = ppr.find(f"{W}numPr") if ppr is not None else None
        if numpr is None:
            continue
        num_id = num_id if num_id is not None else _val(numpr.find(f"{W}numId"))
        if level is None and (ilvl := _val(numpr.find(f"{W}ilvl"))) is not None and ilvl.isdigit():
            level = int(ilvl)
        if num_id is not None and level is not None:
            break
    return (num_id if num_id not in (None, "0") else None), min(level or 0, 8)


def _val(element: Any) -> str | None:
    return element.get(f"{W}val") if element is not None else None


def _formatted(value: int, fmt: str) -> str:
    """``value`` as Word writes it in ``fmt`` (letters and Roman numerals; decimal for anything else)."""
    if fmt == "none":
        return ""
    if fmt in ("lowerLetter", "upperLetter") and value > 0:
        letter = letters(value, repeated=True)  # z, aa, bb, ... as Word counts
        return letter.upper() if fmt == "upperLetter" else letter
    if fmt in ("lowerRoman", "upperRoman") and 0 < value < 4000:
        return roman(value).upper() if fmt == "upperRoman" else roman(value)
    if fmt == "decimalZero":
        return f"{value:02d}"
    return str(value)
