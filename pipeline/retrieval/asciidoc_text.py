"""The readable text of an AsciiDoc file (``.adoc``, ``.asciidoc``: the sources of Spring's, Red Hat's, Git's and
many other projects' documentation), read with the standard library.

Read raw, AsciiDoc spends the grader's tokens on markup: attribute entries (``:toc: left``), block attributes
(``[source,java]``), delimiter lines, ``link:https://...[text]`` macros. So the text is written back the way the
other readers write theirs: section titles as Markdown headings (``== Setup`` is ``## Setup``), a document's own
title naming it; listing and literal blocks fenced as code in their language; admonitions labelled ("Note: ...",
for ``NOTE: ...`` and ``[NOTE]`` blocks); example, sidebar and open blocks read as text, quotes as ``>`` lines;
tables a row per line, cells split by ``|``; lists with their markers (``- `` for ``*``, numbers for ``.``),
``term:: definition`` as "term: definition"; inline markup reduced to what a reader sees (links and cross
references by their words, ``{attribute}`` references by the values the document sets, emphasis marks dropped,
code spans kept). Comments, attribute entries, conditional and include directives (an included file is indexed as
a file of its own), footnotes and index terms are left out.
"""

from __future__ import annotations

import csv
import re
import textwrap
from collections.abc import Iterator
from itertools import dropwhile

from pipeline.retrieval.alt_text import authored
from pipeline.retrieval.html_text import html_to_text
from pipeline.retrieval.sphinx_names import labelled
from pipeline.retrieval.strips import fence_for
from pipeline.retrieval.table_text import row_line

__all__ = ["asciidoc_to_text"]

ADMONITION_NAMES = ("NOTE", "TIP", "IMPORTANT", "WARNING", "CAUTION")
ADMONITION_PARAGRAPH = re.compile(rf"^({'|'.join(ADMONITION_NAMES)}):\s+(.*)$")
ATTRIBUTE_ENTRY = re.compile(r"^:(!?[\w][\w-]*!?):(?:\s+(.*))?$")  # the value is stripped after
BLOCK_ATTRIBUTES = re.compile(r"^\[(.*)\]$")
BLOCK_TITLE = re.compile(r"^\.([^.\s].*)$")
SECTION = re.compile(r"^(={1,6}|#{1,6})\s+(\S.*)$")  # a closing run of the same marks is stripped after
DIRECTIVE = re.compile(r"^(?:ifdef|ifndef|ifeval|endif|include|toc|tag|end)::[^\[]*\[.*\]\s*$")
BLOCK_IMAGE = re.compile(r"^image::([^\[]*)\[(.*)\]\s*$")
DELIMITER = re.compile(r"^(-{4,}|\.{4,}|={4,}|\*{4,}|_{4,}|\+{4,}|/{4,}|--|[|,:!]={3,})\s*$")
LIST_ITEM = re.compile(r"^\s*(\*{1,5}|-|\.{1,5}|\d+\.|[a-zA-Z]\.)\s+(.*)$")
LABELED_ITEM = re.compile(r"^(\S.*?)(:{2,4}|;;)(?:\s+(.*))?$")
MAX_NESTING = 16  # example, sidebar and quote blocks inside one another read this deep
CELL_SPEC = r"(?:\d+\*)?(?:\d*(?:\.\d+)?\+)?[<^>]?(?:\.[<^>])?[adehlmsv]?"  # 2+, .3+, 3*, ^.^, a, 2+^.^s
BREAKS = frozenset({"'''", "---", "***", "<<<"})  # thematic and page breaks
DEFAULT_ATTRIBUTES = {"nbsp": "\u00a0", "sp": " ", "empty": "", "zwsp": "", "amp": "&", "lt": "<", "gt": ">",
                      "startsb": "[", "endsb": "]", "vbar": "|", "caret": "^", "asterisk": "*", "tilde": "~",
                      "plus": "+", "apostrophe": "'", "backslash": "\\", "backtick": "`", "two-colons": "::",
                      "two-semicolons": ";;", "cpp": "C++", "pp": "++", "deg": "\u00b0", "quot": '"'}


