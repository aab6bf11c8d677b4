"""The readable text of a web archive (``.mht``, ``.mhtml``: a page saved whole by a browser or by Word as "Web Page,
Single File", and what Confluence's "Export to Word" writes under a ``.doc`` name), read with the standard library.

A web archive is a MIME message (RFC 2557) whose root part is the page and whose other parts are its pictures and
style sheets. The page is read as any HTML page is (:mod:`pipeline.retrieval.html_text`), in the charset its part
declares; the rest is not text. The page's ``<title>`` names the document, else the archive's Subject.
"""

from __future__ import annotations

import email
import email.policy
from pathlib import Path

from models.errors import DataError
from pipeline.retrieval.email_text import one_line, part_text
from pipeline.retrieval.html_text import html_to_text

__all__ = ["mhtml_to_text"]


def mhtml_to_text(path: Path) -> tuple[str, str]:
    """(title, text) of the web archive in ``path``: its page's title (else its Subject) and text."""
    archive = email.message_from_bytes(path.read_bytes(), policy=email.policy.default)
    page = archive.get_body(preferencelist=("html",))
    if page is None:  # a root part that is not labelled HTML but is one (some writers omit the type)
        page = next((part for part in archive.walk() if part.get_content_type() == "text/html"), None)
    if page is None:
        raise DataError(f"{path}: a web archive without an HTML page in it (no text/html part)")
    title, text = html_to_text(part_text(page))
    return title or one_line(str(archive.get("Subject") or "")), text
