"""The readable text of a Markdown file: what a reader sees, not its markup.

Documentation sites keep YAML front matter (``title:``, ``sidebar_position:``) above the text, link every
other phrase (``[reset link](https://example.com/account/reset?from=faq)``) and wrap words in emphasis
marks. Read raw, the front matter becomes a chunk of its own and every URL spends the grader's tokens and
ends up in quoted answers. So the front matter is left out (its ``title`` names the document), and the rest
is parsed as CommonMark (with GitHub's tables and strikethrough) by ``markdown-it-py`` and written back as
plain text: links and images keep their words, escapes and entities are resolved (``\\*`` is ``*``,
``&amp;`` is ``&``), reference definitions, HTML comments, tags and emphasis marks go; headings (setext
underlines included) are written as ``#`` headings, which give a chunk its context; lists keep their
markers, tables their rows, block quotes their ``>``; code (fenced or indented, and inline spans) is
content and stays verbatim, an indented block fenced like the others. Blocks keep the line spacing they had in the file.
MyST Markdown (Sphinx and Jupyter Book sources) is read as its reStructuredText twin is: a directive fence
(```` ```{note} ````) is labelled text, code in its language, or left out (navigation), without its options; a
role (``{func}`~os.path.join```) reads as what it shows; a ``(label)=`` target line is not text. A colon fence
(MyST's ``:::{note}``, Docusaurus' ``:::tip[Title]``, VitePress' ``::: warning Title``; more colons for an outer
one) reads as the directive fence of the same name does: "Note: ...", "Tip: Title ...".
"""

from __future__ import annotations

import re
from contextvars import ContextVar
from dataclasses import dataclass
from functools import cache
from typing import Any

from models.deps import require
from pipeline.retrieval.html_text import html_to_text
from pipeline.retrieval.sphinx_names import labelled, reading, role_title
from pipeline.retrieval.strips import FENCE, closes_fence, fence_for
from pipeline.retrieval.table_text import names_columns, row_line

__all__ = ["markdown_to_text", "mdx_to_text"]

