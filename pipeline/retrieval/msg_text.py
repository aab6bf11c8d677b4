"""The readable text of an Outlook message saved as a file (``.msg``), read with olefile (the ``msg`` extra).

Outlook's "Save As" writes a message as an OLE compound file of MAPI properties ([MS-OXMSG]): one stream per string
or binary property (``__substg1.0_<id><type>``), the fixed-size ones (dates, numbers) in a property stream, a
storage per recipient and per attachment, and a forwarded message attached whole as a storage of its own. It is read
into the same shape as an ``.eml`` file (:mod:`pipeline.retrieval.email_text`): the subject titles the document, a
heading says who wrote to whom and when (``## From Alice <a@example.com>, to Bob <b@example.com>, on Mon, 04 Mar
2024 10:00:00 +0000``; then a meeting request or appointment as an event, written as a calendar's are: "Event: ...",
"When: ...", "Where: ..."), and the body follows without quoted lines or signature. The body is the HTML one read as
a page (Outlook's own plain-text copy of an HTML message follows every link with its address), else the plain-text
one, else the compressed RTF one (``compressed-rtf``) read as Rich Text. Attachments are named, those of a type crag
reads are read after the body under ``### Attachment: name``, and an attached message is read after them as a
forwarded one.

Strings are UTF-16 in Unicode messages and in the message's code page in older ANSI ones. A file that is not an
OLE compound file, or one that is but holds no message (a Word .doc renamed), is an error naming it; so is a
damaged one.
"""

from __future__ import annotations

import logging
import re
import struct
import uuid
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime
from pathlib import Path
from typing import Any

from models.deps import require
from models.errors import DataError
from pipeline.retrieval.code_pages import windows_codec
from pipeline.retrieval.email_text import MAX_FORWARDS, attachment_block, one_line, person, without_quotes
from pipeline.retrieval.html_text import html_to_text
from pipeline.retrieval.ics_text import time_span
from pipeline.retrieval.ole_files import ole_file
from pipeline.retrieval.rtf_text import rtf_text
from pipeline.retrieval.table_text import record_lines
from pipeline.retrieval.zipped_xml import MAX_PART_BYTES

__all__ = ["msg_to_text"]

logger = logging.getLogger(__name__)

PROPERTIES = "__properties_version1.0"
RECIPIENT_PREFIX = "__recip_version1.0_#"
ATTACHMENT_PREFIX = "__attach_version1.0_#"
EMBEDDED_MESSAGE = "__substg1.0_3701000D"
HEADER_BYTES = {"top": 32, "embedded": 24, "sub": 8}  # the property stream's header before its 16-byte entries
UNICODE, ANSI, BINARY = 0x001F, 0x001E, 0x0102  # property types held in streams of their own
LONG, BOOLEAN, SYSTIME = 0x0003, 0x000B, 0x0040  # fixed-size property types read from the property stream

SUBJECT, BODY, HTML, RTF_COMPRESSED = 0x0037, 0x1000, 0x1013, 0x1009
SENDER_NAME, SENDER_ADDRESS, SENDER_SMTP = 0x0C1A, 0x0C1F, 0x5D01
SENT_FOR_NAME, SENT_FOR_ADDRESS, SENT_FOR_SMTP = 0x0042, 0x0065, 0x5D02
DISPLAY_TO, DISPLAY_CC = 0x0E04, 0x0E03
SUBMIT_TIME, DELIVERY_TIME = 0x0039, 0x0E06
START_TIME, END_TIME = 0x0060, 0x0061  # an appointment's or meeting request's (PidTagStartDate, PidTagEndDate)
MESSAGE_CODEPAGE, INTERNET_CODEPAGE = 0x3FFD, 0x3FDE
DISPLAY_NAME, EMAIL_ADDRESS, SMTP_ADDRESS, RECIPIENT_TYPE = 0x3001, 0x3003, 0x39FE, 0x0C15
LONG_FILENAME, FILENAME, ATTACH_METHOD, ATTACH_DATA = 0x3707, 0x3704, 0x3705, 0x3701
TO, CC = 1, 2  # recipient types (blind copies are left out, as an .eml's Bcc header is)
NAME_MAP, NAME_GUIDS, NAME_ENTRIES = "__nameid_version1.0", "__substg1.0_00020102", "__substg1.0_00030102"
FIRST_NAMED = 0x8000  # the property id of a file's first named property
FIRST_OWN_GUID = 3  # GUID indexes below it stand for PS_MAPI and PS_PUBLIC_STRINGS, not the GUID stream
LOCATIONS = ((uuid.UUID("00062002-0000-0000-c000-000000000046"), 0x8208),  # PidLidLocation (PSETID_Appointment)
             (uuid.UUID("6ed8da90-450b-101b-98da-00aa003f1305"), 0x0002))  # PidLidWhere (PSETID_Meeting), older

