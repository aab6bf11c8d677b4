"""An Outlook message saved as a file (.msg) reads as an .eml file does: subject, who wrote to whom and when, its own
words, its attachments. The files are written by another implementation of the format (aspose-email-foss's MSG
writer), so that the reader is checked against Outlook's layout, not against itself."""

from datetime import datetime, timedelta, timezone

import compressed_rtf
import pytest
from aspose.email_foss.msg import (
    RECIPIENT_TYPE_BCC,
    RECIPIENT_TYPE_CC,
    RECIPIENT_TYPE_TO,
    MapiMessage,
    MapiNamedProperty,
)
from aspose.email_foss.msg import PropertyTypeCode as Type

from models.errors import DataError
from pipeline.retrieval.documents import chunk_text, read_document
from pipeline.retrieval.strips import strips_with_sections
from tests.pipeline.conftest import assert_needs_extra, damaged_copies_read

REPLY = ("Hi Bob,\r\n\r\nThe refund window is 30 days from delivery; after that we offer store credit.\r\n\r\n"
         "On Mon, 4 Mar 2024 at 09:12, Bob <bob@example.com> wrote:\r\n> What is the refund window for damaged items?"
         "\r\n\r\nBest,\r\nAlice\r\n--\r\nAlice Smith | Support lead\r\n")
SUBJECT, SENDER_NAME, SENDER_ADDRESS, RTF_COMPRESSED, MESSAGE_CODEPAGE = 0x0037, 0x0C1A, 0x0C1F, 0x1009, 0x3FFD
APPOINTMENT = "00062002-0000-0000-c000-000000000046"  # PSETID_Appointment: PidLidLocation is its 0x8208


def outlook_message(subject: str = "", body: str = "", **properties) -> MapiMessage:
    """A Unicode message; ``properties``: more MAPI properties, ``p<hex id>=(type, value)``."""
    message = MapiMessage.create(subject, body)
    for prop, (kind, value) in properties.items():
        message.set_property(int(prop.removeprefix("p"), 16), kind, value)
    return message


def test_an_outlook_reply_reads_like_an_eml_file(tmp_path):
    message = outlook_message("Re: Refund window", REPLY, p0C1A=(Type.PTYP_STRING, "Alice Smith"),
                              p5D01=(Type.PTYP_STRING, "alice@example.com"),
                              p0039=(Type.PTYP_TIME, datetime(2024, 3, 4, 10, 0, tzinfo=timezone.utc)))
    message.add_recipient("bob@example.com", display_name="Bob", recipient_type=RECIPIENT_TYPE_TO)
    message.add_recipient("support@example.com", recipient_type=RECIPIENT_TYPE_CC)
    message.add_recipient("auditor@example.com", recipient_type=RECIPIENT_TYPE_BCC)  # a blind copy is not shown
    message.add_attachment("refunds.md", b"# Refunds\n\nDamaged items are refunded within 60 days.\n")
    message.add_attachment("logo.png", b"\x89PNG")
    message.add_embedded_message_attachment(outlook_message("Refund question", "What is the refund window?"))
    path = tmp_path / "reply.msg"
    message.save(path)
    title, text = read_document(path)
    assert title == "Re: Refund window"
    assert text == ("## From Alice Smith <alice@example.com>, to Bob <bob@example.com>, cc support@example.com, "
                    "on Mon, 04 Mar 2024 10:00:00 +0000\n\n"
                    "Hi Bob,\n\nThe refund window is 30 days from delivery; after that we offer store credit.\n\n"
                    "Best,\nAlice\n\nAttachments: refunds.md, logo.png\n\n"
                    "### Attachment: refunds.md\n\n#### Refunds\n\nDamaged items are refunded within 60 days.\n\n"
                    "Forwarded message: Refund question\n\nWhat is the refund window?")
    for left_out in ("damaged items?", "wrote:", "Support lead", "auditor", "PNG"):
        assert left_out not in text
    assert len(chunk_text(text)) == 1
    assert strips_with_sections(text)[0] == (
        "The refund window is 30 days from delivery; after that we offer store credit.",
        "From Alice Smith <alice@example.com>, to Bob <bob@example.com>, cc support@example.com, on Mon, 04 Mar 2024 "
        "10:00:00 +0000")


def test_the_html_body_is_read_before_outlooks_plain_copy_and_in_its_code_page(tmp_path):
    # Outlook's own plain-text copy of an HTML message follows each link with its address and each picture by name
    plain = "Read the refund policy<https://example.com/policy> before you write.\r\n[cid:image001.png]\r\n"
    html = ("<html><body><p>Read the <a href='https://example.com/policy'>refund policy</a> before you write.</p>"
            "<p>Caf\xe9 vouchers are not refunded.</p><img src='cid:image001.png'></body></html>").encode("cp1252")
    message = outlook_message("Policy", plain, p1013=(Type.PTYP_BINARY, html), p3FDE=(Type.PTYP_INTEGER32, 1252))
    path = tmp_path / "policy.msg"
    message.save(path)
    assert read_document(path)[1] == ("Read the refund policy before you write.\n\n"
                                      "Caf\xe9 vouchers are not refunded.")


