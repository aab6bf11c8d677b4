"""The readable text of an EPUB e-book (``.epub``: manuals, handbooks, reports), read with the standard library.

An EPUB is a zip of XHTML chapters and a package file (OPF) that names the book and the chapters' reading order
(its spine). The book's title names the document; each chapter is read as an HTML page is
(:mod:`pipeline.retrieval.html_text`: navigation, scripts and footnote asides left out) and its headings are moved
one level down, so that a chapter's title is a section (``## Chapter 3``) that the sentences under it are quoted
with; a chapter without a heading of its own is led by its ``<title>``. The book's table of contents (the EPUB 3
navigation document, the EPUB 2 NCX) is navigation and is not read. A book whose chapters are encrypted (DRM) is an
error naming the file; fonts obfuscated by the publisher (also listed as encrypted) do not matter. Parts are read
through :mod:`pipeline.retrieval.zipped_xml` (a damaged book is an error naming it).
"""

from __future__ import annotations

import posixpath
import re
import zipfile
from pathlib import Path
from urllib.parse import unquote

from models.errors import DataError
from pipeline.retrieval.html_text import html_to_text
from pipeline.retrieval.strips import MARKDOWN_HEADING, headings_down
from pipeline.retrieval.zipped_xml import opened_zip, part_bytes, part_xml

__all__ = ["epub_to_text"]

CONTAINER = "META-INF/container.xml"
ENCRYPTION = "META-INF/encryption.xml"
CHAPTER_TYPES = frozenset({"application/xhtml+xml", "text/html"})
DAMAGED = "the EPUB is damaged"
XML_ENCODING = re.compile(rb"""^<\?xml[^>]*encoding=["']([\w.:-]+)["']""")


def epub_to_text(path: Path) -> tuple[str, str]:
    """(the book's title, its chapters' text in reading order)."""
    with opened_zip(path, "not a readable EPUB; an .epub file is a zip of XHTML chapters") as book:
        return _read(path, book)


def _read(path: Path, book: zipfile.ZipFile) -> tuple[str, str]:
    rootfile = part_xml(path, book, CONTAINER, DAMAGED).find(".//{*}rootfile")
    package_path = rootfile.get("full-path", "") if rootfile is not None else ""
    if not package_path:
        raise DataError(f"{path}: {CONTAINER} names no package file (rootfile); the EPUB is damaged")
    package = part_xml(path, book, package_path, DAMAGED)
    base = posixpath.dirname(package_path)
    encrypted = _encrypted(path, book)
    manifest = {item.get("id"): item for item in package.iterfind(".//{*}manifest/{*}item")}
    title = re.sub(r"\s+", " ", package.findtext(".//{*}metadata/{http://purl.org/dc/elements/1.1/}title") or "")
    chapters: list[str] = []
    for itemref in package.iterfind(".//{*}spine/{*}itemref"):
        item = manifest.get(itemref.get("idref"))
        if item is None or item.get("media-type") not in CHAPTER_TYPES or "nav" in str(item.get("properties")).split():
            continue
        member = posixpath.normpath(posixpath.join(base, unquote(item.get("href", ""))))
        if member in encrypted:
            raise DataError(f"{path}: the book's chapters are encrypted (DRM); only a DRM-free EPUB can be read")
        chapter = _chapter(path, book, member, title.strip())
        if chapter:
            chapters.append(chapter)
    return title.strip(), "\n\n".join(chapters)


def _chapter(path: Path, book: zipfile.ZipFile, member: str, book_title: str) -> str:
    """One chapter's text, its headings one level down; led by its ``<title>`` when it opens with no heading and
    that title is not the book's."""
    markup = part_bytes(path, book, member, DAMAGED)
    declared = XML_ENCODING.match(markup)
    try:
        page = markup.decode(declared.group(1).decode("ascii") if declared else "utf-8")
    except (LookupError, UnicodeDecodeError):
        page = markup.decode("utf-8", errors="replace")
    title, text = html_to_text(page)
    text = headings_down(text, 1)
    if text and title and title != book_title and not MARKDOWN_HEADING.match(text):
        text = f"## {title}\n\n{text}"
    return text


def _encrypted(path: Path, book: zipfile.ZipFile) -> set[str]:
    """The members listed as encrypted (DRM, or a publisher's font obfuscation)."""
    if ENCRYPTION not in book.namelist():
        return set()
    return {posixpath.normpath(unquote(reference.get("URI", "")))
            for reference in part_xml(path, book, ENCRYPTION, DAMAGED).iterfind(".//{*}CipherReference")}
