"""The one rule for a delimited file's separator, shared by every reader of pair files (training and grading)."""

from __future__ import annotations

__all__ = ["delimiter_of"]


def delimiter_of(header_line: str, fmt: str) -> str:
    """Tab for TSV; for CSV a comma, or a semicolon when the header line has semicolons and no comma (the CSV that
    spreadsheets write in locales whose decimal mark is a comma). Only the header decides, never the texts."""
    if fmt == "tsv":
        return "\t"
    return ";" if ";" in header_line and "," not in header_line else ","
