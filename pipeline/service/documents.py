"""The service's document routes: a writer key adds, replaces, lists and deletes its own tenant's documents.

- ``PUT /v1/documents/{name}``: the body is the document's bytes (any type ``crag index add`` reads, archives
  too; the name's extension says which); query parameters set who may read it (``roles``) and its freshness.
  The same name again replaces it. Answered once its chunks are embedded and searchable by every worker.
- ``GET /v1/documents``: the tenant's documents in name order, paged with ``after``.
- ``DELETE /v1/documents/{name}``: the document (an archive: all its members).

Only keys created with ``crag keys create --writer`` may call them (403 otherwise), and only on their own tenant.
They work on the local index and on Qdrant; a retriever of your own that cannot replace and delete documents by
name (:class:`pipeline.retrieval.uploads.DocumentStore`) answers 501.
"""

from typing import Any, Literal

from pydantic import BaseModel

from models.errors import ConfigError, DataError, MissingDependencyError
from pipeline.retrieval.ingest import AUTHORITY_RANGE, ChunkFields
from pipeline.retrieval.uploads import (
    MAX_NAME_CHARS,
    NAME_PATTERN,
    DocumentStore,
    check_document_name,
    ingest_upload,
    is_archive_name,
)
from pipeline.service.keys import ApiKey

__all__ = ["DOCUMENT_ROUTE", "DocumentList", "DocumentRemoved", "DocumentWritten", "add_document_routes"]

DOCUMENT_ROUTE = "/v1/documents/{name}"  # how metrics and traces name every document's URL
DATE = r"^(\d{4}-\d{2}-\d{2})?$"
FORM = "multipart/form-data"  # curl -F; curl --data-binary sends x-www-form-urlencoded, the file's bytes unchanged


class DocumentWritten(BaseModel):
    document: str
    documents: int  # documents indexed: 1, or an archive's members that held text
    chunks_added: int
    chunks_updated: int
    chunks_unchanged: int
    chunks_removed: int
    skipped: list[dict[str, str]]  # with skip_errors: members that could not be read, and why
    unsupported_files: dict[str, int]  # an archive's members of types crag does not read, by extension


class DocumentInfo(BaseModel):
    document: str
    chunks: int
    roles: list[str]  # empty: every key of the tenant may read it
    format: str


class DocumentList(BaseModel):
    documents: list[DocumentInfo]
    next_after: str | None  # pass as ?after= for the next page; None on the last one


class DocumentRemoved(BaseModel):
    document: str
    chunks_removed: int


