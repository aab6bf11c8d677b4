"""The readable text of e-mail saved as files: one message (``.eml``, RFC 5322 / MIME) or a mailbox of many
(``.mbox``), read with the standard library.

Support threads, announcements and decisions live in mail. Read raw, an ``.eml`` file is mostly routing headers,
MIME boundaries and base64. So the subject titles the document, a heading says who wrote to whom and when (``## From
Alice <a@example.com>, to Bob <b@example.com>, on Mon, 04 Mar 2024 10:00:00 +0000``: the section every sentence of the
message sits in, which an answer quoting one names, and never quoted as an answer itself), and the body follows: its
plain-text part, or its HTML part read as HTML pages are (:mod:`pipeline.retrieval.html_text`) when there is no
plain one, each in the charset it declares. What a reply quotes (``>`` lines and the "On ..., ... wrote:" line that
introduces them) was said in an earlier message, and a signature (after the ``-- `` line, or ``--``) is no content:
both are left out. Attachments are named (``Attachments: a.pdf, logo.png``), and those of a type crag reads (PDF,
Word, slides, spreadsheets, text...) are read too, each after the body under its own heading (``### Attachment:
refund-policy.pdf``), so that a question about the policy a support mail carried finds it; one that cannot be
read (damaged, too large, or its reader's extra not installed) stays only named, and neither archives nor mail
files attached as files are opened. A forwarded message attached whole is read after them.

A mailbox (``.mbox``: a mail program's or Gmail Takeout's export, a mailing list's archive) is one document of its
messages in file order, each led by its own heading, which names its subject too (``## Re: Refund window — From
...``). A message seen before (the same Message-ID: a list's copy of a mail also sent to you) is read once, and
messages Gmail labels Spam or Trash are left out. Lines that the mbox format escaped (``>From ``) are restored first,
so that they are not taken for quotes.
"""

from __future__ import annotations

import email
import email.policy
import logging
import mailbox
import re
from collections.abc import Iterator
from email.message import EmailMessage, Message, MIMEPart
from pathlib import Path

from models.errors import DataError, MissingDependencyError
from pipeline.retrieval.html_text import html_to_text
from pipeline.retrieval.strips import headings_down
from pipeline.retrieval.zipped_xml import MAX_PART_BYTES

__all__ = ["MAX_FORWARDS", "attachment_block", "eml_to_text", "emlx_to_text", "mbox_to_text", "one_line", "part_text",
           "person", "without_quotes"]

logger = logging.getLogger(__name__)

HEADER_WORDS = (("From", "From"), ("To", "to"), ("Cc", "cc"), ("Date", "on"))  # the heading: "From a, to b, on d"
MAIL_HEADERS = ("From", "Subject", "Date", "Message-ID", "MIME-Version", "Content-Type")  # one makes it a message
ATTRIBUTION = re.compile(r"^(?:On\s.+\bwrote:|-+\s*Original Message\s*-+)\s*$", re.IGNORECASE)
SIGNATURE = "--"  # RFC 3676: a line of dash, dash, space opens the signature (many clients drop the space)
MBOX_ESCAPED = re.compile(rb"^>(>*From )", re.MULTILINE)  # mboxrd writes a body's "From " line as ">From "
DISCARDED_LABELS = frozenset({"spam", "trash"})  # Gmail Takeout's X-Gmail-Labels of mail nobody kept
MAX_FORWARDS = 10  # forwarded messages inside forwarded messages are read this deep; deeper ones are named
NOT_OPENED = (".eml", ".mbox", ".msg")  # mail attached as a file: named only (a forward attached whole is read)


def eml_to_text(path: Path) -> tuple[str, str]:
    """(subject, text) of the message in ``path``."""
    return _message_file_text(path, path.read_bytes())


def emlx_to_text(path: Path) -> tuple[str, str]:
    """(subject, text) of an Apple Mail message file (``.emlx``: the message's length in bytes on its first line,
    the message, then Mail's own property list, which holds no content)."""
    length, _, rest = path.read_bytes().partition(b"\n")
    if not length.strip().isdigit():
        raise DataError(f"{path}: not an Apple Mail message (an .emlx file begins with the message's length)")
    return _message_file_text(path, rest[: int(length.strip())])


