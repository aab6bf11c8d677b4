"""``crag index add``: files, folders and archives (zip, tar) of documents (every type ``read_document`` reads) into an
index.

Re-adding a folder is idempotent: unchanged chunks are counted as such and not re-embedded, a changed
file's chunks are replaced (nothing stale is left behind), and a file that cannot be read either stops
the run (default, nothing written) or, with ``skip_errors``, is reported and skipped.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from models.errors import ConfigError, DataError, MissingDependencyError
from models.progress import progress, stage
from pipeline.retrieval.archives import ARCHIVES, DocumentText, archive_documents, archive_type, passed_over
from pipeline.retrieval.documents import (
    AUTHORITY_RANGE,
    STATUSES,
    SUPPORTED,
    StoredChunk,
    check_access_fields,
    check_encoding,
    check_roles,
    chunk_id_for,
    chunk_text,
)

__all__ = ["AUTHORITY_RANGE", "READABLE", "STATUSES", "ChunkFields", "IngestReport", "WritableIndex", "collect_files",
           "ingest", "ingest_documents"]

logger = logging.getLogger(__name__)


READABLE = (*SUPPORTED, *ARCHIVES)  # what a walk indexes: documents, and archives of them
SAY_WRITE_FROM = 500  # chunks: below this a write takes a few seconds at most and is not announced


def _walked(path: Path, folder: Path) -> bool:
    """Whether a folder walk indexes ``path``: not hidden (``.git``, ``.venv``, ``.DS_Store``), not inside
    ``archives.NOT_DOCUMENTS`` (``__MACOSX`` too). Files named on the command line are always indexed."""
    return not passed_over(path.relative_to(folder).parts)


def _readable(path: Path) -> bool:
    """Whether ``path`` is a document or an archive of them, by its name (``x.tar.gz`` too)."""
    return path.suffix.lower() in SUPPORTED or archive_type(path) is not None


def collect_files(paths: str | Path | Iterable[str | Path], unsupported: Counter[str] | None = None) -> list[Path]:
    """Supported files under the given files and folders, sorted; an unsupported named file is an error. Files
    of other types that a folder walk passes over are counted by extension in ``unsupported``."""
    found: list[Path] = []
    if isinstance(paths, (str, Path)):  # one path, not its characters: "/tmp/docs" walked "/", the whole disk
        paths = [paths]
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files = [p for p in path.rglob("*") if p.is_file()]
            walked = [p for p in files if _walked(p, path)]
            kept = sorted(p for p in walked if _readable(p))
            hidden = sum(_readable(p) for p in files) - len(kept)
            if hidden:
                logger.info("%s: left out %d files in hidden or tool folders", path, hidden)
            if unsupported is not None:
                unsupported.update(p.suffix.lower() or "(no extension)" for p in walked if not _readable(p))
            found += kept
        elif path.is_file():
            if not _readable(path):
                raise DataError(f"{path}: unsupported file type {path.suffix!r}; supported: {list(READABLE)}")
            found.append(path)
        elif re.match(r"[a-z][a-z0-9+.-]*://", str(raw), re.IGNORECASE):
            raise DataError(f"{raw}: a URL; indexing reads files and folders, never the network: save the page "
                            f"first (e.g. curl -o page.html '{raw}') and index the file")
        else:
            raise DataError(f"{path}: no such file or folder")
    if not found:
        raise DataError(f"no {list(READABLE)} files found in {[str(p) for p in paths]}")
    return found


class WritableIndex(Protocol):
    """Anything chunks can be added to: the local index or the Qdrant retriever."""

    def add(self, chunks: Iterable[StoredChunk]) -> int: ...


@dataclass
class IngestReport:
    """What ``ingest`` did, file by file and chunk by chunk."""

    files: int = 0
    chunks_added: int = 0
    chunks_updated: int = 0
    chunks_unchanged: int = 0
    chunks_removed: int = 0
    skipped: list[dict[str, str]] = field(default_factory=list)
    # files of types that cannot be read, passed over in folders, by extension: {".key": 3}
    unsupported_files: dict[str, int] = field(default_factory=dict)

    @property
    def chunks_written(self) -> int:
        return self.chunks_added + self.chunks_updated

    def to_dict(self) -> dict[str, Any]:
        return {"files": self.files, "chunks_added": self.chunks_added, "chunks_updated": self.chunks_updated,
                "chunks_unchanged": self.chunks_unchanged, "chunks_removed": self.chunks_removed,
                "skipped": self.skipped, "unsupported_files": self.unsupported_files}


def _documents(files: list[Path], encoding: str | None, unsupported: Counter[str]) -> Iterator[DocumentText]:
    """Each file read, an archive's members one by one (the types they pass over counted in ``unsupported``)."""
    for path in files:
        path = path.resolve()
        if archive_type(path) is not None:
            try:
                yield from archive_documents(path, encoding=encoding, unsupported=unsupported)
            except DataError as exc:  # the archive itself is damaged: its error, reported or stopped on like a file's
                yield DocumentText(str(path), path.name, path.suffix.lower(), error=exc)
        else:
            yield DocumentText.read(path, encoding=encoding)