FRONT_MATTER = re.compile(r"\A(?:\ufeff)?---[ \t]*\n(.*?\n)?(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.DOTALL)
FRONT_TITLE = re.compile(r"^title:[ \t]*(.+?)[ \t]*$", re.MULTILINE)
HEADING = re.compile(r"^#\s+(.+?)\s*#*\s*$", re.MULTILINE)
MYST_DIRECTIVE = re.compile(r"^\{([\w][\w:.+-]*)\}\s*(.*)$")  # ```{note} or ```{code-block} python
MYST_OPTION = re.compile(r"^\s*:[\w-]+:")  # ":linenos:", ":caption: Example"
MYST_TARGET = re.compile(r"^\([\w.:-]+\)=$")
MYST_ROLE = re.compile(r"\{[\w][\w:+-]*\}$")  # {func} right before a code span
# ":::{note}", ":::tip[Title]", "::: warning Title": a container's name, then its title (argument) if any
COLON_FENCE = re.compile(r"^( {0,3})(:{3,})[ \t]*(?:\{([\w][\w:.+-]*)\}|([^\W\d_][\w-]*))(.*)$")  # title stripped
COLON_CLOSE = re.compile(r"^ {0,3}(:{3,})[ \t]*$")
MODULE_LINES = 200  # an ES block whose brackets stay open longer than this ends at its first blank line
JS_STRING = re.compile(r"""'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|`(?:[^`\\]|\\.)*`""")  # brackets in quotes
MDX_MODULE = re.compile(r"^(?:import|export)\s")  # an ES module statement opens a line: MDX's imports and exports
MAX_NESTING = 16  # directives inside directives read deeper than this are taken as their plain content
_nesting: ContextVar[int] = ContextVar("markdown_directive_nesting", default=0)
SILENT_INLINE = frozenset({"link_open", "link_close", "em_open", "em_close", "strong_open", "strong_close",
                           "s_open", "s_close", "html_inline"})  # markup only: what they wrap is still text


@cache
def _parser() -> Any:
    markdown_it = require("markdown_it", "rag")
    return markdown_it.MarkdownIt("commonmark").enable(["table", "strikethrough"])


def markdown_to_text(raw: str) -> tuple[str, str]:
    """(title, text): the front matter's ``title`` or else the first ``# heading`` ('' when neither), and the
    text with its markup reduced to what a reader sees. Code is kept verbatim."""
    title = ""
    front = FRONT_MATTER.match(raw)
    if front:
        found = FRONT_TITLE.search(front.group(1) or "")
        title = found.group(1).strip().strip("'\"").strip() if found else ""
        raw = raw[front.end():]
    text = _Writer().write(_parser().parse(_colon_fences_as_directives(raw))).strip()
    if not title:
        heading = HEADING.search(text)
        title = heading.group(1).strip() if heading else ""
    return title, text


@dataclass
class _Container:
    """A list item or block quote the next lines are inside: its marker opens its first line; the lines after
    are indented to match (a quote repeats its ``>``)."""

    marker: str
    repeat: bool
    opened: bool = False

    def prefix(self) -> str:
        if self.repeat or not self.opened:
            return self.marker
        return " " * len(self.marker)


class _Writer:
    """Plain text from markdown-it's block tokens, one leaf block (heading, paragraph, code, table row...) at a
    time, each prefixed by the list items and quotes it sits in."""

    def __init__(self) -> None:
        self.out: list[str] = []
        self.containers: list[_Container] = []
        self.last_line: int | None = None  # where the previous block ended in the source
        self.in_table = False  # a row of this table was written
        self.in_head = False  # in its header, whose row names the columns
        self.header: list[str] | None = None  # those names, which lead the cells of the rows below (row_line)

    def write(self, tokens: list[Any]) -> str:
        i = 0
        while i < len(tokens):
            token = tokens[i]
            kind = token.type
            if kind == "list_item_open":
                ordered = token.markup in (".", ")")
                self.containers.append(_Container(f"{token.info}{token.markup} " if ordered else f"{token.markup} ",
                                                  repeat=False))
            elif kind == "blockquote_open":
                self.containers.append(_Container("> ", repeat=True))
            elif kind in ("list_item_close", "blockquote_close"):
                self.containers.pop()
            elif kind == "heading_open":
                level = int(token.tag[1:])
                self._block(token.map, ["#" * level + " " + _inline(tokens[i + 1])])
                i += 2
            elif kind == "paragraph_open":
                text = _inline(tokens[i + 1])
                if not MYST_TARGET.match(text):  # "(editable-installs)=": a label for links, not text
                    self._block(token.map, text.split("\n"))
                i += 2
            elif kind == "fence" and (directive := MYST_DIRECTIVE.match(token.info.strip())):
                lines = _myst_directive(directive.group(1), directive.group(2).strip(), token.content)
                if lines:
                    self._block(token.map, lines)
            elif kind in ("fence", "code_block"):  # indented code fenced like the rest, so that it reads as code
                code = token.content.rstrip("\n").split("\n")
                opening, closing = fence_for(code, token.info if kind == "fence" else "")
                self._block(token.map, [opening, *code, closing])
            elif kind == "html_block":
                readable = html_to_text(_without_comments(token.content))[1].strip()
                if readable:
                    self._block(token.map, readable.split("\n"))
            elif kind == "tr_open":
                cells = []
                while tokens[i].type != "tr_close":
                    if tokens[i].type == "inline":
                        cells.append(_inline(tokens[i]))
                    i += 1
                where = token.map
                if self.in_table and where and self.last_line is not None:  # the delimiter row is no gap
                    where = [self.last_line, where[1]]
                if self.in_head:
                    self.header = cells
                labelled = not self.in_head and self.header is not None and names_columns(self.header)
                self._block(where, [row_line(cells, self.header) if labelled else
                                    "|" + "|".join(f" {cell} " if cell else " " for cell in cells) + "|"])
                self.in_table = True
            elif kind in ("thead_open", "thead_close"):
                self.in_head = kind == "thead_open"
            elif kind == "table_close":
                self.in_table, self.header = False, None
            i += 1
        return "".join(self.out)

    def _block(self, where: list[int] | None, lines: list[str]) -> None:
        start, end = where if where else (self.last_line or 0, self.last_line or 0)
        if self.out:
            self.out.append("\n\n" if self.last_line is not None and start > self.last_line else "\n")
        written = []
        for line in lines:
            written.append("".join(c.prefix() for c in self.containers) + line)
            for container in self.containers:
                container.opened = True
        self.out.append("\n".join(written))
        self.last_line = end


def _myst_directive(name: str, argument: str, content: str) -> list[str]:
    """The lines a MyST directive fence (```` ```{note} ````) reads as: code directives fenced as code in their
    language, navigation left out, any other directive its argument and its content read as Markdown, an
    admonition labelled (:mod:`pipeline.retrieval.sphinx_names`). Options (``:key: value`` lines, or a ``---``
    block of YAML) are not content."""
    body = content.rstrip("\n").split("\n")
    stripped = [line.strip() for line in body]
    if stripped[0] == "---" and "---" in stripped[1:]:
        body = body[stripped.index("---", 1) + 1:]
    while body and MYST_OPTION.match(body[0]):
        body = body[1:]
    kind, how, language = reading(name, argument, body)
    if how == "skip":
        return []
    if how == "code":
        opening, closing = fence_for(body, language)
        return [opening, *body, closing] if any(line.strip() for line in body) else []
    depth = _nesting.get()
    if depth >= MAX_NESTING:  # directives nested this deep are a crafted file, not documentation
        content = "\n".join(body).strip()
    else:
        token = _nesting.set(depth + 1)
        try:
            content = markdown_to_text("\n".join(body))[1]
        finally:
            _nesting.reset(token)
    text = "\n\n".join(part for part in (argument, content) if part)
    return labelled(kind, text).split("\n") if text else []


def _code_lines(lines: list[str]) -> list[bool]:
    """Which lines belong to a fenced code block (its fence lines included); an unclosed fence runs to the end."""
    mask = [False] * len(lines)
    i = 0
    while i < len(lines):
        code = FENCE.match(lines[i])
        if code:
            end = next((j for j in range(i + 1, len(lines)) if closes_fence(lines[j], code.group(1))), len(lines) - 1)
            mask[i:end + 1] = [True] * (end + 1 - i)
            i = end
        i += 1
    return mask


def _colon_fences_as_directives(raw: str) -> str:
    """``raw`` with each outermost colon fence written as a MyST directive fence of backticks (``:::tip[Title]``
    ... ``:::`` as ```` ```{tip} Title ```` ... ```` ``` ````), which :func:`_myst_directive` reads; fences inside
    it are left for that reading of its content. Code blocks are passed over; an unclosed colon fence runs to the
    end, as a code fence does."""
    lines = raw.split("\n")
    code = _code_lines(lines)
    out: list[str] = []
    i = 0
    while i < len(lines):
        opening = None if code[i] else COLON_FENCE.match(lines[i])
        if not opening:
            out.append(lines[i])
            i += 1
            continue
        indent, colons, name = opening.group(1), len(opening.group(2)), opening.group(3) or opening.group(4)
        argument = opening.group(5).strip()
        if argument.startswith("[") and argument.endswith("]"):  # Docusaurus: :::tip[Title]
            argument = argument[1:-1].strip()
        depth, end = 0, len(lines)
        for j in range(i + 1, len(lines)):
            if code[j]:
                continue
            if COLON_FENCE.match(lines[j]):
                depth += 1
            elif (closing := COLON_CLOSE.match(lines[j])):
                if depth == 0 and len(closing.group(1)) >= colons:
                    end = j
                    break
                depth = max(0, depth - 1)
        body = lines[i + 1:end]
        start_fence, end_fence = fence_for(body, f"{{{name}}}" + (f" {argument}" if argument else ""))
        out += [indent + start_fence, *body, indent + end_fence]
        i = end + 1
    return "\n".join(out)


def mdx_to_text(raw: str) -> tuple[str, str]:
    """:func:`markdown_to_text` of an MDX file (Docusaurus, Nextra and other React documentation sites) without
    what is code rather than text: its ES module blocks (``import Tabs from '@theme/Tabs';``, ``export const
    ...``: a block of lines opened by ``import`` or ``export`` at the start of a line, up to a blank line outside
    its brackets) and its ``{/* comments */}``. JSX components are read as HTML is: their words stay, their tags go."""
    front = FRONT_MATTER.match(raw)
    head, rest = (raw[:front.end()], raw[front.end():]) if front else ("", raw)
    lines = rest.split("\n")
    code = _code_lines(lines)
    brackets = [_bracket_balance(line) for line in lines]
    kept: list[str] = []
    at = 0
    while at < len(lines):
        if not code[at] and MDX_MODULE.match(lines[at]):
            at = _module_end(lines, brackets, at)
            continue
        kept.append(lines[at])
        at += 1
    return markdown_to_text(head + _without_comments("\n".join(kept), "{/*", "*/}"))


def _module_end(lines: list[str], brackets: list[int], start: int) -> int:
    """Where the ES block opened at ``lines[start]`` ends: at the first blank line where its brackets are closed,
    as MDX parses it (``export const meta = {`` may hold blank lines), or, when they do not close within
    :data:`MODULE_LINES` lines or before the page ends, at its first blank line. ``brackets``: each line's
    :func:`_bracket_balance`."""
    depth, first_blank = 0, None
    for at in range(start, len(lines)):
        if not lines[at].strip():
            if depth <= 0:
                return at
            first_blank = at if first_blank is None else first_blank
        depth += brackets[at]
        if first_blank is not None and at - start >= MODULE_LINES:
            return first_blank
    return len(lines) if first_blank is None else first_blank


def _bracket_balance(line: str) -> int:
    """Brackets a line of JavaScript opens less those it closes, not counting those in strings and comments."""
    code = JS_STRING.sub("", line).split("//", 1)[0]
    return sum(code.count(c) for c in "([{") - sum(code.count(c) for c in ")]}")


def _inline(token: Any) -> str:
    """An inline token's text: words of links and images kept, emphasis and tags dropped, code spans verbatim
    (a MyST role's span, ``{func}`~os.path.join```, as what it shows: `join`)."""
    parts: list[str] = []
    children = token.children or []
    for at, child in enumerate(children):
        if child.type in ("softbreak", "hardbreak"):
            parts.append("\n")
        elif child.type == "code_inline":
            role = MYST_ROLE.search(parts[-1]) if parts and children[at - 1].type == "text" else None
            if role:
                parts[-1] = parts[-1][:role.start()]
            shown = role_title(child.content) if role else child.content
            parts.append(child.markup + shown + child.markup)
        elif child.type == "image":
            parts.append(_inline(child) if child.children else child.content)
        elif child.type not in SILENT_INLINE:
            parts.append(child.content)
    return "".join(parts)


def _without_comments(text: str, opening: str = "<!--", closing: str = "-->") -> str:
    """Comments (``<!-- ... -->``, or MDX's ``{/* ... */}``) removed in one pass; an unclosed one hides nothing
    (kept as text)."""
    out, at = [], 0
    while (start := text.find(opening, at)) >= 0 and (end := text.find(closing, start + len(opening))) >= 0:
        out.append(text[at:start])
        at = end + len(closing)
    return "".join(out) + text[at:]