def asciidoc_to_text(raw: str) -> tuple[str, str]:
    """(title, text): the document title (``= Title`` opening the file), else its first section title ('' when
    neither), and the text."""
    lines = raw.replace("\t", "    ").split("\n")
    attributes = dict(DEFAULT_ATTRIBUTES)
    title, start = _header(lines, attributes)
    body = _Reader(attributes).read(lines[start:])
    text = "\n\n".join(body)
    if not title:
        title = next((b.lstrip("#").strip() for b in body if SECTION.match(b) and b.startswith("#")), "")
    return title, text


def _header(lines: list[str], attributes: dict[str, str]) -> tuple[str, int]:
    """The document title and where the body starts: ``= Title``, then the author, revision and attribute lines
    up to the first blank line, are the header (comments before it are skipped)."""
    i = 0
    while i < len(lines) and (not lines[i].strip() or lines[i].startswith("//")):
        i += 1
    header = re.match(r"^=\s+(\S.*)$", lines[i]) if i < len(lines) else None
    if header is None:
        return "", 0
    i += 1
    while i < len(lines) and lines[i].strip():
        _set_attribute(lines[i], attributes)
        i += 1
    return _inline(header.group(1).strip(), attributes), i


def _set_attribute(line: str, attributes: dict[str, str]) -> bool:
    """Store (or unset) an attribute entry line; whether the line was one."""
    entry = ATTRIBUTE_ENTRY.match(line)
    if entry is None:
        return False
    name = entry.group(1)
    if name.startswith("!") or name.endswith("!"):
        attributes.pop(name.strip("!"), None)
    else:
        attributes[name] = _inline((entry.group(2) or "").strip(), attributes)
    return True


