"""The readable text of a Jupyter notebook (``.ipynb``, nbformat 4): its prose, its code and its text output.

A notebook file is JSON: read raw, its metadata, cell ids and base64-encoded images would fill the chunks. So
the cells are read in order: Markdown cells as Markdown files are read (:mod:`pipeline.retrieval.markdown_text`:
headings give the chunks their context), code cells fenced with the notebook's language, raw cells as text. What
a code cell printed or returned as text is kept after it (a question is often about a result), at most
``OUTPUT_LINES`` lines of each, with a line saying how many were left out; images, HTML renderings and error
tracebacks are not text a reader would quote, and are left out.
"""

from __future__ import annotations

import json
from typing import Any

from models.errors import DataError
from pipeline.retrieval.markdown_text import markdown_to_text
from pipeline.retrieval.strips import fence_for

__all__ = ["OUTPUT_LINES", "notebook_to_text"]

OUTPUT_LINES = 20


def notebook_to_text(raw: str) -> tuple[str, str]:
    """(title, text): the notebook's ``metadata.title`` or its first Markdown heading, and its cells as text."""
    try:
        notebook = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise DataError(f"not a Jupyter notebook: invalid JSON ({exc})") from exc
    if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
        version = notebook.get("nbformat") if isinstance(notebook, dict) else None
        hint = (f"nbformat {version}: convert it with `jupyter nbconvert --to notebook --nbformat 4`"
                if version not in (None, 4) else "it has no list of cells")
        raise DataError(f"not a Jupyter notebook of format 4 ({hint})")
    found = notebook.get("metadata")
    metadata: dict[str, Any] = found if isinstance(found, dict) else {}
    language = _language(metadata)
    title, blocks = str(metadata.get("title") or "").strip(), []
    for number, cell in enumerate(notebook["cells"], start=1):
        if not isinstance(cell, dict):
            raise DataError(f"not a Jupyter notebook: cell {number} is {type(cell).__name__}, not an object")
        source = _text(cell.get("source"))
        kind = cell.get("cell_type")
        if kind == "markdown":
            heading, text = markdown_to_text(source)
            title = title or heading
            blocks.append(text)
        elif kind == "code":
            if source.strip():
                opening, closing = fence_for(source.rstrip("\n").split("\n"), language)
                blocks.append(f"{opening}\n{source.strip(chr(10))}\n{closing}")
            blocks += [_output_block(text) for text in _text_outputs(cell.get("outputs"))]
        elif kind == "raw":
            blocks.append(source.strip())
    return title, "\n\n".join(b for b in blocks if b.strip())


def _language(metadata: dict[str, Any]) -> str:
    """The code cells' language, as a fence's info string ('' when the notebook does not say)."""
    for key, field in (("language_info", "name"), ("kernelspec", "language")):
        entry = metadata.get(key)
        if isinstance(entry, dict) and isinstance(entry.get(field), str) and entry[field].strip():
            return str(entry[field]).strip().split()[0]
    return ""


def _text(value: object) -> str:
    """A cell's source or an output's text: nbformat stores either one string or a list of lines."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(part for part in value if isinstance(part, str))
    return ""


def _text_outputs(outputs: object) -> list[str]:
    """What a code cell printed (stdout, stderr) or returned as plain text, each non-empty one."""
    texts = []
    for output in outputs if isinstance(outputs, list) else []:
        if not isinstance(output, dict):
            continue
        kind = output.get("output_type")
        if kind == "stream":
            text = _text(output.get("text"))
        elif kind in ("execute_result", "display_data") and isinstance(output.get("data"), dict):
            text = _text(output["data"].get("text/plain"))
        else:  # errors: tracebacks full of terminal colour codes
            continue
        if text.strip():
            texts.append(text.strip("\n"))
    return texts


def _output_block(text: str) -> str:
    """One output fenced as text, cut to ``OUTPUT_LINES`` lines with a line saying how many more there were."""
    lines = text.split("\n")
    shown = lines[:OUTPUT_LINES]
    opening, closing = fence_for(shown, "text")
    more = f"\n({len(lines) - OUTPUT_LINES} more lines of output)" if len(lines) > OUTPUT_LINES else ""
    return "\n".join([opening, *shown, closing]) + more
