"""What the readers of OLE compound files (Word ``.doc``, PowerPoint ``.ppt``, Outlook ``.msg``) share: opening one
with every error named by the file, and the document's Title property.

An OLE compound file ([MS-CFB]) is a small file system of storages and streams; olefile reads it. A damaged file
makes olefile, ``struct`` and a reader's own indexing raise errors of many types, and a reader must not leak them:
:func:`ole_file` turns each into a :class:`~models.errors.DataError` that names the file.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from models.deps import require
from models.errors import DataError, MissingDependencyError
from pipeline.retrieval.code_pages import windows_codec

__all__ = ["ole_file", "summary_title"]

SUMMARY, CODE_PAGE, TITLE = "\x05SummaryInformation", 1, 2  # the property set and its property ids (PIDSI)
VT_I2, VT_LPSTR, VT_LPWSTR = 2, 30, 31  # property types
MAX_PROPERTIES = 256


@contextmanager
def ole_file(path: Path, *, extra: str, stream: str, kind: str, not_ole: str, without: str) -> Iterator[Any]:
    """The OLE compound file at ``path`` opened with olefile (from the ``extra`` extra); it must hold ``stream``.

    ``kind`` names the file type in the error for a damaged file ("not a readable .doc file (...)"); ``not_ole``
    says what the file should have been and ``without`` what it lacks ("an OLE compound file without <without>").
    An error raised while the file is read (olefile's, struct's, IndexError...) becomes a DataError naming the
    file; a DataError that does not name it yet is prefixed with it.
    """
    olefile = require("olefile", extra)
    if not olefile.isOleFile(str(path)):
        raise DataError(f"{path}: {not_ole}")
    try:
        with olefile.OleFileIO(str(path)) as ole:
            if not ole.exists(stream):
                raise DataError(f"{path}: an OLE compound file without {without}")
            yield ole
    except MissingDependencyError:
        raise
    except DataError as exc:
        if str(exc).startswith(f"{path}:"):
            raise
        raise DataError(f"{path}: {exc}") from exc  # found inside the streams: named by the file
    except Exception as exc:  # olefile and struct raise their own errors for damaged files
        raise DataError(f"{path}: not a readable {kind} file ({type(exc).__name__}: {exc})") from exc


def summary_title(ole: Any) -> str:
    """The file's Title property ('' without one), read from the SummaryInformation property set ([MS-OLEPS]) here
    rather than with olefile's get_metadata, which parses every property and can take minutes over the vector
    counts of a damaged file."""
    if not ole.exists(SUMMARY):
        return ""
    data = ole.openstream(SUMMARY).read(1 << 20)
    if len(data) < 48:
        return ""
    section = struct.unpack_from("<I", data, 44)[0]  # the first section's offset, after its format id
    count = struct.unpack_from("<I", data, section + 4)[0]
    found = dict(struct.unpack_from("<II", data, section + 8 + 8 * index)
                 for index in range(min(count, MAX_PROPERTIES)))
    code_page = 1252
    if CODE_PAGE in found and struct.unpack_from("<I", data, section + found[CODE_PAGE])[0] == VT_I2:
        code_page = struct.unpack_from("<H", data, section + found[CODE_PAGE] + 4)[0]
    if TITLE not in found:
        return ""
    at = section + found[TITLE]
    kind, size = struct.unpack_from("<II", data, at)
    if kind == VT_LPWSTR:
        title = data[at + 8: at + 8 + 2 * size].decode("utf-16-le", errors="replace")
    elif kind == VT_LPSTR:
        title = data[at + 8: at + 8 + size].decode(windows_codec(code_page), errors="replace")
    else:
        return ""
    return " ".join(title.replace("\x00", " ").split())
