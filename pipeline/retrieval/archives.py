"""Documents inside a zip archive (``.zip``: a Notion or Confluence export, a Google Takeout, a folder sent as one
file), each read as a file of its own.

Every member of a supported type is read by :func:`pipeline.retrieval.documents.read_document` (from a private
temporary copy: some readers need a file) and named ``<archive>/<member path>``, so that its chunks cite the page
they came from and re-adding the archive replaces that page's chunks. Folders, hidden members (``.DS_Store``,
``__MACOSX/``, tools' folders) and members of other types, zips inside the zip included, are passed over and
counted by extension, as a folder walk counts them. A member that unpacks past the size cap (a zip bomb) or cannot
be read is that member's error, which the caller reports or stops on; a damaged archive is an error naming it.
"""

from __future__ import annotations

import re
import tempfile
import zipfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from models.errors import DataError, MissingDependencyError
from pipeline.retrieval.documents import SUPPORTED, read_document
from pipeline.retrieval.zipped_xml import opened_zip, part_bytes

__all__ = ["ARCHIVES", "NOT_DOCUMENTS", "DocumentText", "archive_documents", "passed_over"]

ARCHIVES = (".zip",)
# folders whose files are no one's documents: tools' and packages' own (a venv holds thousands of READMEs) and
# macOS's resource forks in zips; folder walks and archives pass over them, and over hidden ones (".git")
NOT_DOCUMENTS = frozenset({"__MACOSX", "node_modules", "__pycache__", "site-packages", "venv"})
UNSAFE_NAME = re.compile(r"[\\/\x00]")


def passed_over(parts: tuple[str, ...]) -> bool:
    """Whether a path of these parts (below the folder walked, or inside an archive) is left out: hidden, or in
    one of NOT_DOCUMENTS."""
    return any(part.startswith(".") or part in NOT_DOCUMENTS for part in parts)


@dataclass(frozen=True)
class DocumentText:
    """A document read from a file or an archive member: its name in the index (the file's path, or
    ``<archive>/<member>``), its file name and type, and its title and text, or the error that stopped it."""

    path: str
    name: str
    suffix: str
    title: str = ""
    text: str = ""
    error: DataError | MissingDependencyError | None = None

    @classmethod
    def read(cls, path: Path, *, named: str | None = None, encoding: str | None = None) -> DocumentText:
        """``path`` read (``named``: what to call it, and what its errors call it, instead of its path)."""
        named = named or str(path)
        suffix = path.suffix.lower()
        try:
            title, text = read_document(path, encoding=encoding)
        except MissingDependencyError as exc:
            return cls(named, path.name, suffix, error=exc)
        except DataError as exc:
            if named != str(path):  # the message names the copy that was read: name the member instead
                exc = DataError(str(exc).replace(str(path), named))
            return cls(named, path.name, suffix, error=exc)
        return cls(named, path.name, suffix, title=title, text=text)


def archive_documents(path: Path, *, encoding: str | None = None,
                      unsupported: Counter[str] | None = None) -> Iterator[DocumentText]:
    """The documents of the zip at ``path``, in the archive's order; members of other types are counted in
    ``unsupported`` by extension."""
    with tempfile.TemporaryDirectory(prefix="crag-zip-") as tmp, \
            opened_zip(path, "not a readable zip archive") as archive:
        for number, info in enumerate(archive.infolist()):
            member = PurePosixPath(info.filename.replace("\\", "/").lstrip("/"))
            if info.is_dir() or passed_over(member.parts):
                continue
            suffix = member.suffix.lower()
            if suffix not in SUPPORTED:
                if unsupported is not None:
                    unsupported[suffix or "(no extension)"] += 1
                continue
            yield _read_member(path, archive, info, member, Path(tmp) / str(number), encoding)


def _read_member(path: Path, archive: zipfile.ZipFile, info: zipfile.ZipInfo, member: PurePosixPath, folder: Path,
                 encoding: str | None) -> DocumentText:
    """One member copied to ``folder`` under its own file name (past the size cap: an error) and read there."""
    named = f"{path}/{member}"
    try:
        data = part_bytes(path, archive, info.filename, "the archive is damaged")
    except DataError as exc:
        return DocumentText(named, member.name, member.suffix.lower(), error=exc)
    folder.mkdir()
    copy = folder / UNSAFE_NAME.sub("_", member.name)[-200:]
    copy.write_bytes(data)
    return DocumentText.read(copy, named=named, encoding=encoding)