def add_document_routes(app: Any, *, retriever: Any, caller: Any, limits: Any, on_write: Any) -> None:
    """Register the routes on ``app``; ``caller`` is the dependency that authenticates a key, ``on_write(action,
    chunks)`` counts what was written for the metrics."""
    from fastapi import Depends, HTTPException, Path, Query, Request
    from fastapi.concurrency import run_in_threadpool

    authenticated = Depends(caller)

    def writer(key: ApiKey = authenticated) -> ApiKey:
        if not key.writer:
            raise HTTPException(403, "this key may only read; create a writer key with `crag keys create --writer "
                                     f"--tenant {key.tenant}` to add or delete documents")
        if not isinstance(retriever, DocumentStore):
            raise HTTPException(501, f"this service's retriever ({type(retriever).__name__}) cannot replace or "
                                     "delete documents by name; add documents where it reads them")
        return key

    def bad_input(exc: Exception) -> HTTPException:
        if isinstance(exc, MissingDependencyError):  # a type this server cannot read: its install lacks an extra
            return HTTPException(415, f"{exc}; this server cannot read that type until it is installed")
        return HTTPException(422, str(exc))

    responses: dict[int | str, dict[str, Any]] = {
        401: {"description": "missing or invalid API key"}, 403: {"description": "the key is not a writer key"},
        404: {"description": "no such document (a name holding a line break matches no route)"},
        413: {"description": "document over the upload limit"},
        415: {"description": "type not readable here, or the body sent as a form"},
        422: {"description": "unreadable document or invalid parameter"},
        501: {"description": "the retriever cannot manage documents"}}
    authorised = Depends(writer)

    # the schema states the rule; check_document_name enforces it, with a message that says what is wrong
    name_rule = Path(..., description="e.g. policies/refunds.md: a relative path whose extension says how to read it",
                     json_schema_extra={"pattern": NAME_PATTERN, "maxLength": MAX_NAME_CHARS})

    body = {"requestBody": {"required": True, "description": "the document's bytes, as its file holds them",
                            "content": {"*/*": {"schema": {"type": "string", "format": "binary"}}}}}

    @app.put("/v1/documents/{name:path}", response_model=DocumentWritten, responses=responses, openapi_extra=body)
    async def put_document(
            request: Request, name: str = name_rule,
            roles: str = Query("", description="comma-separated roles that may read it (default: the whole tenant)"),
            status: Literal["active", "superseded"] = "active",
            effective_date: str = Query("", pattern=DATE, description="YYYY-MM-DD: newer wins on conflicts"),
            authority: int = Query(0, ge=-AUTHORITY_RANGE, le=AUTHORITY_RANGE,
                                   description="higher wins on conflicts of the same date"),
            encoding: str | None = Query(None, description="charset of a text file that is not UTF-8"),
            skip_errors: bool = Query(False, description="index an archive's readable members, report the others"),
            key: ApiKey = authorised) -> DocumentWritten:
        if request.headers.get("content-type", "").split(";")[0].strip().lower() == FORM:  # not the file's bytes
            raise HTTPException(415, f"the body is sent as {FORM}; send the file's own bytes instead "
                                     "(curl --data-binary @FILE, not -F)")
        content = await request.body()  # within the upload limit: the body guard refused more before this
        try:
            fields = ChunkFields(tenant=key.tenant, status=status, effective_date=effective_date, authority=authority,
                                 roles=frozenset(r.strip() for r in roles.split(",") if r.strip()))
            report = await run_in_threadpool(ingest_upload, retriever, name, content, fields, encoding=encoding or None,
                                             skip_errors=skip_errors, max_chunks=limits.max_document_chunks)
        except (DataError, ConfigError, MissingDependencyError) as exc:
            raise bad_input(exc) from exc
        on_write("put", report.chunks_added + report.chunks_updated)
        return DocumentWritten(document=name, documents=report.files, chunks_added=report.chunks_added,
                               chunks_updated=report.chunks_updated, chunks_unchanged=report.chunks_unchanged,
                               chunks_removed=report.chunks_removed, skipped=report.skipped,
                               unsupported_files=report.unsupported_files)

    @app.get("/v1/documents", response_model=DocumentList, responses=responses)
    async def list_documents(after: str = Query("", max_length=1024, description="the last name of the page before"),
                             limit: int = Query(100, ge=1, le=1000), key: ApiKey = authorised) -> DocumentList:
        rows = await run_in_threadpool(retriever.documents, key.tenant, after=after, limit=limit + 1)
        page = rows[:limit]
        return DocumentList(documents=[DocumentInfo(**row) for row in page],
                            next_after=page[-1]["document"] if len(rows) > limit else None)

    @app.delete("/v1/documents/{name:path}", response_model=DocumentRemoved, responses=responses)
    async def delete_document(name: str = name_rule, key: ApiKey = authorised) -> DocumentRemoved:
        try:
            check_document_name(name)
        except DataError as exc:
            raise bad_input(exc) from exc
        removed = await run_in_threadpool(retriever.remove_document, key.tenant, name,
                                          with_members=is_archive_name(name))
        if not removed:
            raise HTTPException(404, f"no document {name!r} in tenant {key.tenant!r}; GET /v1/documents lists them")
        on_write("delete", removed)
        return DocumentRemoved(document=name, chunks_removed=removed)

