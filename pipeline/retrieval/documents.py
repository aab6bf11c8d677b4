"""Documents and chunks for the corrective pipeline: access control and authority metadata, ingestion."""

from __future__ import annotations

import codecs
import dataclasses
import datetime
import hashlib
import logging
import re
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from models.deps import require
from models.errors import ConfigError, DataError
from models.unicode_text import whole_characters
from pipeline.retrieval.asciidoc_text import asciidoc_to_text
from pipeline.retrieval.doc_text import doc_to_text
from pipeline.retrieval.docx_text import docx_to_text
from pipeline.retrieval.email_text import eml_to_text, emlx_to_text, mbox_to_text
from pipeline.retrieval.epub_text import epub_to_text
from pipeline.retrieval.file_kinds import content_suffix
from pipeline.retrieval.html_text import html_to_text
from pipeline.retrieval.ics_text import ics_to_text
from pipeline.retrieval.json_text import json_to_text, jsonl_to_text
from pipeline.retrieval.markdown_text import markdown_to_text, mdx_to_text
from pipeline.retrieval.mhtml_text import mhtml_to_text
from pipeline.retrieval.msg_text import msg_to_text
from pipeline.retrieval.notebook_text import notebook_to_text
from pipeline.retrieval.odp_text import odp_to_text
from pipeline.retrieval.ods_text import ods_to_text
from pipeline.retrieval.odt_text import odt_to_text
from pipeline.retrieval.office_variants import FAMILY
from pipeline.retrieval.pdf_text import pdf_paragraphs
from pipeline.retrieval.ppt_text import ppt_to_text
from pipeline.retrieval.pptx_text import pptx_to_text
from pipeline.retrieval.rst_text import rst_to_text
from pipeline.retrieval.rtf_text import rtf_to_text
from pipeline.retrieval.strips import (
    FENCE,
    LIST_ITEM,
    LIST_LEAD_IN,
    MARKDOWN_HEADING,
    TABLE_ROW,
    blocks,
    closes_fence,
    heading_level,
    under_heading,
)
from pipeline.retrieval.table_text import RECORD_FORMATS, RECORD_SEPARATOR, csv_to_text, tsv_to_text
from pipeline.retrieval.transcript_text import srt_to_text, vtt_to_text
from pipeline.retrieval.xls_text import xls_to_text
from pipeline.retrieval.xlsx_text import xlsx_to_text

__all__ = ["ACCESS_DENIED_MIN_COVERAGE", "AUTHORITY_RANGE", "FILTER_FIELDS", "NAME_RULE", "STATUSES", "Principal",
           "StoredChunk", "check_access_fields", "check_encoding", "check_hidden", "check_name", "check_page",
           "check_principal", "check_roles", "check_search", "chunk_text", "chunks_to_write", "is_record_metadata",
           "read_document", "read_document_as", "reveals_access_denied", "term_coverage"]

logger = logging.getLogger(__name__)

SUPPORTED = (".txt", ".md", ".markdown", ".mdx", ".rst", ".adoc", ".asciidoc", ".ipynb", ".html", ".htm", ".mht",
             ".mhtml", ".pdf",
             ".docx", ".doc", ".odt", ".pptx", ".ppt", ".odp", ".csv", ".tsv", ".xlsx", ".xls", ".ods", ".json",
             ".jsonl", ".eml", ".mbox", ".msg", ".ics", ".epub", ".vtt", ".srt", ".rtf",
             ".docm", ".dotx", ".dotm", ".dot", ".xlsm", ".xltx", ".xltm", ".xlt", ".pptm", ".ppsx", ".ppsm", ".potx",
             ".potm", ".pps", ".pot", ".fodt", ".fods", ".fodp", ".oft", ".emlx", ".xhtml", ".qmd", ".rmd")


NAME_RULE = re.compile(r"[^\W_][\w.-]{0,63}")


