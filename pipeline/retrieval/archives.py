"""Documents inside an archive, each read as a file of its own: a zip (``.zip``: a Notion or Confluence export, a
Google Takeout, a folder sent as one file) or a tar archive (``.tar``, ``.tar.gz`` / ``.tgz``, ``.tar.bz2`` /
``.tbz2``, ``.tar.xz`` / ``.txz``: a project's source or documentation release, a GitHub tarball).

Every member of a supported type is read by :func:`pipeline.retrieval.documents.read_document` (from a private
temporary copy: some readers need a file) and named ``<archive>/<member path>``, so that its chunks cite the page
they came from and re-adding the archive replaces that page's chunks. Folders, hidden members (``.DS_Store``,
``__MACOSX/``, tools' folders) and members of other types, zips inside the zip included, are passed over and
counted by extension, as a folder walk counts them; so are a tar archive's links and special files. A member that
unpacks past the size cap (a zip bomb) or cannot be read is that member's error, which the caller reports or stops
on; a damaged archive, or a tar archive that unpacks past :data:`MAX_TAR_BYTES` in all, is an error naming it.
"""

from __future__ import annotations

import lzma
import re
import tarfile
import tempfile
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path, PurePosixPath

from models.errors import DataError, MissingDependencyError
from pipeline.retrieval.documents import SUPPORTED, read_document_as
from pipeline.retrieval.file_kinds import content_suffix
from pipeline.retrieval.zipped_xml import check_part_size, opened_zip, part_bytes

__all__ = ["ARCHIVES", "NOT_DOCUMENTS", "DocumentText", "archive_documents", "archive_type", "passed_over",
           "private_copy"]

TARS = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz")
ARCHIVES = (".zip", *TARS)
MAX_TAR_BYTES = 4 * 2**30  # a tar archive unpacked in all (every member read or passed over): more is a bomb
TAR_ERRORS = (tarfile.TarError, OSError, EOFError, zlib.error, lzma.LZMAError)  # damaged, by layer
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
            suffix = content_suffix(path, suffix)  # an HTML table named .xls is not a table's records
            title, text = read_document_as(path, suffix, encoding=encoding)
        except MissingDependencyError as exc:
            return cls(named, path.name, suffix, error=exc)
        except DataError as exc:
            if named != str(path):  # the message names the copy that was read: name the member instead
                exc = DataError(str(exc).replace(str(path), named))
            return cls(named, path.name, suffix, error=exc)
        return cls(named, path.name, suffix, title=title, text=text)

    @classmethod
    def from_bytes(cls, content: bytes, file_name: str, *, named: str, encoding: str | None = None) -> DocumentText:
        """``content`` read as a file called ``file_name`` (its type from the name), from a private temporary copy
        (some readers need a file); named, and its errors naming it, ``named``."""
        with tempfile.TemporaryDirectory(prefix="crag-document-") as tmp:
            return cls.read(private_copy(Path(tmp), file_name, content), named=named, encoding=encoding)


def private_copy(folder: Path, file_name: str, content: bytes) -> Path:
    """``content`` written into ``folder`` as ``file_name`` made one safe file name (separators and NULs replaced,
    the last 200 characters kept, so the type's suffix stays): a reader's own copy of bytes that came from elsewhere."""
    copy = folder / UNSAFE_NAME.sub("_", file_name)[-200:]
    copy.write_bytes(content)
    return copy


def archive_type(path: Path) -> str | None:
    """The archive type ``path``'s name ends with (one of :data:`ARCHIVES`: ``.tar.gz`` for ``x.tar.gz``), or None."""
    name = path.name.lower()
    return next((kind for kind in ARCHIVES if name.endswith(kind)), None)  # none of them ends another


def archive_documents(path: Path, *, encoding: str | None = None, unsupported: Counter[str] | None = None,
                      named: str | None = None) -> Iterator[DocumentText]:
    """The documents of the archive at ``path``, in the archive's order, each named ``<archive>/<member>`` (the
    archive called ``named`` instead of its path when given); members of other types are counted in
    ``unsupported`` by extension."""
    members = _tar_members(path) if archive_type(path) in TARS else _zip_members(path)
    for member, data in members:
        if passed_over(member.parts):
            continue
        suffix = member.suffix.lower()
        if suffix not in SUPPORTED:
            if unsupported is not None:
                unsupported[suffix or "(no extension)"] += 1
            continue
        member_name = f"{named or path}/{member}"
        try:
            content = data()
        except DataError as exc:
            yield DocumentText(member_name, member.name, suffix, error=exc)
            continue
        yield DocumentText.from_bytes(content, member.name, named=member_name, encoding=encoding)


def _zip_members(path: Path) -> Iterator[tuple[PurePosixPath, Callable[[], bytes]]]:
    """(member path, its bytes when asked) of each file in a zip, in the archive's order."""
    with opened_zip(path, "not a readable zip archive") as archive:
        for info in archive.infolist():
            if not info.is_dir():
                yield (PurePosixPath(info.filename.replace("\\", "/").lstrip("/")),
                       partial(part_bytes, path, archive, info.filename, "the archive is damaged"))


def _tar_members(path: Path) -> Iterator[tuple[PurePosixPath, Callable[[], bytes]]]:
    """(member path, its bytes when asked) of each regular file in a tar archive (compressed or not), read in one
    pass; a member past the part size cap (zipped_xml.check_part_size) is its own error, an archive past
    MAX_TAR_BYTES or damaged the archive's."""
    try:
        archive = tarfile.open(path, "r:*")  # noqa: SIM115 (entered below: its own error if it cannot open)
    except TAR_ERRORS as exc:
        raise DataError(f"{path}: not a readable tar archive ({exc})") from exc
    with archive:
        while True:
            try:
                info = archive.next()
            except TAR_ERRORS as exc:
                raise DataError(f"{path}: the archive is damaged ({exc})") from exc
            if info is None:
                if _ends_inside_a_header(archive):  # tarfile reads a cut header as the archive's end
                    raise DataError(f"{path}: the archive is cut short inside a member's header (an interrupted "
                                    "download or copy?); the members before it were read")
                return
            if info.offset_data + info.size > MAX_TAR_BYTES:
                raise DataError(f"{path}: unpacks past {MAX_TAR_BYTES:,} bytes in all; not read further (a crafted "
                                "or damaged archive): unpack it and add its folder")
            if info.isfile():
                yield PurePosixPath(info.name.lstrip("/")), partial(_tar_bytes, path, archive, info)


def _ends_inside_a_header(archive: tarfile.TarFile) -> bool:
    """Whether what follows the last member is a partial header block rather than the end-of-archive blocks or the
    end of the file."""
    try:
        archive.fileobj.seek(archive.offset)
        rest = archive.fileobj.read(tarfile.BLOCKSIZE)
    except TAR_ERRORS:
        return True
    return 0 < len(rest) < tarfile.BLOCKSIZE


def _tar_bytes(path: Path, archive: tarfile.TarFile, info: tarfile.TarInfo) -> bytes:
    check_part_size(path, info.name, info.size)
    try:
        stream = archive.extractfile(info)
        return stream.read() if stream is not None else b""
    except TAR_ERRORS as exc:
        raise DataError(f"{path}: the archive is damaged at {info.name} ({exc})") from exc
