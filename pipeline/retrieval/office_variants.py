"""The other names of Word, Excel and PowerPoint files: macro-enabled documents, templates and slide shows.

``.docm``, ``.xlsm`` and ``.pptm`` files (documents with macros), templates (``.dotx``, ``.xltx``, ``.potx`` and
their macro-enabled ``m`` twins) and slide shows (``.ppsx``, ``.ppsm``) are the same packages as ``.docx``,
``.xlsx`` and ``.pptx`` files with another content type on their main part; ``.dot``, ``.xlt``, ``.pot`` and
``.pps`` are the same binary formats as ``.doc``, ``.xls`` and ``.ppt``. Each is read by its family's reader.
python-docx and python-pptx refuse a package whose main part is not typed as their plain document, so such a package
is handed to them as an in-memory copy whose ``[Content_Types].xml`` types it so (the parts themselves are the same;
a macro is never run, nor read).
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

from models.errors import DataError
from pipeline.retrieval.zipped_xml import MAX_PART_BYTES, ZIP_ERRORS, check_part_size

__all__ = ["FAMILY", "plain_package"]

# every name of a Word, Excel or PowerPoint file -> the name of its family's reader (package or binary)
FAMILY = {
    ".docx": ".docx", ".docm": ".docx", ".dotx": ".docx", ".dotm": ".docx", ".doc": ".doc", ".dot": ".doc",
    ".xlsx": ".xlsx", ".xlsm": ".xlsx", ".xltx": ".xlsx", ".xltm": ".xlsx", ".xls": ".xls", ".xlt": ".xls",
    ".pptx": ".pptx", ".pptm": ".pptx", ".ppsx": ".pptx", ".ppsm": ".pptx", ".potx": ".pptx", ".potm": ".pptx",
    ".ppt": ".ppt", ".pps": ".ppt", ".pot": ".ppt",
}
WORD = "application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"
SLIDES = "application/vnd.openxmlformats-officedocument.presentationml.presentation.main+xml"
PLAIN_TYPE = {  # a variant's main part content type -> the plain document's
    "application/vnd.ms-word.document.macroEnabled.main+xml": WORD,
    "application/vnd.openxmlformats-officedocument.wordprocessingml.template.main+xml": WORD,
    "application/vnd.ms-word.template.macroEnabledTemplate.main+xml": WORD,
    "application/vnd.ms-powerpoint.presentation.macroEnabled.main+xml": SLIDES,
    "application/vnd.openxmlformats-officedocument.presentationml.slideshow.main+xml": SLIDES,
    "application/vnd.ms-powerpoint.slideshow.macroEnabled.main+xml": SLIDES,
    "application/vnd.openxmlformats-officedocument.presentationml.template.main+xml": SLIDES,
    "application/vnd.ms-powerpoint.template.macroEnabled.main+xml": SLIDES,
}
CONTENT_TYPES = "[Content_Types].xml"
MAX_COPY_BYTES = 4 * MAX_PART_BYTES  # a variant copied into memory unpacks to at most this much


def plain_package(path: Path) -> str | io.BytesIO:
    """What to open ``path`` as with python-docx or python-pptx: its path, or for a macro-enabled, template or
    slide-show package an in-memory copy typed as the plain document. A file that is not a readable zip is left to
    the library, which says what is wrong with it."""
    try:
        with zipfile.ZipFile(path) as archive:
            infos = archive.infolist()
            types = next((archive.read(info) for info in infos if info.filename == CONTENT_TYPES
                          and info.file_size <= MAX_PART_BYTES), b"")
            variant = next((name for name in PLAIN_TYPE if name.encode() in types), None)
            if variant is None:
                return str(path)
            if sum(info.file_size for info in infos) > MAX_COPY_BYTES:
                raise DataError(f"{path}: unpacks to more than {MAX_COPY_BYTES:,} bytes; not read")
            copy = io.BytesIO()
            with zipfile.ZipFile(copy, "w", zipfile.ZIP_STORED) as plain:
                for info in infos:
                    check_part_size(path, info.filename, info.file_size)
                    data = archive.read(info)
                    if info.filename == CONTENT_TYPES:
                        data = data.replace(variant.encode(), PLAIN_TYPE[variant].encode())
                    plain.writestr(info.filename, data)
    except ZIP_ERRORS:
        return str(path)
    copy.seek(0)
    return copy