def check_name(kind: str, value: object) -> str:
    """One rule for tenant and role names everywhere (API keys, the index, the CLI): 1-64 letters, digits,
    '.', '_' or '-', starting with a letter or digit. Data indexed under any other name could never be read."""
    if not isinstance(value, str) or not NAME_RULE.fullmatch(value):
        raise ConfigError(f"{kind} name {value!r} is not allowed: use 1-64 letters, digits, '.', '_' or '-', "
                          "starting with a letter or digit")
    return value


def check_roles(roles: Iterable[str]) -> frozenset[str]:
    """Role names as the frozenset access checks take (a list or set works too), each by :func:`check_name`; one
    string is refused: roles="support" would be read as the roles s, u, p, o, r, t."""
    if isinstance(roles, str | bytes):
        raise ConfigError(f"roles must be a collection of role names, not one string: write "
                          f"roles=frozenset({{{roles!r}}}), got roles={roles!r}")
    try:
        return frozenset(check_name("role", role) for role in roles)
    except TypeError:
        raise ConfigError(f"roles must be a collection of role names, got {roles!r}") from None


FILTER_FIELDS: dict[str, type] = {  # the chunk fields a filter may name, with the type each holds
    "chunk_id": str, "tenant": str, "source": str, "title": str, "status": str, "effective_date": str,
    "document": str, "position": int, "authority": int}
UNFILTERABLE = ("text", "allowed_roles", "metadata")  # filtered otherwise: by the query, the principal, a key


STATUSES = ("active", "superseded")
AUTHORITY_RANGE = 1000  # the bound of --authority and of PUT /v1/documents?authority=


def _is_calendar_date(text: str) -> bool:
    """YYYY-MM-DD naming a day that exists."""
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        return False
    try:
        datetime.date.fromisoformat(text)
    except ValueError:
        return False
    return True


def check_access_fields(*, tenant: object, roles: object, status: object, effective_date: object,
                        authority: object) -> frozenset[str]:
    """Check what a chunk carries besides its text (owner, access, freshness) and return its roles as a frozenset;
    a ConfigError names the first bad value. Shared by ingestion and by every write of chunks built by hand."""
    check_name("tenant", tenant)
    checked_roles = check_roles(roles)  # type: ignore[arg-type]  # a str alone is refused there, by name
    if status not in STATUSES:
        raise ConfigError(f"status must be one of {list(STATUSES)}, got {status!r}")
    if not isinstance(effective_date, str) or (effective_date and not _is_calendar_date(effective_date)):
        # conflicts are settled by this date: "2024-13-45" would have been ranked as if it were a real one
        raise ConfigError(f"effective_date must be a calendar date YYYY-MM-DD (or empty), got {effective_date!r}")
    if isinstance(authority, bool) or not isinstance(authority, int) \
            or not -AUTHORITY_RANGE <= authority <= AUTHORITY_RANGE:
        raise ConfigError(f"authority must be an int in [-{AUTHORITY_RANGE}, {AUTHORITY_RANGE}], got {authority!r}")
    return checked_roles


def _checked(chunk: StoredChunk) -> StoredChunk:
    """``chunk`` once every field holds what the index stores (roles as a frozenset); else a ConfigError."""
    for name in ("chunk_id", "text", "source", "title"):
        value = getattr(chunk, name)
        if not isinstance(value, str) or (name in ("chunk_id", "text") and not value.strip()):
            rule = "a non-empty str" if name in ("chunk_id", "text") else "a str"
            raise ConfigError(f"{name} must be {rule}, got {type(value).__name__}: {value!r:.80}")
    if isinstance(chunk.position, bool) or not isinstance(chunk.position, int) or chunk.position < 0:
        raise ConfigError(f"position must be an int >= 0 (the chunk's place in its document), got {chunk.position!r}")
    if not isinstance(chunk.metadata, dict):
        raise ConfigError(f"metadata must be a dict, got {type(chunk.metadata).__name__}: {chunk.metadata!r:.80}")
    roles = check_access_fields(tenant=chunk.tenant, roles=chunk.allowed_roles, status=chunk.status,
                                effective_date=chunk.effective_date, authority=chunk.authority)
    return chunk if roles == chunk.allowed_roles and isinstance(chunk.allowed_roles, frozenset) \
        else dataclasses.replace(chunk, allowed_roles=roles)


