"""Reading the XML parts of zip-packaged documents (EPUB, OpenDocument) safely: every failure a DataError naming
the file.

A damaged zip (a bad deflate stream, a password, a compression zipfile cannot read), a missing part, a part that
unpacks past a size cap (a zip bomb, not a document), XML that is not well formed or elements nested deeper than
any document is (readers walk the tree recursively) is the file's problem, said with its name, never an exception
from zipfile, expat or the interpreter's stack. XML is parsed by :mod:`xml.etree.ElementTree`, which
resolves no external entity and, with the expat that Python ships, refuses entity expansion bombs.
"""

from __future__ import annotations

import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from xml.etree import ElementTree

from models.errors import DataError

__all__ = ["MAX_DEPTH", "MAX_PART_BYTES", "ZIP_ERRORS", "check_part_size", "opened_zip", "part_bytes", "part_xml",
           "xml_file", "xml_root"]

MAX_PART_BYTES = 64 * 2**20  # one part unpacked (a chapter, content.xml): more is a zip bomb, not a document
MAX_DEPTH = 200  # elements nested deeper than this are a crafted file (documents nest a few dozen deep at most)
ZIP_ERRORS = (zipfile.BadZipFile, OSError, EOFError, zlib.error, RuntimeError, NotImplementedError)


@contextmanager
def opened_zip(path: Path, unreadable: str) -> Iterator[zipfile.ZipFile]:
    """The zip at ``path``; a zip-level failure while it is open is a DataError: "<path>: <unreadable> (<why>)"."""
    try:
        with zipfile.ZipFile(path) as archive:
            yield archive
    except ZIP_ERRORS as exc:  # a damaged deflate stream, a password-protected zip, an unknown compression
        raise DataError(f"{path}: {unreadable} ({exc})") from exc


def part_bytes(path: Path, archive: zipfile.ZipFile, member: str, damaged: str = "the file is damaged") -> bytes:
    """The unpacked bytes of ``member``; missing or past :data:`MAX_PART_BYTES` is a DataError."""
    try:
        info = archive.getinfo(member)
    except KeyError as exc:
        raise DataError(f"{path}: {member} is missing; {damaged}") from exc
    check_part_size(path, member, info.file_size)
    return archive.read(info)


def check_part_size(path: Path, member: str, size: int) -> None:
    """A DataError when a part or member of the file at ``path`` unpacks past :data:`MAX_PART_BYTES` (a bomb)."""
    if size > MAX_PART_BYTES:
        raise DataError(f"{path}: {member} unpacks to {size:,} bytes, more than {MAX_PART_BYTES:,}; not read")


def part_xml(path: Path, archive: zipfile.ZipFile, member: str, damaged: str = "the file is damaged"
             ) -> ElementTree.Element:
    """The parsed XML of ``member``; not well formed (or in an encoding Python does not know), or nested deeper than
    :data:`MAX_DEPTH`, is a DataError."""
    return xml_root(part_bytes(path, archive, member, damaged), f"{path}: {member}", damaged)


def xml_file(path: Path, root: str, kind: str, damaged: str = "the file is damaged") -> ElementTree.Element:
    """The XML document in the file at ``path``, whose root element must be ``root`` (``kind`` names that kind of
    file in the errors: "a flat OpenDocument file"); larger than :data:`MAX_PART_BYTES`, not well formed, nested too
    deep or rooted elsewhere is a DataError."""
    if path.stat().st_size > MAX_PART_BYTES:
        raise DataError(f"{path}: {kind} larger than {MAX_PART_BYTES // 2**20} MB; not read")
    found = xml_root(path.read_bytes(), str(path), damaged)
    if found.tag != root:
        raise DataError(f"{path}: XML, but not {kind} (its root is {found.tag!r})")
    return found


def xml_root(data: bytes, what: str, damaged: str = "the file is damaged") -> ElementTree.Element:
    """``data`` parsed as XML (``what``: the file or part, for errors); not well formed (or in an encoding Python does
    not know), or nested deeper than :data:`MAX_DEPTH`, is a DataError."""
    try:
        root = ElementTree.fromstring(data)
    except (ElementTree.ParseError, LookupError) as exc:
        raise DataError(f"{what} is not well-formed XML ({exc}); {damaged}") from exc
    if _deeper_than(root, MAX_DEPTH):
        raise DataError(f"{what} nests elements more than {MAX_DEPTH} deep; not read")
    return root


def _deeper_than(root: ElementTree.Element, limit: int) -> bool:
    """Whether any element lies more than ``limit`` levels below ``root`` (walked without recursion)."""
    stack = [(root, 0)]
    while stack:
        element, depth = stack.pop()
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in element)
    return False