@dataclass(frozen=True, kw_only=True)
class ChunkFields:
    """What every chunk of one ingest carries besides its text: owner, access and freshness."""

    tenant: str
    roles: frozenset[str] = frozenset()
    status: str = "active"
    effective_date: str = ""
    authority: int = 0
    max_chars: int = 900

    def __post_init__(self) -> None:
        roles = check_access_fields(tenant=self.tenant, roles=self.roles, status=self.status,
                                    effective_date=self.effective_date, authority=self.authority)
        object.__setattr__(self, "roles", roles)


def ingest(index: WritableIndex, paths: str | Path | Iterable[str | Path], *, tenant: str, roles: Iterable[str] = (),
           status: str = "active", effective_date: str = "", authority: int = 0, max_chars: int = 900,
           skip_errors: bool = False, encoding: str | None = None) -> IngestReport:
    """Chunk the documents and write them in one transaction; see the module docstring for re-adds.
    ``paths``: files, folders or archives (one path alone too). ``encoding``: the charset of text files that are
    not UTF-8 (an HTML page's own declaration comes first)."""
    if not callable(getattr(index, "add", None)):
        raise ConfigError(f"index must be a LocalHybridIndex or QdrantRetriever (anything with add()), got "
                          f"{type(index).__name__}")
    check_encoding(encoding)
    fields = ChunkFields(tenant=tenant, roles=check_roles(roles), status=status, effective_date=effective_date,
                         authority=authority, max_chars=max_chars)
    unsupported: Counter[str] = Counter()
    files = collect_files(paths, unsupported)
    archives = any(archive_type(path) is not None for path in files)  # then more documents than files
    documents = progress(_documents(files, encoding, unsupported), desc="reading documents",
                         total=None if archives else len(files), unit="file")
    return ingest_documents(index, documents, fields, skip_errors=skip_errors, unsupported=unsupported)


def ingest_documents(index: WritableIndex, documents: Iterable[DocumentText], fields: ChunkFields, *,
                     skip_errors: bool = False, unsupported: Counter[str] | None = None,
                     max_chunks: int | None = None, stop_hint: str | None = "--skip-errors") -> IngestReport:
    """Chunk documents already read and write them in one transaction (nothing is written when one of them
    stops the run, or when they make more than ``max_chunks`` chunks: reading stops there); ``unsupported``: the
    types passed over while reading them, for the report; ``stop_hint``: how the caller asks to skip errors (None:
    there is nothing else to index, so no hint)."""
    report = IngestReport()
    chunks: list[StoredChunk] = []
    for document in documents:
        exc = document.error
        if exc is not None:  # a .docx without the docx extra is one file's problem
            if isinstance(exc, MissingDependencyError) and exc.extra == "rag":
                raise exc  # the index's own extra (Markdown, PDF): no file can be skipped around it, nothing is written
            if not skip_errors:
                if stop_hint is None:
                    raise exc
                raise type(exc)(f"{exc} (pass {stop_hint} to index the other files and report this one)") from exc
            report.skipped.append({"path": document.path, "reason": str(exc)})
            continue
        pieces = chunk_text(document.text, max_chars=fields.max_chars)
        if not pieces:
            report.skipped.append({"path": document.path, "reason": "no text"})
            continue
        report.files += 1
        if max_chunks is not None and len(chunks) + len(pieces) > max_chunks:
            raise DataError(f"{document.path}: more than {max_chunks} chunks in all (the limit of one write); "
                            "send fewer or smaller documents at a time")
        for position, piece in enumerate(pieces):
            chunks.append(StoredChunk(chunk_id=chunk_id_for(document.path, position, piece, tenant=fields.tenant),
                                      text=piece, tenant=fields.tenant, source=document.name, title=document.title,
                                      position=position, allowed_roles=fields.roles, status=fields.status,
                                      effective_date=fields.effective_date, authority=fields.authority,
                                      metadata={"path": document.path, "format": document.suffix.lstrip(".")}))
    unsupported = unsupported or Counter()
    report.unsupported_files = dict(sorted(unsupported.items()))  # with what archives held
    if unsupported:
        logger.info("passed over %d files of types that cannot be indexed (%s); supported: %s",
                    sum(unsupported.values()), ", ".join(sorted(unsupported)), ", ".join(READABLE))
    write = getattr(index, "write", None)
    announce = len(chunks) >= SAY_WRITE_FROM
    with stage(f"indexing {len(chunks)} chunks (new and changed ones are embedded)") if announce else \
            contextlib.nullcontext():
        if write is not None:  # the local index: unchanged chunks kept, a re-indexed document's stale chunks removed
            written = write(chunks, replace_documents=True)
            report.chunks_added, report.chunks_updated = written.added, written.updated
            report.chunks_unchanged, report.chunks_removed = written.unchanged, written.removed
        else:
            report.chunks_added = index.add(chunks)
    return report