def chunks_to_write(chunks: object) -> list[StoredChunk]:
    """``chunks`` as a list, once every item is a StoredChunk whose fields are what the index stores (a chunk built
    by hand with ``allowed_roles="admin"`` would be readable by any role named like one of its letters); else a
    ConfigError naming the first that is not, before anything is embedded or written."""
    if isinstance(chunks, (str, bytes, StoredChunk)) or not hasattr(chunks, "__iter__"):
        raise ConfigError(f"write takes a list of StoredChunk, got {type(chunks).__name__}: {chunks!r:.80}")
    items = list(chunks)
    out = []
    for position, item in enumerate(items):
        if not isinstance(item, StoredChunk):
            raise ConfigError(f"chunk {position} is a {type(item).__name__}, not a StoredChunk: {item!r:.80} (index "
                              "files with ingest() or `crag index add`, or build StoredChunk(chunk_id=..., text=..., "
                              "tenant=..., source=...))")
        try:
            out.append(_checked(item))
        except ConfigError as exc:
            raise ConfigError(f"chunk {position} ({item.chunk_id!r:.60}): {exc}") from exc
    return out


def check_principal(principal: object) -> None:
    """Who reads must be a :class:`Principal`: the tenant and roles that scope every search, never a bare name."""
    if not isinstance(principal, Principal):
        raise ConfigError(f"principal must be a Principal, e.g. Principal(tenant='acme', "
                          f"roles=frozenset({{'support'}})), got {type(principal).__name__}: {principal!r:.80}")


def check_page(tenant: object, limit: object) -> None:
    """A page of a tenant's documents: a valid tenant name and a limit of at least one."""
    check_name("tenant", tenant)
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ConfigError(f"limit must be an int >= 1 (documents per page), got {limit!r}")


def check_hidden(query: object, principal: object, min_coverage: object) -> None:
    """What an access check refuses: as a search, and a coverage outside (0, 1]."""
    check_search(query, principal, 1, None)
    if isinstance(min_coverage, bool) or not isinstance(min_coverage, int | float) or not 0 < min_coverage <= 1:
        raise ConfigError(f"min_coverage must be a number in (0, 1], got {min_coverage!r}")


def check_search(query: object, principal: object, k: object, filters: object) -> None:
    """What every retriever refuses before searching (the local index and Qdrant alike): a query that is not
    text, a reader that is not a Principal, k below 1, filters that are not a dict of non-empty field names to one
    string or number each, a field given a value of the wrong type (``position="3"`` would match nothing,
    silently) and the fields that are never matched exactly (the text, the roles, the metadata as a whole)."""
    if not isinstance(query, str):
        raise ConfigError(f"query must be a string, got {type(query).__name__}: {query!r:.80}")
    check_principal(principal)
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ConfigError(f"k must be an int >= 1, got {k!r}")
    if filters is None:
        return
    if not isinstance(filters, dict):
        raise ConfigError(f"filters must be a dict of field -> value, e.g. {{'status': 'active'}}, got {filters!r:.80}")
    for key, value in filters.items():
        if not isinstance(key, str) or not key:
            raise ConfigError(f"filter keys must be non-empty strings, got {key!r}")
        if not isinstance(value, str | int | float | bool):
            raise ConfigError(f"filter {key!r} must match a string or number, got {value!r}")
        if key in UNFILTERABLE:
            raise ConfigError(f"filter {key!r} is not supported: the text is what the query searches, the roles "
                              f"come from the caller's principal, and metadata is filtered key by key "
                              f"(e.g. {{'lang': 'en'}})")
        wanted = FILTER_FIELDS.get(key)
        if wanted is not None and type(value) is not wanted:
            fixed = str(value) if wanted is str else int(value) if isinstance(value, bool) or \
                str(value).strip().lstrip("+-").isdigit() else 3
            raise ConfigError(f"filter {key!r} holds {'an integer' if wanted is int else 'text'}, got "
                              f"{type(value).__name__} {value!r}: pass {{{key!r}: {fixed!r}}}")


