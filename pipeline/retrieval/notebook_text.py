"""The readable text of a Jupyter notebook (``.ipynb``, nbformat 4 or 3): its prose, its code and its text output.

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
    except RecursionError as exc:  # json recurses once per level of nesting
        raise DataError("not a Jupyter notebook: JSON nested too deeply to read") from exc
    cells = _cells(notebook)
    found = notebook.get("metadata")
    metadata: dict[str, Any] = found if isinstance(found, dict) else {}
    language = _language(metadata)
    title, blocks = str(metadata.get("title") or "").strip(), []
    for number, cell in enumerate(cells, start=1):
        if not isinstance(cell, dict):
            raise DataError(f"not a Jupyter notebook: cell {number} is {type(cell).__name__}, not an object")
        cell = _as_format_4(cell)
        source = _text(cell.get("source"))
        kind = cell.get("cell_type")
        if kind == "markdown":
            heading, text = markdown_to_text(source)
            title = title or heading
            blocks.append(text)
        elif kind == "code":
            if source.strip():
                code = source.strip("\n").split("\n")
                own = cell.get("language")  # nbformat 3 names it per cell
                opening, closing = fence_for(code, own if isinstance(own, str) else language)
                blocks.append("\n".join([opening, *code, closing]))
            blocks += [_output_block(text) for text in _text_outputs(cell.get("outputs"))]
        elif kind == "raw":
            blocks.append(source.strip())
    return title, "\n\n".join(b for b in blocks if b.strip())


def _cells(notebook: object) -> list[Any]:
    """The notebook's cells: nbformat 4 keeps them in ``cells``, nbformat 3 in ``worksheets[*].cells``."""
    if isinstance(notebook, dict) and isinstance(notebook.get("cells"), list):
        return notebook["cells"]
    if isinstance(notebook, dict) and notebook.get("nbformat") == 3 and isinstance(notebook.get("worksheets"), list):
        sheets = [sheet for sheet in notebook["worksheets"] if isinstance(sheet, dict)]
        return [cell for sheet in sheets for cell in _list(sheet.get("cells"))]
    version = notebook.get("nbformat") if isinstance(notebook, dict) else None
    hint = (f"nbformat {version}: convert it with `jupyter nbconvert --to notebook --nbformat 4`"
            if version not in (None, 3, 4) else "it has no list of cells")
    raise DataError(f"not a Jupyter notebook of format 3 or 4 ({hint})")


V3_RESULTS = {"pyout": "execute_result", "display_data": "display_data"}


def _as_format_4(cell: dict[str, Any]) -> dict[str, Any]:
    """An nbformat 3 cell in format 4's terms (heading cells as Markdown headings, ``input`` as the source,
    ``pyout`` results with their text under ``data``); a format 4 cell as it is."""
    kind = cell.get("cell_type")
    if kind == "heading":
        level = cell.get("level")
        depth = min(6, max(1, level)) if isinstance(level, int) else 1
        return {"cell_type": "markdown", "source": "#" * depth + " " + _text(cell.get("source"))}
    if kind == "code" and "input" in cell and "source" not in cell:
        outputs = []
        for output in _list(cell.get("outputs")):
            if isinstance(output, dict) and output.get("output_type") in V3_RESULTS:
                output = {"output_type": V3_RESULTS[output["output_type"]], "data": {"text/plain": output.get("text")}}
            outputs.append(output)
        return {"cell_type": "code", "source": cell.get("input"), "outputs": outputs, "language": cell.get("language")}
    return cell


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


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
    for output in _list(outputs):
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