def _message_file_text(path: Path, data: bytes) -> tuple[str, str]:
    """(subject, text) of one message's bytes, read from ``path``."""
    try:
        message = email.message_from_bytes(data, policy=email.policy.default)
        if not _is_message(message):
            raise DataError(f"{path}: not an e-mail message (none of the headers {', '.join(MAIL_HEADERS)}); an "
                            ".eml file is one message as a mail program saves it")
        return _message_text(message)
    except RecursionError as exc:  # the email package parses and walks nested MIME parts recursively
        raise DataError(f"{path}: MIME parts nested too deeply to read (a crafted or damaged message)") from exc


def mbox_to_text(path: Path) -> tuple[str, str]:
    """("", text) of the mailbox in ``path``: its messages in file order, each under a heading with its subject
    (the document is named by its file)."""
    with path.open("rb") as handle:
        if handle.read(5) != b"From ":
            raise DataError(f"{path}: not an mbox file (an mbox begins with a 'From ' line); a single message "
                            "saved by a mail program is an .eml file")
    box = mailbox.mbox(path, create=False)
    texts: list[str] = []
    seen: set[str] = set()
    discarded = unreadable = 0
    try:
        for key in box.iterkeys():
            try:
                message = email.message_from_bytes(MBOX_ESCAPED.sub(rb"\1", box.get_bytes(key)),
                                                   policy=email.policy.default)
                labels = {label.strip().lower() for label in str(message.get("X-Gmail-Labels") or "").split(",")}
                if labels & DISCARDED_LABELS:
                    discarded += 1
                    continue
                message_id = str(message.get("Message-ID") or "").strip()
                if message_id in seen or not _is_message(message):
                    continue
                texts.append(_message_text(message, subject_in_heading=True)[1])
            except RecursionError:  # MIME parts nested too deeply: this message, not the mailbox
                unreadable += 1
                continue
            if message_id:
                seen.add(message_id)
    finally:
        box.close()
    if discarded:
        logger.info("%s: left out %d messages labelled Spam or Trash", path, discarded)
    if unreadable:
        logger.warning("%s: left out %d messages whose MIME parts are nested too deeply to read", path, unreadable)
    return "", "\n\n".join(texts)


def _is_message(message: EmailMessage) -> bool:
    """Whether ``message`` has one of the headers every mail or MIME message has (``MAIL_HEADERS``)."""
    return any(message.get(name) for name in MAIL_HEADERS)


def _message_text(message: EmailMessage, *, subject_in_heading: bool = False, forwards: int = 0) -> tuple[str, str]:
    subject = one_line(str(message.get("Subject") or ""))
    header = ", ".join(f"{word} {one_line(str(message.get(name)))}" for name, word in HEADER_WORDS
                       if message.get(name))
    if subject_in_heading and subject:
        header = f"{subject} — {header}" if header else subject
    blocks = [f"## {header}"] if header else []
    body = _body(message)
    if body:
        blocks.append(body)
    invitations = {_normalised(part.get_payload(decode=True)): part for part in _calendar_parts(message)}
    blocks += [block for part in invitations.values() if (block := _invitation(part))]
    attached, read, forwarded = [], [], []
    for part in message.iter_attachments():
        inner = part.get_content() if part.get_content_type() == "message/rfc822" else None
        if isinstance(inner, Message) and forwards >= MAX_FORWARDS:
            attached.append(f"forwarded message {one_line(str(inner.get('Subject') or ''))}".strip())
        elif isinstance(inner, Message):
            inner_subject, inner_text = _message_text(inner, forwards=forwards + 1)  # type: ignore[arg-type]
            forwarded.append(f"Forwarded message: {inner_subject}\n\n{inner_text}" if inner_subject else inner_text)
        elif part.get_filename() is None and (part.get_content_maintype() == "text" or part.is_multipart()):
            more = _body(part)  # an unnamed text part after the first is more of the message, not a file
            if more:
                blocks.append(more)
        else:
            attached.append(part.get_filename() or part.get_content_type())
            data = part.get_payload(decode=True)
            if data and _normalised(data) in invitations:  # the invitation, attached again as a file (invite.ics)
                continue
            if isinstance(data, bytes) and (block := attachment_block(part.get_filename() or "", data)):
                read.append(block)
    if attached:
        blocks.append("Attachments: " + ", ".join(attached))
    return subject, "\n\n".join([*blocks, *read, *forwarded])