ACCESS_DENIED_MIN_COVERAGE = 0.6


def term_coverage(terms: Sequence[str], text: str) -> float:
    """Share of the distinct ``terms`` that occur as words of ``text`` (case-insensitive)."""
    wanted = {t.lower() for t in terms}
    if not wanted:
        return 0.0
    words = set(re.findall(r"\w+", text.lower()))
    return len(wanted & words) / len(wanted)


def reveals_access_denied(terms: Sequence[str], text: str, min_coverage: float) -> bool:
    """Whether a hidden chunk may be admitted to exist: it must match the *whole* question in words, at least
    two distinct ones and ``min_coverage`` of them. Numbers and identifiers (any term with a digit) never count,
    so the outcome cannot be used to test which numbers, codes or IDs occur in documents the caller may not
    read; one matching rare word among unmatched ones is not enough either."""
    words = [t for t in terms if not any(ch.isdigit() for ch in t)]
    matched = {t.lower() for t in words} & set(re.findall(r"\w+", text.lower()))
    return len(matched) >= 2 and term_coverage(words, text) >= min_coverage


@dataclass(frozen=True, kw_only=True)
class Principal:
    """Who is asking: a tenant and the roles they hold."""

    tenant: str
    roles: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        check_name("tenant", self.tenant)
        object.__setattr__(self, "roles", check_roles(self.roles))

    def may_read(self, chunk: StoredChunk) -> bool:
        """Same tenant, and either no role restriction or a shared role."""
        return chunk.tenant == self.tenant and (not chunk.allowed_roles or bool(chunk.allowed_roles & self.roles))


@dataclass(frozen=True, kw_only=True)
class StoredChunk:
    """A chunk in the index with its provenance, access control and authority metadata."""

    chunk_id: str
    text: str
    tenant: str
    source: str
    title: str = ""
    position: int = 0
    allowed_roles: frozenset[str] = frozenset()
    status: str = "active"
    effective_date: str = ""
    authority: int = 0
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"chunk_id": self.chunk_id, "text": self.text, "tenant": self.tenant, "source": self.source,
                "title": self.title, "position": self.position, "allowed_roles": sorted(self.allowed_roles),
                "status": self.status, "effective_date": self.effective_date, "authority": self.authority,
                "metadata": self.metadata}

    @property
    def document(self) -> str:
        """The document the chunk came from: its file path when ingested from a file (an upload's name, or the
        path on the server for `crag index add`), else its source name."""
        return str(self.metadata.get("path") or self.source)

    @property
    def is_record(self) -> bool:
        """A row of a table file (indexed one record a chunk): graded and quoted whole, never cut into sentences."""
        return is_record_metadata(self.metadata)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StoredChunk:
        return cls(**{**data, "allowed_roles": frozenset(data.get("allowed_roles") or ())})


def is_record_metadata(metadata: dict[str, Any]) -> bool:
    """Whether a chunk with this metadata is a table's record (its file's format is one of ``RECORD_FORMATS``)."""
    return metadata.get("format") in RECORD_FORMATS


def read_document(path: str | Path, *, encoding: str | None = None) -> tuple[str, str]:
    """(title, plain text) of a text, Markdown (MDX too), reStructuredText, AsciiDoc, Jupyter notebook, HTML, PDF,
    Word (.docx; 97-2003 .doc), Rich Text (.rtf), OpenDocument text (.odt), PowerPoint (.pptx; 97-2003 .ppt),
    OpenDocument presentation (.odp), table (.csv, .tsv, Excel .xlsx and .xls, OpenDocument .ods: one record per
    row), JSON data (.json, .jsonl: one record per object), e-mail (.eml: one message; .mbox: a mailbox; Outlook
    .msg), calendar (.ics), web archive (.mht, .mhtml), e-book (.epub) or transcript (WebVTT .vtt, SubRip .srt)
    file. An office file is read as what its content is (:func:`pipeline.retrieval.file_kinds.content_suffix`: a web
    archive or an HTML table named .doc or .xls, a .docx named .doc...), not as its name says.
    ``encoding``: the charset of text files that are not UTF-8 (an unknown name is a ConfigError,
    :func:`check_encoding`); without it such a file is an error."""
    path = Path(path)
    return read_document_as(path, content_suffix(path, path.suffix.lower()), encoding=encoding)


