"""Which reader an office file needs, told by what it holds rather than by its name.

Office files are misnamed all the time, mostly by programs: Confluence's "Export to Word" writes a web archive
(MHTML) named ``.doc``; report tools and web apps write an HTML table, an XML Spreadsheet 2003 file or
comma-separated text named ``.xls`` so that Excel opens it; older systems save Rich Text as ``.doc``; a user renames
``report.docx`` to ``report.doc``; a download or mail system renames a workbook to ``.doc`` or an OpenDocument file
to ``.docx``. Office opens all of these, so their users never notice. A reader chosen by the name would call each a
damaged file; the file is read as what its first bytes say instead (an OLE compound file, a zip package, Rich Text, a
web archive, an HTML page, delimited text). An OLE compound file or a zip package is then opened to see which
family it belongs to (a Word, Excel or PowerPoint stream; a package's ``word/``, ``xl/`` or ``ppt/`` parts or an
OpenDocument ``mimetype``), and the name decides only between formats of that family (``.dot`` stays a template).
"""

from __future__ import annotations

import re
import zipfile
from pathlib import Path

from models.deps import require
from models.errors import MissingDependencyError
from pipeline.retrieval.office_variants import FAMILY
from pipeline.retrieval.spreadsheetml_text import is_spreadsheetml
from pipeline.retrieval.zipped_xml import ZIP_ERRORS

__all__ = ["content_suffix"]

OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
ZIP_MAGIC = b"PK\x03\x04"
SNIFFED = frozenset(FAMILY)  # Word, Excel and PowerPoint names, their variants too (.docm, .xlt, .ppsx...)
OLE_SUFFIX = {".docx": ".doc", ".xlsx": ".xls", ".pptx": ".ppt"}  # an OLE file named as its family's package
ZIP_SUFFIX = {".doc": ".docx", ".xls": ".xlsx", ".ppt": ".pptx"}  # a package named as its family's binary format
OLE_STREAMS = (("WordDocument", ".doc"), ("Workbook", ".xls"), ("Book", ".xls"), ("PowerPoint Document", ".ppt"))
PACKAGE_FOLDERS = (("word/", ".docx"), ("xl/", ".xlsx"), ("ppt/", ".pptx"))  # an Office package's main parts
ODF_TYPES = {"application/vnd.oasis.opendocument.text": ".odt",
             "application/vnd.oasis.opendocument.spreadsheet": ".ods",
             "application/vnd.oasis.opendocument.presentation": ".odp"}
SPREADSHEETS = frozenset(name for name, family in FAMILY.items() if family in (".xls", ".xlsx"))
HEAD_BYTES = 4096
MIME_HEADER = re.compile(rb"^(?:[!-9;-~]+:[^\n]*\n(?:[ \t][^\n]*\n)*)+", re.ASCII)  # "Name: value" lines, folded too
HTML_START = re.compile(rb"^(?:<\?xml[^>]*>\s*)?(?:<!--.*?-->\s*)*<(?:!doctype\s+html|html|head|body|table|meta)\b",
                        re.IGNORECASE | re.DOTALL)
TEXT_BYTES = frozenset(range(32, 256)) | {9, 10, 13}


def content_suffix(path: Path, suffix: str) -> str:
    """The suffix whose reader reads ``path`` (named with ``suffix``): ``suffix`` itself unless the file is an
    office file (``SNIFFED``) whose first bytes say it is something else."""
    if suffix not in SNIFFED:
        return suffix
    try:
        with path.open("rb") as handle:
            head = handle.read(HEAD_BYTES)
    except OSError:  # the reader chosen by the name says what is wrong with the file
        return suffix
    if head.startswith(OLE_MAGIC):
        return _in_family(suffix, _ole_family(path), OLE_SUFFIX)
    if head.startswith(ZIP_MAGIC):
        return _in_family(suffix, _package_family(path), ZIP_SUFFIX)
    text = head.removeprefix(b"\xef\xbb\xbf").lstrip()
    if text.startswith(b"{\\rtf"):
        return ".rtf"
    lines = text.replace(b"\r\n", b"\n")
    if (header := MIME_HEADER.match(lines)) is not None and re.search(rb"(?im)^mime-version:", header.group()):
        return ".mht"  # a web archive, as Word's "Web Page" and Confluence's Word export write it
    if suffix in SPREADSHEETS and is_spreadsheetml(head):
        return ".xls"  # an XML Spreadsheet 2003 file, which the .xls reader reads
    if HTML_START.match(text):
        return ".html"
    if suffix in SPREADSHEETS and text and set(head) <= TEXT_BYTES and b"\n" in text:
        return ".csv"  # delimited text named as a workbook (its separator is detected when read)
    return suffix


def _in_family(suffix: str, found: str | None, same_family: dict[str, str]) -> str:
    """``suffix`` when the file belongs to its family (a template keeps its name), else the family ``found``; when
    the family could not be told, the container's format within the name's family (``same_family``)."""
    if found is None:
        return same_family.get(FAMILY[suffix], suffix)
    return suffix if FAMILY[suffix] == found else found


def _ole_family(path: Path) -> str | None:
    """``.doc``, ``.xls`` or ``.ppt``, by the main stream the OLE compound file holds; None when olefile is not
    installed (the reader then names its extra), the file is damaged (the reader says so) or holds none of them."""
    try:
        olefile = require("olefile", "docx")
    except MissingDependencyError:
        return None
    try:
        with olefile.OleFileIO(str(path)) as ole:
            return next((family for stream, family in OLE_STREAMS if ole.exists(stream)), None)
    except Exception:  # olefile raises its own and struct's errors for a damaged file
        return None


def _package_family(path: Path) -> str | None:
    """``.docx``, ``.xlsx``, ``.pptx``, ``.odt``, ``.ods`` or ``.odp``, by the parts of the zip package; None when it
    is none of them or not a readable zip (the reader chosen by the name says what is wrong)."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
            if "mimetype" in names:
                mimetype = archive.open("mimetype").read(200).decode("ascii", errors="replace").strip()
                return ODF_TYPES.get(mimetype)
    except ZIP_ERRORS:
        return None
    return next((family for folder, family in PACKAGE_FOLDERS if any(n.startswith(folder) for n in names)), None)