class _Reader:
    """Blocks of plain text from AsciiDoc lines (one block a paragraph, heading, list item, code block or row)."""

    def __init__(self, attributes: dict[str, str], depth: int = 0) -> None:
        self.attributes = attributes
        self.depth = depth  # blocks this reader's lines sit in
        self.counters: dict[int, int] = {}  # the numbers of an ordered list's items so far, by depth

    def read(self, lines: list[str]) -> list[str]:
        out: list[str] = []
        style: list[str] = []  # the positional attributes of the next block: ["source", "java"], ["NOTE"]
        i = 0
        while i < len(lines):
            line = lines[i].rstrip()
            stripped = line.strip()
            delimiter = DELIMITER.match(line)
            if delimiter:
                end = next((j for j in range(i + 1, len(lines)) if lines[j].rstrip() == line), len(lines))
                out += self._delimited(delimiter.group(1), lines[i + 1:end], style)
                style, i = [], end + 1
                continue
            i += 1
            if not stripped or stripped in BREAKS or stripped == "+":
                continue
            if line.startswith("//") or DIRECTIVE.match(stripped) or _set_attribute(line, self.attributes):
                continue
            if stripped.startswith("[[") and stripped.endswith("]]"):
                continue  # an anchor: a name for links, not text
            attributes = BLOCK_ATTRIBUTES.match(stripped)
            if attributes:
                style = _attribute_list(attributes.group(1))
                continue
            title = BLOCK_TITLE.match(stripped)
            if title and not LIST_ITEM.match(line):
                out.append(self._inline(title.group(1)))
                continue
            section = SECTION.match(line)
            if section:
                out.append("#" * len(section.group(1)) + " " + self._inline(_section_title(section)))
                style, self.counters = [], {}
                continue
            image = BLOCK_IMAGE.match(stripped)
            if image:
                alt = authored(_positional(image.group(2)))
                if alt:
                    out.append(f"Image: {alt}")
                continue
            paragraph = [line]
            while i < len(lines) and lines[i].strip() and not _starts_block(lines[i]):
                paragraph.append(lines[i].rstrip())
                i += 1
            out += self._paragraph(paragraph, style)
            style = []
        return out

    def _paragraph(self, lines: list[str], style: list[str]) -> list[str]:
        kind = (style[0] if style else "").lower()
        if kind in ("source", "listing", "literal") or (not kind and lines[0].startswith(" ")):
            code = textwrap.dedent("\n".join(lines)).split("\n")
            opening, closing = fence_for(code, style[1] if kind == "source" and len(style) > 1 else "")
            return ["\n".join([opening, *code, closing])]
        if kind == "pass":
            return [t for t in [html_to_text("\n".join(lines))[1].strip()] if t]
        item = LIST_ITEM.match(lines[0])
        if item:
            return [self._list_item(item.group(1), [item.group(2), *(s.strip() for s in lines[1:])])]
        self.counters = {}
        labeled = LABELED_ITEM.match(lines[0])
        if labeled and "://" not in labeled.group(1):
            definition = " ".join(filter(None, [labeled.group(3), *(s.strip() for s in lines[1:])]))
            term = self._inline(labeled.group(1))
            return [f"{term}: {self._inline(definition)}" if definition else f"{term}:"]
        admonition = ADMONITION_PARAGRAPH.match(lines[0])
        text = "\n".join(self._inline(re.sub(r"\s\+$", "", s)) for s in
                         ([admonition.group(2), *lines[1:]] if admonition else lines))
        label = admonition.group(1) if admonition else (style[0] if style and style[0] in ADMONITION_NAMES else "")
        if kind in ("quote", "verse"):
            return ["\n".join(f"> {s}" for s in text.split("\n"))]
        return [labelled(label.lower(), text) if label else text]

    def _list_item(self, marker: str, lines: list[str]) -> str:
        depth = len(marker) if marker[0] in "*." else 1
        self.counters = {d: n for d, n in self.counters.items() if d <= depth}  # a deeper list ended
        if marker[0] == ".":
            self.counters[depth] = self.counters.get(depth, 0) + 1
        label = "- " if marker[0] in "*-" else (f"{self.counters[depth]}. " if marker[0] == "." else f"{marker} ")
        return "  " * (depth - 1) + label + " ".join(self._inline(s) for s in lines if s)

    def _delimited(self, delimiter: str, body: list[str], style: list[str]) -> list[str]:
        kind = (style[0] if style else "").lower()
        mark = delimiter[0]
        if mark == "/":
            return []  # a comment block
        if mark in "|,:!":
            return self._table(body, mark, style)
        if mark in "-." and delimiter != "--" and kind not in ("quote", "verse", "pass"):
            code = [line.rstrip() for line in body]
            language = style[1] if kind == "source" and len(style) > 1 else ""
            opening, closing = fence_for(code, language)
            return ["\n".join([opening, *code, closing])] if any(code) else []
        if mark == "+" or kind == "pass":
            text = html_to_text("\n".join(body))[1].strip()
            return [text] if text else []
        if self.depth >= MAX_NESTING:  # blocks nested this deep are a crafted file: their lines as they are
            return [text] if (text := "\n".join(line for line in body if line.strip())) else []
        inner = _Reader(self.attributes, self.depth + 1).read(body)
        if mark == "_" or kind in ("quote", "verse"):
            return ["\n".join(f"> {line}" for block in inner for line in block.split("\n"))]
        label = style[0] if style and style[0] in ADMONITION_NAMES else ""
        if label and inner:
            inner[0] = labelled(label.lower(), inner[0])
        return inner

    def _table(self, body: list[str], mark: str, style: list[str]) -> list[str]:
        """A row a line, its cells separated by ``|``: cells from ``|``-prefixed specs, or CSV (``,===``) and DSV
        (``:===``) lines."""
        if mark in ",:":
            reader = csv.reader((line for line in body if line.strip()), delimiter="," if mark == "," else ":")
            rows = [[self._inline(cell.strip()) for cell in row] for row in reader]
        else:
            separator = "!" if mark == "!" else "|"
            cells = [self._inline(" ".join(cell.split())) for cell in _cells("\n".join(body), separator)]
            lead = "\n".join(body).strip("\n").split("\n\n", 1)[0]  # the first row, or a header row and a blank line
            columns = _column_count(style) or max(1, len(list(_cells(lead, separator))))
            rows = [cells[at:at + columns] for at in range(0, len(cells), columns)]
        header = rows[0] if rows and _has_header(body, style, mark) else None
        return [line for row in rows if (line := row_line(row, header))]  # below a header, cells led by its names

    def _inline(self, text: str) -> str:
        return _inline(text, self.attributes)