def read_document_as(path: Path, actual: str, *, encoding: str | None = None) -> tuple[str, str]:
    """:func:`read_document` for a caller that has already asked :func:`content_suffix` which reader ``path`` needs
    (``actual``), so that the file is not opened twice to tell."""
    check_encoding(encoding)
    suffix = path.suffix.lower()
    if suffix not in SUPPORTED:
        raise DataError(f"{path}: unsupported file type {path.suffix!r}; supported: {list(SUPPORTED)}")
    if actual != suffix:
        logger.info("%s: read as a %s file, which its content is, whatever its name says", path, actual)
    try:
        title, text = _read_as(path, actual, encoding)
    except DataError as exc:
        if actual == suffix:
            raise
        raise DataError(f"{exc} (read as a {actual} file: its first bytes are one's, whatever its name)") from exc
    except RecursionError as exc:  # a reader (or the library under it) walking a crafted file's nesting
        raise DataError(f"{path}: nested too deeply to read (a crafted or damaged file)") from exc
    # a document without a title of its own is named by its file; "\ud83d" escapes (JSON, HTML) made storable
    return whole_characters(title) or path.stem, whole_characters(text)


def _read_as(path: Path, suffix: str, encoding: str | None) -> tuple[str, str]:
    """(title, text) of ``path`` read by the reader of ``suffix``."""
    if suffix in FILE_READERS:
        return FILE_READERS[suffix](path)
    raw = _decoded(path, encoding, html=TEXT_READERS.get(suffix) is html_to_text)
    try:
        return TEXT_READERS.get(suffix, _plain_text)(raw)
    except DataError as exc:
        raise DataError(f"{path}: {exc}") from exc


def _plain_text(raw: str) -> tuple[str, str]:
    heading = re.search(r"^#\s+(.+)$", raw, flags=re.MULTILINE)
    return (heading.group(1).strip() if heading else ""), raw


TEXT_READERS = {".html": html_to_text, ".htm": html_to_text, ".md": markdown_to_text, ".markdown": markdown_to_text,
                ".mdx": mdx_to_text, ".adoc": asciidoc_to_text, ".asciidoc": asciidoc_to_text,
                ".rst": rst_to_text, ".ipynb": notebook_to_text, ".csv": csv_to_text, ".tsv": tsv_to_text,
                ".json": json_to_text, ".jsonl": jsonl_to_text, ".vtt": vtt_to_text, ".srt": srt_to_text,
                ".ics": ics_to_text, ".xhtml": html_to_text, ".qmd": markdown_to_text, ".rmd": markdown_to_text}


# UTF-32 first: its little-endian mark begins with UTF-16's
WIDE_BYTE_ORDER_MARKS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
                         (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))
