"""What Sphinx's directives and roles mean to a reader, for the two ways they are written.

reStructuredText writes ``.. note::`` and ``:func:`~os.path.join```; MyST Markdown (Sphinx and Jupyter Book
projects) writes the same directives as fences (```` ```{note} ````) and roles as ``{func}`os.path.join```. Both
readers (:mod:`pipeline.retrieval.rst_text`, :mod:`pipeline.retrieval.markdown_text`) keep one meaning for them:
code directives are code, navigation is left out, admonitions and version notes are labelled text, a
cross-reference reads as its title.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["ADMONITIONS", "CODE_DIRECTIVES", "NAVIGATION_DIRECTIVES", "labelled", "reading", "role_title"]

CODE_DIRECTIVES = frozenset({"code-block", "sourcecode", "code", "code-cell", "doctest", "testcode", "testoutput",
                             "testsetup", "ipython", "jupyter-execute", "prompt", "console"})
NAVIGATION_DIRECTIVES = frozenset({"toctree", "tableofcontents", "contents", "literalinclude", "include", "index",
                                   "highlight", "tabularcolumns", "currentmodule", "default-role", "default-domain",
                                   "sectionauthor", "moduleauthor", "codeauthor", "autosummary", "graphviz",
                                   "inheritance-diagram", "only"})
ADMONITIONS = {name: name.capitalize() for name in ("attention", "caution", "danger", "error", "hint", "important",
                                                   "info", "note", "tip", "warning")} | {
    "seealso": "See also", "versionadded": "New in version", "versionchanged": "Changed in version",
    "deprecated": "Deprecated since version"}
VERSION_NOTES = frozenset({"versionadded", "versionchanged", "deprecated"})
ROLE_TITLE = re.compile(r"^(.*?)\s*<([^<>]*)>$", re.DOTALL)  # "title <target>"
PROMPT = re.compile(r"^\s*(?:\$|>>>|\.\.\.|PS>|C:\\>|In \[\d*\]:)\s")  # shell, Python, PowerShell, IPython


def reading(name: str, argument: str, content: Sequence[str]) -> tuple[str, str, str]:
    """How a directive is read, the same in rst and MyST: (its name without a domain, ``"skip"`` | ``"code"`` |
    ``"text"``, the code's language). Navigation is skipped; a code directive, or any directive whose content is
    a console session (its first line at a prompt: ``$ pip install ...``, ``>>> x``; pip's ``{pip-cli}``), is
    code, in the language a code directive names; anything else is text."""
    kind = name.lower().rsplit(":", 1)[-1]
    if kind in NAVIGATION_DIRECTIVES:
        return kind, "skip", ""
    first = next((line for line in content if line.strip()), "")
    if kind in CODE_DIRECTIVES or PROMPT.match(first):
        return kind, "code", argument.split()[0] if argument and kind in CODE_DIRECTIVES else ""
    return kind, "text", ""


def labelled(name: str, text: str) -> str:
    """An admonition's first block as a reader sees it: "Note: ...", "Changed in version 3.6: Accepts ..." (a
    version note's first line is its version); text of other directives as it is."""
    if name not in ADMONITIONS:
        return text
    if name in VERSION_NOTES:
        version, _, rest = text.partition("\n")
        rest = rest.lstrip("\n")
        return f"{ADMONITIONS[name]} {version}:" + (f" {rest}" if rest else "")
    return f"{ADMONITIONS[name]}: {text}"


def role_title(text: str) -> str:
    """What a cross-reference shows: its title, or its target without Sphinx's ``~`` / ``!`` marks (``~a.b.c``
    shows ``c``)."""
    titled = ROLE_TITLE.match(text)
    if titled and titled.group(1):
        return titled.group(1)
    target = (titled.group(2) if titled else text).lstrip("!")
    return target[1:].rsplit(".", 1)[-1] if target.startswith("~") else target