FILETIME_EPOCH = datetime(1601, 1, 1, tzinfo=timezone.utc)


def msg_to_text(path: Path) -> tuple[str, str]:
    """(subject, text) of the Outlook message in ``path``."""
    with ole_file(path, extra="msg", stream=PROPERTIES, kind=".msg",
                  not_ole="not an Outlook message (a .msg file is an OLE compound file as Outlook saves it); a "
                          "message saved as .eml is read from an .eml file",
                  without=f"an Outlook message in it (no {PROPERTIES} stream): a Word .doc or Excel .xls file "
                          "named .msg?") as ole:
        return _Message(ole, (), "top").text()


class _Message:
    """One message of the file: the top-level one, or a message attached to another (``storage``: its path)."""

    def __init__(self, ole: Any, storage: tuple[str, ...], kind: str, forwards: int = 0,
                 named: dict[tuple[uuid.UUID, int], int] | None = None) -> None:
        self.ole, self.storage, self.forwards = ole, storage, forwards
        self.named = _named_properties(ole) if named is None else named  # the file's, shared by attached messages
        self.fixed = _fixed_properties(ole, (*storage, PROPERTIES), HEADER_BYTES[kind])
        internet = self.fixed.get((INTERNET_CODEPAGE, LONG))
        self.codepage = windows_codec(self.fixed.get((MESSAGE_CODEPAGE, LONG)) or internet)  # of its 8-bit strings
        self.html_codepage = windows_codec(internet or self.fixed.get((MESSAGE_CODEPAGE, LONG)))  # of its HTML body

    def text(self) -> tuple[str, str]:
        subject = one_line(self.string(SUBJECT))
        sent = ("on", self.time(SUBMIT_TIME) or self.time(DELIVERY_TIME))
        parts = [(word, value) for word, value in (("From", self.sender()), *self.recipients(), sent) if value]
        blocks = [f"## {', '.join(f'{word} {value}' for word, value in parts)}"] if parts else []
        if (start := self.moment(START_TIME)) is not None:  # a meeting or appointment: one paragraph, as in a calendar
            blocks.append(record_lines([("Event", subject), ("When", time_span(start, self.moment(END_TIME), "UTC")),
                                        ("Where", self.location())]))
        if body := self.body():
            blocks.append(body)
        attached, read, forwarded = [], [], []
        for storage, name in self.attachments():
            if self.ole.exists("/".join((*storage, EMBEDDED_MESSAGE))):
                inner = _Message(self.ole, (*storage, EMBEDDED_MESSAGE), "embedded", self.forwards + 1, self.named)
                if self.forwards >= MAX_FORWARDS:  # forwards inside forwards this deep are named, as in .eml files
                    attached.append(f"forwarded message {one_line(inner.string(SUBJECT))}".strip())
                    continue
                inner_subject, inner_text = inner.text()
                forwarded.append(f"Forwarded message: {inner_subject}\n\n{inner_text}" if inner_subject else inner_text)
                continue
            attached.append(name or "attachment")
            data = _stream(self.ole, (*storage, f"__substg1.0_{ATTACH_DATA:04X}{BINARY:04X}"))
            if name and data and (block := attachment_block(name, data)):
                read.append(block)
        if attached:
            blocks.append("Attachments: " + ", ".join(attached))
        return subject, "\n\n".join([*blocks, *read, *forwarded])

    def string(self, prop: int, storage: tuple[str, ...] | None = None) -> str:
        """A string property of this message (or of one of its recipients or attachments), '' when absent."""
        where = self.storage if storage is None else storage
        unicode = _stream(self.ole, (*where, f"__substg1.0_{prop:04X}{UNICODE:04X}"))
        if unicode is not None:
            return unicode.decode("utf-16-le", errors="replace").split("\x00", 1)[0]
        ansi = _stream(self.ole, (*where, f"__substg1.0_{prop:04X}{ANSI:04X}"))
        return ansi.decode(self.codepage, errors="replace").split("\x00", 1)[0] if ansi is not None else ""

    def sender(self) -> str:
        name = self.string(SENDER_NAME) or self.string(SENT_FOR_NAME)
        address = next((a for a in (self.string(SENDER_SMTP), self.string(SENDER_ADDRESS),
                                    self.string(SENT_FOR_SMTP), self.string(SENT_FOR_ADDRESS)) if "@" in a), "")
        return person(name, address)

    def recipients(self) -> list[tuple[str, str]]:
        """("to", "a, b") and ("cc", "c") from the recipient storages; the display lines when there are none."""
        found: dict[int, list[str]] = {TO: [], CC: []}
        for storage in self._children(RECIPIENT_PREFIX):
            kind = _fixed_properties(self.ole, (*storage, PROPERTIES), HEADER_BYTES["sub"]).get((RECIPIENT_TYPE, LONG))
            if kind in found:
                address = next((a for a in (self.string(SMTP_ADDRESS, storage), self.string(EMAIL_ADDRESS, storage))
                                if "@" in a), "")
                if who := person(self.string(DISPLAY_NAME, storage), address):
                    found[kind].append(who)
        to = ", ".join(found[TO]) or one_line(self.string(DISPLAY_TO))
        cc = ", ".join(found[CC]) or one_line(self.string(DISPLAY_CC))
        return [("to", to), ("cc", cc)]

    def location(self) -> str:
        """Where an appointment or meeting takes place (a named property), '' when it says nowhere."""
        for name in LOCATIONS:
            if name in self.named and (where := one_line(self.string(self.named[name]))):
                return where
        return ""

    def time(self, prop: int) -> str:
        """A time property of the message as an e-mail Date header writes it; '' when absent or out of range."""
        moment = self.moment(prop)
        return format_datetime(moment) if moment is not None else ""

    def moment(self, prop: int) -> datetime | None:
        """A time property of the message (UTC); None when absent or out of range."""
        value = self.fixed.get((prop, SYSTIME))
        if not value:
            return None
        try:
            return FILETIME_EPOCH + timedelta(microseconds=value // 10)
        except OverflowError:
            return None

    def body(self) -> str:
        """The HTML body read as a page, else the plain-text one, else the RTF one; quotes and signature left out.
        (Outlook writes the plain-text body of an HTML message itself, every link followed by its address in angle
        brackets and every picture by its file name: the page reads cleaner.)"""
        html = _stream(self.ole, (*self.storage, f"__substg1.0_{HTML:04X}{BINARY:04X}"))
        markup = html.decode(self.html_codepage, errors="replace") if html else self.string(HTML)
        text = html_to_text(markup)[1] if markup.strip() else ""
        if not text.strip():
            text = self.string(BODY)
        if not text.strip():
            text = self._rtf_body()
        return without_quotes(text.replace("\r\n", "\n").replace("\r", "\n")).strip()

    def _rtf_body(self) -> str:
        compressed = _stream(self.ole, (*self.storage, f"__substg1.0_{RTF_COMPRESSED:04X}{BINARY:04X}"))
        if not compressed:
            return ""
        decompress = require("compressed_rtf", "msg").decompress
        try:
            return rtf_text(decompress(compressed))[1]
        except DataError:
            raise
        except Exception as exc:  # compressed-rtf raises bare Exception for a bad header or checksum
            logger.info("message %s: its RTF body is not readable (%s)", "/".join(self.storage) or "(top)", exc)
            return ""

    def attachments(self) -> list[tuple[tuple[str, ...], str]]:
        """(storage, file name) of each attachment, in the message's order."""
        return [(storage, one_line(self.string(LONG_FILENAME, storage) or self.string(FILENAME, storage)
                                   or self.string(DISPLAY_NAME, storage)))
                for storage in self._children(ATTACHMENT_PREFIX)]

    def _children(self, prefix: str) -> list[tuple[str, ...]]:
        """This message's recipient or attachment storages (named ``prefix`` + 8 hex digits), in number order."""
        depth = len(self.storage)
        names = {entry[depth] for entry in self.ole.listdir(streams=False, storages=True)
                 if len(entry) == depth + 1 and tuple(entry[:depth]) == self.storage
                 and re.fullmatch(re.escape(prefix) + "[0-9A-Fa-f]{8}", entry[depth])}
        return [(*self.storage, name) for name in sorted(names, key=lambda n: int(n[len(prefix):], 16))]


def _named_properties(ole: Any) -> dict[tuple[uuid.UUID, int], int]:
    """(property set, numeric name) -> property id of the file's named properties ([MS-OXMSG] 2.2.3: the entry
    stream's 8-byte entries index the GUID stream; properties named by strings are not needed here)."""
    guids = _stream(ole, (NAME_MAP, NAME_GUIDS)) or b""
    entries = _stream(ole, (NAME_MAP, NAME_ENTRIES)) or b""
    found: dict[tuple[uuid.UUID, int], int] = {}
    for at in range(0, len(entries) - 7, 8):
        name, packed = struct.unpack_from("<II", entries, at)
        guid_at = 16 * (((packed >> 1) & 0x7FFF) - FIRST_OWN_GUID)
        if not packed & 1 and 0 <= guid_at <= len(guids) - 16:  # numeric names in a property set of the stream
            found[(uuid.UUID(bytes_le=guids[guid_at: guid_at + 16]), name)] = FIRST_NAMED + (packed >> 16)
    return found


def _stream(ole: Any, path: tuple[str, ...]) -> bytes | None:
    """A stream's bytes; None when it does not exist, is a storage, or is larger than a document part may be."""
    name = "/".join(path)
    if ole.get_type(name) != 2:  # olefile.STGTY_STREAM
        return None
    if ole.get_size(name) > MAX_PART_BYTES:
        logger.info("stream %s not read: larger than %d MB", name, MAX_PART_BYTES // 2**20)
        return None
    with ole.openstream(name) as handle:
        return handle.read()


def _fixed_properties(ole: Any, path: tuple[str, ...], header: int) -> dict[tuple[int, int], int]:
    """{(property id, type): value} of the fixed-size properties in a property stream (16-byte entries after its
    header: tag, flags, 8 bytes of value), the value as an unsigned little-endian integer of its 8 bytes."""
    data = _stream(ole, path) or b""
    found: dict[tuple[int, int], int] = {}
    for offset in range(header, len(data) - 15, 16):
        tag, _, value = struct.unpack_from("<IIQ", data, offset)
        kind = tag & 0xFFFF
        if kind == LONG:
            value &= 0xFFFFFFFF
        elif kind == BOOLEAN:
            value &= 0xFFFF
        found[(tag >> 16, kind)] = value
    return found