DECLARED_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?([\w.:-]+)""", re.IGNORECASE)


def check_encoding(encoding: str | None) -> str | None:
    """``encoding`` if Python knows it as a text encoding (None stays None), else a ConfigError naming it."""
    if encoding is None:
        return None
    try:
        info = codecs.lookup(encoding)
    except (LookupError, TypeError) as exc:
        raise ConfigError(f"unknown encoding {encoding!r}; name one Python knows, such as cp1252, latin-1 or "
                          "shift_jis") from exc
    if not getattr(info, "_is_text_encoding", True):
        raise ConfigError(f"{encoding!r} is not a text encoding; name one such as cp1252, latin-1 or shift_jis")
    return encoding


def _decoded(path: Path, fallback: str | None = None, *, html: bool = False) -> str:
    """The file's text: UTF-8 (a byte-order mark dropped), UTF-16 or UTF-32 when a byte-order mark says so (as
    Windows' "Unicode" text files and some subtitle tools write them), or for HTML the charset its ``<meta>``
    declares (pages saved as windows-1252 or ISO-8859-1 are common), or else ``fallback``, the encoding the caller
    names for its files (``html``: the file is an HTML page). Anything else is an error naming the byte and the ways
    out."""
    data = path.read_bytes()
    marked = next((name for mark, name in WIDE_BYTE_ORDER_MARKS if data.startswith(mark)), None)
    if marked is not None:
        return _decoded_as(path, data, marked, f"starts with a {marked.upper()} byte-order mark but is not "
                                               f"{marked.upper()}", "convert it to UTF-8")
    try:
        return _unix_lines(data.decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        declared = DECLARED_CHARSET.search(data[:4096]) if html else None
        if declared is not None:
            charset = declared.group(1).decode("ascii")
            return _decoded_as(path, data, charset, f"neither UTF-8 nor its declared charset {charset!r}",
                               "convert it to UTF-8 or correct its <meta> tag")
        if fallback is not None:
            return _decoded_as(path, data, fallback, f"neither UTF-8 nor {fallback}",
                               "name its encoding or convert it to UTF-8")
        raise DataError(f"{path}: not UTF-8 ({exc.reason} at byte {exc.start}); convert it to UTF-8"
                        + (", declare its charset in a <meta> tag" if html else "")
                        + " or name its encoding (`crag index add --encoding cp1252`)") from exc


def _decoded_as(path: Path, data: bytes, encoding: str, what: str, fix: str) -> str:
    """``data`` decoded as ``encoding``; else a DataError: ``path``, ``what`` is wrong, where, and the ``fix``."""
    try:
        return _unix_lines(data.decode(encoding))
    except (LookupError, UnicodeDecodeError) as exc:
        where = f"{exc.reason} at byte {exc.start}" if isinstance(exc, UnicodeDecodeError) else str(exc)
        raise DataError(f"{path}: {what} ({where}); {fix}") from exc


def _unix_lines(text: str) -> str:
    """Line ends as a text-mode read gives them (universal newlines)."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _read_pdf(path: Path) -> tuple[str, str]:
    """Text of every page (pypdf) in paragraphs (pipeline.retrieval.pdf_text); scanned pages without text are an
    error."""
    pypdf = require("pypdf", "rag")
    pypdf_logger = logging.getLogger("pypdf")
    level = pypdf_logger.level
    pypdf_logger.setLevel(logging.ERROR)  # pypdf's repair notes ("Ignoring wrong pointing object") are not ours
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            reader = pypdf.PdfReader(str(path))
            if reader.is_encrypted:
                raise DataError(f"{path}: the PDF is encrypted; decrypt it before indexing")
            pages = [page.extract_text() or "" for page in reader.pages]
            title = str((reader.metadata or {}).get("/Title") or "").strip()
    except (pypdf.errors.PyPdfError, ValueError, KeyError, TypeError) as exc:
        raise DataError(f"{path}: not a readable PDF ({type(exc).__name__}: {exc})") from exc
    finally:
        pypdf_logger.setLevel(level)
    text = pdf_paragraphs(pages)
    if not text:
        raise DataError(f"{path}: the PDF has no extractable text (scanned images need OCR first)")
    return title, text


# readers of the file itself (binary formats, or ones that find their own encoding); the rest read decoded text
FILE_READERS: dict[str, Callable[[Path], tuple[str, str]]] = {
    ".pdf": _read_pdf, ".docx": docx_to_text, ".doc": doc_to_text, ".odt": odt_to_text, ".pptx": pptx_to_text,
    ".ppt": ppt_to_text, ".xlsx": xlsx_to_text, ".xls": xls_to_text, ".ods": ods_to_text, ".odp": odp_to_text,
    ".eml": eml_to_text, ".mbox": mbox_to_text, ".mht": mhtml_to_text, ".mhtml": mhtml_to_text, ".msg": msg_to_text,
    ".epub": epub_to_text, ".rtf": rtf_to_text}