def test_an_ansi_message_reads_in_its_code_page_and_an_rtf_only_body_is_read(tmp_path):
    rtf = rb"{\rtf1\ansi\ansicpg1252{\fonttbl{\f0 Arial;}}\pard The refund window is \b 30 days\b0 .\par}"
    message = MapiMessage.create(unicode_strings=False)
    message.set_property(MESSAGE_CODEPAGE, Type.PTYP_INTEGER32, 1251)
    message.set_property(SUBJECT, Type.PTYP_STRING8, "Возврат товара".encode("cp1251"))
    message.set_property(SENDER_NAME, Type.PTYP_STRING8, "Иван Петров".encode("cp1251"))
    # an Exchange sender's address is a directory name, not an e-mail address: only the name is shown
    message.set_property(SENDER_ADDRESS, Type.PTYP_STRING8, b"/O=EXCHANGELABS/OU=EXCHANGE/CN=RECIPIENTS/CN=IVAN")
    message.set_property(RTF_COMPRESSED, Type.PTYP_BINARY, compressed_rtf.compress(rtf, compressed=True))
    path = tmp_path / "ansi.msg"
    message.save(path)
    assert read_document(path) == ("Возврат товара", "## From Иван Петров\n\nThe refund window is 30 days.")


def test_a_meeting_request_says_when_the_meeting_starts_and_ends_and_where(tmp_path):
    when = datetime(2024, 3, 5, 14, 0, tzinfo=timezone.utc)
    message = outlook_message("Refund policy review", "Agenda: the new refund window.",
                              p001A=(Type.PTYP_STRING, "IPM.Schedule.Meeting.Request"),
                              p0C1A=(Type.PTYP_STRING, "Alice Smith"), p0039=(Type.PTYP_TIME, when - timedelta(days=1)),
                              p0060=(Type.PTYP_TIME, when), p0061=(Type.PTYP_TIME, when + timedelta(hours=1)))
    # named properties (their ids given by the file's name map): a string-named one first, then the location
    message.set_named_property(MapiNamedProperty.string("Keywords"), Type.PTYP_STRING, "refunds")
    message.set_named_property(MapiNamedProperty.numeric(0x8208, APPOINTMENT), Type.PTYP_STRING, " Room 4.2\r\n")
    path = tmp_path / "review.msg"
    message.save(path)
    assert read_document(path)[1] == ("## From Alice Smith, on Mon, 04 Mar 2024 14:00:00 +0000\n\n"
                                      "Event: Refund policy review\nWhen: Tue, 05 Mar 2024 14:00-15:00 (UTC)\n"
                                      "Where: Room 4.2\n\n"  # a paragraph of its own, as a calendar's events are
                                      "Agenda: the new refund window.")


def test_forwards_inside_forwards_are_read_ten_deep_then_named(tmp_path):
    inner = outlook_message("Forward 12", "the innermost words")
    for depth in range(11, 0, -1):
        outer = outlook_message(f"Forward {depth}", f"words at depth {depth}")
        outer.add_embedded_message_attachment(inner)
        inner = outer
    path = tmp_path / "deep.msg"
    inner.save(path)
    title, text = read_document(path)
    assert title == "Forward 1"
    assert "words at depth 11" in text and "Attachments: forwarded message Forward 12" in text
    assert "the innermost words" not in text


def test_files_that_are_not_outlook_messages_are_errors_naming_them(tmp_path):
    message = outlook_message("Refunds", "The refund window is 30 days. " * 200)
    whole = message.to_bytes()
    cut = tmp_path / "cut.msg"
    cut.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(DataError, match=r"cut\.msg: not a readable \.msg file"):
        read_document(cut)


def test_damaged_messages_raise_only_data_errors(tmp_path):
    message = outlook_message("Refunds", "The refund window is 30 days. " * 40,
                              p0C1A=(Type.PTYP_STRING, "Alice Smith"))
    message.add_attachment("refunds.md", b"# Refunds\n\nDamaged items are refunded within 60 days.\n")
    message.add_embedded_message_attachment(outlook_message("Question", "What is the window?"))
    # damage in padding or in streams not read leaves a readable message
    assert damaged_copies_read(message.to_bytes(), ".msg", tmp_path, copies=120, seed=7) > 0


def test_without_the_msg_extra_the_error_names_it(tmp_path, monkeypatch):
    path = tmp_path / "rtf.msg"  # a message whose body is RTF only: it needs both halves of the extra
    message = outlook_message("Refunds")
    body = compressed_rtf.compress(rb"{\rtf1 30 days}", compressed=True)
    message.set_property(RTF_COMPRESSED, Type.PTYP_BINARY, body)
    message.save(path)
    assert read_document(path)[1] == "30 days"
    assert_needs_extra(path, "compressed_rtf", "msg", monkeypatch)
    monkeypatch.undo()
    assert_needs_extra(path, "olefile", "msg", monkeypatch)


def test_an_outlook_template_reads_as_a_message(tmp_path):
    path = tmp_path / "refund-reply.oft"  # the same file format, saved as a template
    outlook_message("Refund reply", "The refund window is 30 days.").save(path)
    assert read_document(path) == ("Refund reply", "The refund window is 30 days.")
