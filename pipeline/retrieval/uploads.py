"""Documents sent as bytes (the service's ``PUT /v1/documents/{name}``): read like files, named by the sender.

An upload is written to a private temporary file (some readers need one) and read by the same readers as
``crag index add``; its chunks are indexed under the name the sender chose, so that a second upload of the same
name replaces the first (stale chunks removed) and ``DELETE`` finds it. An archive (zip, tar) is indexed member by
member as ``<name>/<member>``, and uploading it again also removes the members the new copy no longer holds.
Nothing is written when the upload cannot be read (or, with ``skip_errors``, when none of it can), or when it
makes more chunks than the caller allows.
"""

from __future__ import annotations

import re
import tempfile
import unicodedata
from collections import Counter
from collections.abc import Collection, Iterable, Iterator
from pathlib import Path, PurePosixPath
from typing import Any, Protocol, runtime_checkable

from models.errors import DataError
from pipeline.retrieval.archives import DocumentText, archive_documents, archive_type, private_copy
from pipeline.retrieval.documents import StoredChunk, check_encoding
from pipeline.retrieval.index import WriteReport
from pipeline.retrieval.ingest import READABLE, ChunkFields, IngestReport, WritableIndex, ingest_documents

__all__ = ["MAX_NAME_CHARS", "NAME_PATTERN", "DocumentStore", "check_document_name", "ingest_upload", "is_archive_name"]

MAX_NAME_CHARS = 512
CONTROL = r"\x00-\x1f\x7f-\x9f"  # Unicode's control characters (category Cc), as a character class's range


def _any_case(extension: str) -> str:
    return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else re.escape(c) for c in extension)


# check_document_name's rules as one regular expression (ECMA-262 too), for the HTTP API's schema
NAME_PATTERN = (rf"^(?!/)(?!.*//)(?!(?:.*/)?\.\.?(?:/|$))(?!\s)(?!.*\s$)[^\\{CONTROL}]*[^/\\{CONTROL}]"
                rf"(?:{'|'.join(_any_case(extension) for extension in READABLE)})$")


def check_document_name(name: str) -> str:
    """``name`` when it can name an uploaded document: a path-like name such as ``policies/refunds.md`` whose last
    part ends in a type crag reads; otherwise a DataError naming what is wrong and the fix."""
    if not name or name != name.strip() or len(name) > MAX_NAME_CHARS:
        raise DataError(f"document name {name[:80]!r} must be 1-{MAX_NAME_CHARS} characters without leading or "
                        "trailing spaces, e.g. 'policies/refunds.md'")
    if any(unicodedata.category(c) in ("Cc", "Cs") for c in name):
        raise DataError(f"document name {name[:80]!r} holds control characters; use printable ones")
    if "\\" in name:  # a Windows path: its folders would not be folders here, and 'a\\b.md' would differ from 'a/b.md'
        raise DataError(f"document name {name[:80]!r} holds a backslash; separate folders with '/', e.g. "
                        "'policies/refunds.md'")
    if name.startswith("/") or any(part in ("", ".", "..") for part in name.split("/")):
        raise DataError(f"document name {name[:80]!r} must be a relative path without empty, '.' or '..' parts, "
                        "e.g. 'policies/refunds.md'")
    last = name.rsplit("/", 1)[-1].lower()
    if not any(last.endswith(extension) and len(last) > len(extension) for extension in READABLE):
        raise DataError(f"document name {name[:80]!r} does not end in a type crag reads "
                        f"({PurePosixPath(last).suffix or 'none'}); the name's extension says how to read the bytes: "
                        f"one of {', '.join(READABLE)}")
    return name


@runtime_checkable
class DocumentStore(WritableIndex, Protocol):
    """An index whose documents can be replaced, listed and deleted by name: the local index and Qdrant."""

    def write(self, chunks: Iterable[StoredChunk], *, replace_documents: bool = False) -> WriteReport: ...

    def remove_document(self, tenant: str, name: str, *, with_members: bool = False,
                        keep: Collection[str] = ()) -> int: ...

    def documents(self, tenant: str, *, after: str = "", limit: int = 1000) -> list[dict[str, Any]]: ...


def is_archive_name(name: str) -> bool:
    """Whether the document name is an archive's (its members are then the documents ``<name>/<member>``)."""
    return archive_type(Path(PurePosixPath(name).name)) is not None


def ingest_upload(index: DocumentStore, name: str, content: bytes, fields: ChunkFields, *,
                  encoding: str | None = None, skip_errors: bool = False,
                  max_chunks: int | None = None) -> IngestReport:
    """Read ``content`` as the document ``name`` (an archive: its members) and index it for ``fields.tenant``,
    replacing what an earlier upload of that name left; see the module docstring."""
    check_document_name(name)
    check_encoding(encoding)
    if not content:
        raise DataError(f"{name}: the upload is empty; send the document's bytes as the request body")
    archive = is_archive_name(name)
    unsupported: Counter[str] = Counter()
    read: list[str] = []
    with tempfile.TemporaryDirectory(prefix="crag-upload-") as tmp:
        documents = _named(_read(Path(tmp), name, content, archive, encoding, unsupported), read)
        report = ingest_documents(index, documents, fields, skip_errors=skip_errors, unsupported=unsupported,
                                  max_chunks=max_chunks, stop_hint="skip_errors=true" if archive else None)
    if not report.files:
        reasons = "; ".join(f"{s['path']}: {s['reason']}" for s in report.skipped[:5])
        raise DataError(f"{name}: nothing in it could be indexed ({reasons or 'no documents of a readable type'})")
    if archive:  # the members this copy no longer holds
        report.chunks_removed += index.remove_document(fields.tenant, name, with_members=True, keep=read)
    return report


def _read(tmp: Path, name: str, content: bytes, archive: bool, encoding: str | None,
          unsupported: Counter[str]) -> Iterator[DocumentText]:
    """The upload's document, or an archive's member documents (read from a copy in ``tmp``), each named by it."""
    if not archive:
        yield DocumentText.from_bytes(content, PurePosixPath(name).name, named=name, encoding=encoding)
        return
    copy = private_copy(tmp, PurePosixPath(name).name, content)
    try:
        yield from archive_documents(copy, encoding=encoding, unsupported=unsupported, named=name)
    except DataError as exc:  # the archive itself is damaged: its message names the private copy
        raise DataError(str(exc).replace(str(copy), name)) from exc


def _named(documents: Iterator[DocumentText], seen: list[str]) -> Iterator[DocumentText]:
    """``documents``, recording in ``seen`` the name of each one read with text (what the index will hold)."""
    for document in documents:
        if document.error is None and document.text.strip():
            seen.append(document.path)
        yield document