FILE_READERS |= {name: FILE_READERS[family] for name, family in FAMILY.items()}  # .docm, .dotx, .ppsx, .xlt...
FILE_READERS |= {".fodt": odt_to_text, ".fods": ods_to_text, ".fodp": odp_to_text,  # flat OpenDocument XML
                 ".oft": msg_to_text, ".emlx": emlx_to_text}  # an Outlook template; Apple Mail's message file


def chunk_text(text: str, *, max_chars: int = 900) -> list[str]:
    """Paragraph-based chunks of at most ``max_chars`` (long paragraphs split between items or at sentence ends).

    Sections are kept whole where they fit: a Markdown heading (``#`` .. ``######``; HTML headings are read as
    such) starts a new chunk once the current one is a third full, and a chunk never ends with a heading,
    which goes with the text it heads. A chunk that starts inside a section opens with that section's headings
    (level 2 and deeper, outermost first, as many as fit in a quarter of a chunk): "## Configuration" is what
    makes its third chunk retrievable and gradable for a question about configuration. A fenced code block is
    one paragraph (blank lines inside it too); one longer than a chunk is cut between lines, each piece
    fenced again. A table's records (separated by ``RECORD_SEPARATOR``) are chunked one by one, never packed."""
    if max_chars < 100:
        raise ConfigError(f"max_chars must be >= 100, got {max_chars}")
    if RECORD_SEPARATOR in text:
        return [chunk for record in text.split(RECORD_SEPARATOR)
                for chunk in chunk_text(record.strip(), max_chars=max_chars)]
    chunks: list[str] = []
    current: list[str] = []
    path: list[tuple[int, str]] = []  # the headings of level >= 2 the text is under: strips.under_heading
    for is_code, paragraph in blocks(text):
        waiting = _trailing_headings(current)  # headings left room beside a long paragraph's first piece
        context = _section_context(path, max_chars)
        lead = [*context, *(w for w in waiting if w not in context)]
        room = max_chars - len("\n\n".join(lead)) - 2 if lead else max_chars
        split = _split_code if is_code else _split_paragraph
        fits = len(paragraph) <= (room if waiting and room >= 100 else max_chars)  # its heading goes with it
        pieces = [paragraph] if fits else split(paragraph, room if room >= 100 else max_chars)
        for piece in pieces:
            if _is_heading(piece):
                path = under_heading(path, piece)
            size = len("\n\n".join(current))
            body = [p for p in current if not _is_heading(p)]
            new_section = bool(MARKDOWN_HEADING.match(piece)) and size >= max_chars // 3 and bool(body)
            if current and (size + len(piece) + 2 > max_chars or new_section):
                carried = _trailing_headings(current) if body else []
                if len("\n\n".join([*carried, piece])) > max_chars:  # no room beside the text: the heading stays
                    carried = []
                chunks.append("\n\n".join(current[:len(current) - len(carried)]))
                first = carried[0] if carried else piece
                outer = path if not _is_heading(first) else [h for h in path if h[0] < heading_level(first)]
                current = _fitting(_section_context(outer, max_chars), [*carried, piece], max_chars) + carried
            current.append(piece)
    if current:
        last = "\n\n".join(current)
        if chunks and all(_is_heading(p) for p in current) and len(chunks[-1]) + 2 + len(last) <= max_chars:
            chunks[-1] = f"{chunks[-1]}\n\n{last}"  # headings with no text after them are no chunk of their own
        else:
            chunks.append(last)
    return chunks


def _section_context(path: list[tuple[int, str]], max_chars: int) -> list[str]:
    """The innermost headings of ``path`` that fit in a quarter of a chunk, outermost first."""
    headings = [h for _, h in path]
    while headings and len("\n\n".join(headings)) > max_chars // 4:
        headings = headings[1:]
    return headings


def _fitting(context: list[str], rest: list[str], max_chars: int) -> list[str]:
    """As much of ``context`` (dropping the outermost first) as fits in one chunk before ``rest``."""
    while context and len("\n\n".join([*context, *rest])) > max_chars:
        context = context[1:]
    return context