def _section_title(section: re.Match[str]) -> str:
    """A section line's title, without the closing run of its marks (``== Setup ==``)."""
    title = section.group(2).rstrip()
    marks = section.group(1)
    if title.endswith(marks) and title[:-len(marks)].endswith((" ", "\t")):
        title = title[:-len(marks)].rstrip()
    return title


def _starts_block(line: str) -> bool:
    """Whether ``line`` opens a block of its own rather than continuing a paragraph."""
    stripped = line.strip()
    labeled = LABELED_ITEM.match(line)
    return bool(DELIMITER.match(line.rstrip()) or SECTION.match(line) or LIST_ITEM.match(line)
                or (labeled and "://" not in labeled.group(1)) or BLOCK_ATTRIBUTES.match(stripped)
                or line.startswith("//") or DIRECTIVE.match(stripped) or ATTRIBUTE_ENTRY.match(line) or stripped == "+")


def _cells(text: str, separator: str) -> Iterator[str]:
    """The cells of a table body: each opened by ``|`` and an optional spec (``2+|``, ``a|``, ``.^|``)."""
    parts = re.split(rf"(?:(?:^|(?<=\s)){CELL_SPEC})?(?<!\\){re.escape(separator)}", text, flags=re.MULTILINE)
    for part in parts[1:]:
        yield part.replace(f"\\{separator}", separator).strip()


def _attribute_list(text: str) -> list[str]:
    """A block attribute line's entries, split at commas outside double quotes: ``source,java``,
    ``cols="1,2",options="header"``."""
    return [entry.group(0).strip() for entry in re.finditer(r'(?:[^,"]|"[^"]*")+', text)] or [""]


def _has_header(body: list[str], style: list[str], mark: str) -> bool:
    """Whether a table's first row is its header: ``%header`` or ``options="header"``, or, unless ``noheader``, a
    ``|`` table whose first line holds that row and is followed by a blank line (AsciiDoc's implicit header)."""
    options = " ".join(style)
    if "noheader" in options:
        return False
    if re.search(r"%header|\b(?:options|opts)=\"?[^\"]*\bheader", options):
        return True
    lines = list(dropwhile(lambda line: not line.strip(), body))
    return mark not in ",:" and len(lines) > 1 and lines[0].lstrip().startswith(("|", "!")) and not lines[1].strip()


def _column_count(style: list[str]) -> int:
    """Columns from a ``cols="1,2,3"`` or ``cols="3*"`` block attribute; 0 when it has none."""
    spec = next((part.split("=", 1)[1].strip().strip('"') for part in style if part.startswith("cols=")), "")
    if not spec:
        return 0
    repeated = re.fullmatch(r"(\d+)\*.*", spec)
    return int(repeated.group(1)) if repeated else len(spec.split(","))


def _positional(attributes: str) -> str:
    """The first positional attribute of a macro's ``[...]`` (an image's alt text), its quotes taken off."""
    first = _attribute_list(attributes)[0]
    if len(first) > 1 and first[0] == first[-1] == '"':
        return first[1:-1].strip()
    return first if "=" not in first else ""