def attachment_block(file_name: str, data: bytes) -> str:
    """A file attached to a message (.eml or .msg), read as a document under its own heading when crag reads its
    type; '' when it does not, or when it cannot be read (logged; the file stays named in the message's Attachments
    line)."""
    from pipeline.retrieval.archives import DocumentText  # (documents imports this module)
    from pipeline.retrieval.documents import SUPPORTED

    name = one_line(file_name)
    suffix = Path(name).suffix.lower()
    if suffix not in SUPPORTED or suffix in NOT_OPENED or not data or len(data) > MAX_PART_BYTES:
        return ""
    document = DocumentText.from_bytes(data, name, named=name)
    if document.error is not None:
        logger.info("attachment %s not read: %s", name, document.error)
        return ""
    text = document.text.strip()
    return f"### Attachment: {name}\n\n{headings_down(text, 3)}" if text else ""  # its sections under this one


def _calendar_parts(part: MIMEPart) -> Iterator[MIMEPart]:
    """The unnamed text/calendar parts of a message, an invitation's (not those of a message it forwards)."""
    if part.get_content_type() == "message/rfc822":
        return
    if part.is_multipart():
        for inner in part.iter_parts():
            yield from _calendar_parts(inner)
    elif part.get_content_type() == "text/calendar" and part.get_filename() is None:
        yield part


def _invitation(part: MIMEPart) -> str:
    """An invitation's calendar part read as an .ics file is, each event a paragraph of the message ("Event: ...",
    "When: ...", "Where: ..." lines); '' when it cannot be read (logged)."""
    from pipeline.retrieval.ics_text import calendar_records  # (it imports this module)

    try:
        return "\n\n".join(calendar_records(part_text(part))[1])
    except (DataError, MissingDependencyError) as exc:
        logger.info("calendar part not read: %s", exc)
        return ""


def _normalised(data: object) -> bytes:
    """A part's bytes without line-ending differences and outer white space, to find the same file twice."""
    return data.replace(b"\r\n", b"\n").strip() if isinstance(data, bytes) else b""


def _body(message: MIMEPart) -> str:
    """The plain-text body (else the HTML one as text), quotes and signature left out."""
    part = message.get_body(preferencelist=("plain", "html"))
    if part is None:
        return ""
    text = part_text(part)
    if part.get_content_type() == "text/html":
        text = html_to_text(text)[1]
    return without_quotes(text.replace("\r\n", "\n").replace("\r", "\n")).strip()


def part_text(part: MIMEPart) -> str:
    """A text part's content in its declared charset; an unknown or wrong charset read as UTF-8, bad bytes
    replaced (mail in the wild mislabels its charset often)."""
    try:
        content = part.get_content()
        return content if isinstance(content, str) else content.decode("utf-8", errors="replace")
    except (LookupError, UnicodeDecodeError):
        payload = part.get_payload(decode=True)
        return payload.decode("utf-8", errors="replace") if isinstance(payload, bytes) else ""


def without_quotes(text: str) -> str:
    """``text`` without quoted lines, the attribution line before them (or the two a mail program wrapped it
    into), and the signature."""
    lines = text.split("\n")
    signature = next((i for i, line in enumerate(lines) if line.rstrip() == SIGNATURE), None)
    if signature is not None:
        lines = lines[:signature]
    kept: list[str] = []
    for line in lines:
        if line.lstrip().startswith(">"):
            while kept and not kept[-1].strip():
                kept.pop()
            if kept and ATTRIBUTION.match(kept[-1].strip()):
                kept.pop()
            elif len(kept) > 1 and ATTRIBUTION.match(f"{kept[-2].strip()} {kept[-1].strip()}"):
                del kept[-2:]
            continue
        if ATTRIBUTION.match(line.strip()) and "Original Message" in line:
            break  # Outlook's quoted original follows unmarked: the rest is the earlier message
        kept.append(line)
    return re.sub(r"\n{3,}", "\n\n", "\n".join(kept))


def one_line(value: str) -> str:
    return re.sub(r"\s+", " ", value).strip()


def person(name: str, address: str) -> str:
    """``Name <address>`` as an e-mail header writes it; one of the two when the other is missing or the same."""
    name, address = one_line(name).strip("'\""), one_line(address)
    if name and address and name.lower() != address.lower():
        return f"{name} <{address}>"
    return name or address