def _is_heading(paragraph: str) -> bool:
    """A paragraph that is a heading line and nothing else."""
    return bool(MARKDOWN_HEADING.match(paragraph)) and "\n" not in paragraph


def _trailing_headings(paragraphs: list[str]) -> list[str]:
    count = 0
    while count < len(paragraphs) and _is_heading(paragraphs[len(paragraphs) - 1 - count]):
        count += 1
    return paragraphs[len(paragraphs) - count:]


def _split_code(block: str, max_chars: int) -> list[str]:
    """A fenced code block too long for one chunk, cut between lines into pieces that are each fenced like the
    block (its opening line, a closing fence), so that every chunk's code still reads as code."""
    lines = block.split("\n")
    opener = FENCE.match(lines[0])
    closing = opener.group(1) if opener else "```"
    opening = lines[0] if len(lines[0]) <= max_chars // 4 else closing  # an info string that long is not one
    body = lines[1:-1] if len(lines) > 1 and closes_fence(lines[-1], closing) else lines[1:]
    room = max(20, max_chars - len(opening) - len(closing) - 2)
    pieces: list[str] = []
    current: list[str] = []
    for line in body:
        for start in range(0, max(1, len(line)), room):  # a line longer than a chunk is cut where it must be
            part = line[start:start + room]
            if current and len("\n".join([*current, part])) > room:
                pieces.append("\n".join(current))
                current = []
            current.append(part)
    if current:
        pieces.append("\n".join(current))
    return [f"{opening}\n{piece}\n{closing}" for piece in pieces]


def _split_paragraph(paragraph: str, max_chars: int) -> list[str]:
    """A paragraph too long for one chunk, in pieces of at most ``max_chars``. One of several lines (a list, a
    table, wrapped text) is cut between lines, where an item or a row starts or a line ended a sentence, and
    keeps its line breaks, so that each list item and table row still reads as one; a single line, or a unit of
    lines longer than a chunk, is cut at sentence ends."""
    if "\n" not in paragraph:
        return _split_sentences(paragraph, max_chars)
    units: list[list[str]] = []
    for line in paragraph.split("\n"):
        starts = LIST_ITEM.match(line) or TABLE_ROW.search(line) or not units or units[-1][-1].rstrip().endswith(
            LIST_LEAD_IN)  # where strips let a list begin: after a sentence, a colon or a semicolon
        if starts:
            units.append([line])
        else:
            units[-1].append(line)
    pieces: list[str] = []
    current = ""
    for unit in units:
        text = "\n".join(unit)
        for part in [text] if len(text) <= max_chars else _split_sentences(text, max_chars):
            if current and len(current) + 1 + len(part) > max_chars:
                pieces.append(current)
                current = ""
            current = f"{current}\n{part}" if current else part
    if current:
        pieces.append(current)
    return pieces


def _split_sentences(paragraph: str, max_chars: int) -> list[str]:
    out, current = [], ""
    sentences = re.split(r"(?<=[.!?])\s+", paragraph)
    pieces = []
    for sentence in sentences:  # a "sentence" with no full stop in max_chars is cut at word boundaries
        start = 0  # walked by position: slicing off the rest each time made a long run quadratic
        while len(sentence) - start > max_chars:
            cut = sentence.rfind(" ", start, start + max_chars)
            cut = cut if cut > start else start + max_chars
            pieces.append(sentence[start:cut])
            start = cut
            while start < len(sentence) and sentence[start].isspace():
                start += 1
        pieces.append(sentence[start:])
    for sentence in pieces:
        if current and len(current) + len(sentence) + 1 > max_chars:
            out.append(current)
            current = ""
        current = f"{current} {sentence}".strip()
    if current:
        out.append(current)
    return out


def chunk_id_for(source: str, position: int, text: str, *, tenant: str = "") -> str:
    """Stable id: the file name and position to read, then a hash of the tenant, the full source path and the
    text, so that two tenants (or two folders) with the same file never share an id."""
    digest = hashlib.sha1(f"{tenant}\x1f{source}\x1f{text}".encode()).hexdigest()[:10]
    return f"{Path(source).name}#{position}-{digest}"