# every inner class below excludes its own delimiters, so that a match that fails stops at the next one: linear
MACRO_WITH_TEXT = re.compile(r"\b(?:link|mailto|xref):([^\s\[]*)\[([^\[\]]*)\]")
URL_WITH_TEXT = re.compile(r"\b((?:https?|ftp|irc)://[^\s\[]+)\[([^\[\]]*)\]")
CROSS_REFERENCE = re.compile(r"<<([^,<>]+)(?:,\s*([^<>]+))?>>")
INLINE_IMAGE = re.compile(r"\bimage:([^\s\[]+)\[([^\[\]]*)\]")
UI_MACRO = re.compile(r"\b(kbd|btn|menu):([^\s\[]*)\[([^\[\]]*)\]")
FOOTNOTE = re.compile(r"\bfootnote(?:ref)?:[\w-]*\[(?:[^\[\]]|\[[^\[\]]*\])*\]")
PASS_MACRO = re.compile(r"\bpass:[a-z,]*\[([^\[\]]*)\]")
INDEX_TERM = re.compile(r"\(\(\(([^()]+)\)\)\)|\(\(([^()]+)\)\)")
ROLE_SPAN = re.compile(r"\[[.#][\w.#-]*\]#([^#]+)#")
ATTRIBUTE_REFERENCE = re.compile(r"(?<!\\)\{([\w][\w-]*)\}")
MARKS = (re.compile(r"\*\*([^*]+)\*\*"), re.compile(r"__([^_]+)__"), re.compile(r"##([^#]+)##"),
         re.compile(r"(?<![\w*\\])\*([^*\s](?:[^*]*[^*\s])?)\*(?![\w*])"),
         re.compile(r"(?<![\w\\])_([^_\s](?:[^_]*[^_\s])?)_(?!\w)"),
         re.compile(r"(?<![\w#\\])#([^#\s](?:[^#]*[^#\s])?)#(?![\w#])"))


def _inline(text: str, attributes: dict[str, str]) -> str:
    """Inline markup reduced to what a reader sees; code spans kept as they are (a ``+...+`` passthrough inside
    one unwrapped)."""
    out: list[str] = []
    at = 0
    for start, end, inner in _code_spans(text):
        out.append(_prose(text[at:start], attributes))
        if len(inner) > 2 and inner[0] == "+" and inner[-1] == "+":
            inner = inner[1:-1]
        out.append(f"`{inner}`")
        at = end
    out.append(_prose(text[at:], attributes))
    return "".join(out).strip()


def _code_spans(text: str) -> Iterator[tuple[int, int, str]]:
    """(start, end, content) of each code span: a run of backticks up to the next run of the same length (one pass
    over the runs, so that a line of unmatched backticks costs no more than its length)."""
    runs = [(m.start(), m.end()) for m in re.finditer(r"`+", text)]
    later: dict[int, list[int]] = {}  # run length -> indices of the runs of that length, last first
    for index in range(len(runs) - 1, -1, -1):
        later.setdefault(runs[index][1] - runs[index][0], []).append(index)
    index = 0
    while index < len(runs):
        start, end = runs[index]
        same = later[end - start]
        while same and same[-1] <= index:
            same.pop()
        if not same:
            index += 1
            continue
        closing = same.pop()
        inner = text[end:runs[closing][0]]
        if inner.strip():
            yield start, runs[closing][1], inner
        index = closing + 1


def _prose(text: str, attributes: dict[str, str]) -> str:
    text = ATTRIBUTE_REFERENCE.sub(lambda m: attributes.get(m.group(1), m.group(0)), text)
    text = FOOTNOTE.sub("", text)
    text = PASS_MACRO.sub(r"\1", text)
    text = MACRO_WITH_TEXT.sub(lambda m: m.group(2) or m.group(1).split("#")[-1], text)
    text = URL_WITH_TEXT.sub(lambda m: m.group(2) or m.group(1), text)
    text = CROSS_REFERENCE.sub(lambda m: m.group(2) or m.group(1).replace("-", " ").replace("_", " "), text)
    text = INLINE_IMAGE.sub(lambda m: authored(_positional(m.group(2))) or "", text)
    text = UI_MACRO.sub(lambda m: " > ".join(filter(None, [m.group(2), *re.split(r"\s*>\s*", m.group(3))]))
                        if m.group(1) == "menu" else m.group(3), text)
    text = INDEX_TERM.sub(lambda m: m.group(2) or "", text)
    text = ROLE_SPAN.sub(r"\1", text)
    for mark in MARKS:
        text = mark.sub(r"\1", text)
    return re.sub(r"\\([*_#`{\[+])", r"\1", text)
