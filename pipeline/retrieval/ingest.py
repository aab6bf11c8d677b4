"""``crag index add``: files or folders of text, Markdown and HTML into the local hybrid index."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

from models.errors import DataError
from pipeline.retrieval.documents import SUPPORTED, StoredChunk, chunk_id_for, chunk_text, read_document

__all__ = ["WritableIndex", "collect_files", "ingest"]


def collect_files(paths: Iterable[str | Path]) -> list[Path]:
    """Supported files under the given files and folders, sorted; an unsupported named file is an error."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found += sorted(p for p in path.rglob("*") if p.suffix.lower() in SUPPORTED and p.is_file())
        elif path.is_file():
            if path.suffix.lower() not in SUPPORTED:
                raise DataError(f"{path}: unsupported file type {path.suffix!r}; supported: {list(SUPPORTED)}")
            found.append(path)
        else:
            raise DataError(f"{path}: no such file or folder")
    if not found:
        raise DataError(f"no {list(SUPPORTED)} files found in {[str(p) for p in paths]}")
    return found


class WritableIndex(Protocol):
    """Anything chunks can be added to: the local index or the Qdrant retriever."""

    def add(self, chunks: Iterable[StoredChunk]) -> int: ...


def ingest(index: WritableIndex, paths: Iterable[str | Path], *, tenant: str, roles: Iterable[str] = (),
           status: str = "active", effective_date: str = "", authority: int = 0, max_chars: int = 900) -> int:
    """Chunk and add the documents; returns the number of chunks added."""
    chunks = []
    for path in collect_files(paths):
        title, text = read_document(path)
        for position, piece in enumerate(chunk_text(text, max_chars=max_chars)):
            chunks.append(StoredChunk(chunk_id=chunk_id_for(f"{tenant}/{path.name}", position, piece), text=piece,
                                      tenant=tenant, source=str(path.name), title=title, position=position,
                                      allowed_roles=frozenset(roles), status=status, effective_date=effective_date,
                                      authority=authority,
                                      metadata={"path": str(path), "format": path.suffix.lower().lstrip(".")}))
    return index.add(chunks)
