"""An e-mail file (.eml) is read as its subject, who wrote to whom and when, and its own words."""

from email.message import EmailMessage

import pytest

from models.errors import DataError
from pipeline.retrieval.documents import chunk_text, read_document
from pipeline.retrieval.strips import strips_with_sections

REPLY = """\
Hi Bob,

The refund window is 30 days from delivery; after that we offer store credit.

On Mon, 4 Mar 2024 at 09:12, Bob <bob@example.com> wrote:
> What is the refund window for damaged items?
> Thanks

Best,
Alice
--\x20
Alice Smith | Support lead | +1 555 0100
"""


def message(**headers) -> EmailMessage:
    out = EmailMessage()
    for name, value in headers.items():
        out[name.replace("_", "-")] = value
    return out


def test_a_reply_reads_as_its_headers_and_own_words(tmp_path):
    mail = message(From="Alice <alice@example.com>", To="Bob <bob@example.com>", Cc="support@example.com",
                   Date="Mon, 04 Mar 2024 10:00:00 +0000", Subject="Re: Refund window", Message_ID="<1@example.com>")
    mail.set_content(REPLY)
    mail.add_alternative("<p>Hi Bob, <b>HTML copy</b></p>", subtype="html")
    mail.add_attachment(b"%PDF-1.4 policy", maintype="application", subtype="pdf", filename="refund-policy.pdf")
    path = tmp_path / "reply.eml"
    path.write_bytes(bytes(mail))
    title, text = read_document(path)
    assert title == "Re: Refund window"
    assert text == ("## From Alice <alice@example.com>, to Bob <bob@example.com>, cc support@example.com, "
                    "on Mon, 04 Mar 2024 10:00:00 +0000\n\n"
                    "Hi Bob,\n\nThe refund window is 30 days from delivery; after that we offer store credit.\n\n"
                    "Best,\nAlice\n\nAttachments: refund-policy.pdf")
    for left_out in ("damaged items", "wrote:", "Support lead", "HTML copy", "%PDF", "Content-Type", "boundary"):
        assert left_out not in text
    assert len(chunk_text(text)) == 1
    # who wrote it, and when, is the section each sentence sits in, never a sentence to quote
    assert strips_with_sections(text)[0] == (
        "The refund window is 30 days from delivery; after that we offer store credit.",
        "From Alice <alice@example.com>, to Bob <bob@example.com>, cc support@example.com, on Mon, 04 Mar 2024 "
        "10:00:00 +0000")


def test_attachments_of_readable_types_are_read_under_their_own_headings(tmp_path, caplog):
    mail = message(From="Alice <alice@example.com>", Subject="Policies", Message_ID="<2@example.com>")
    mail.set_content("Hi team,\n\nthe current policies are attached.\n")
    mail.add_attachment(b"# Refunds\n\nDamaged items are refunded within 60 days.\n", maintype="text",
                        subtype="markdown", filename="refunds.md")
    mail.add_attachment(b"zone,days\nEU,3-5\n", maintype="text", subtype="csv", filename="delivery.csv")
    mail.add_attachment(b"%PDF-1.4 cut short", maintype="application", subtype="pdf", filename="old-policy.pdf")
    mail.add_attachment(b"PK\x03\x04", maintype="application", subtype="zip", filename="archive.zip")
    mail.add_attachment(b"\x89PNG", maintype="image", subtype="png", filename="logo.png")
    path = tmp_path / "policies.eml"
    path.write_bytes(bytes(mail))
    with caplog.at_level("INFO", logger="pipeline.retrieval.email_text"):
        text = read_document(path)[1]
    assert text == ("## From Alice <alice@example.com>\n\nHi team,\n\nthe current policies are attached.\n\n"
                    "Attachments: refunds.md, delivery.csv, old-policy.pdf, archive.zip, logo.png\n\n"
                    "### Attachment: refunds.md\n\n#### Refunds\n\nDamaged items are refunded within 60 days.\n\n"
                    "### Attachment: delivery.csv\n\nzone: EU\ndays: 3-5")
    assert "attachment old-policy.pdf not read: old-policy.pdf: not a readable PDF" in caplog.text
    assert ("Damaged items are refunded within 60 days.", "Attachment: refunds.md › Refunds") in strips_with_sections(
        text)


def test_an_html_only_message_in_its_own_charset_is_read_as_a_page(tmp_path):
    mail = message(From="news@example.com", Subject="Café hours")
    mail.set_content("<html><head><style>p{}</style></head><body><h2>Opening hours</h2>"
                     "<p>The café opens at 8:00.</p></body></html>", subtype="html", charset="iso-8859-1")
    path = tmp_path / "news.eml"
    path.write_bytes(bytes(mail))
    assert b"caf\xe9" in path.read_bytes() or b"=E9" in path.read_bytes()  # not UTF-8 on disk
    title, text = read_document(path)
    assert title == "Café hours"
    assert text == "## From news@example.com\n\n## Opening hours\n\nThe café opens at 8:00."


def test_a_forwarded_message_is_read_after_the_body_and_outlook_quotes_are_cut(tmp_path):
    original = message(From="carol@example.com", Subject="Outage report", Date="Sun, 03 Mar 2024 22:00:00 +0000")
    original.set_content("The EU cluster was down from 21:10 to 21:40 UTC.")
    mail = message(From="dave@example.com", Subject="Fwd: Outage report")
    mail.set_content("See below.\n\n-----Original Message-----\nFrom: someone\nAn earlier message quoted whole.\n")
    mail.add_attachment(original)
    path = tmp_path / "fwd.eml"
    path.write_bytes(bytes(mail))
    _, text = read_document(path)
    assert text == ("## From dave@example.com\n\nSee below.\n\nForwarded message: Outage report\n\n"
                    "## From carol@example.com, on Sun, 03 Mar 2024 22:00:00 +0000\n\n"
                    "The EU cluster was down from 21:10 to 21:40 UTC.")


def test_an_attribution_wrapped_over_two_lines_goes_with_its_quote(tmp_path):
    mail = message(From="bob@example.com", Subject="Re: hours")
    mail.set_content("Yes, until 6 pm.\n\nOn Mon, 4 Mar 2024 at 09:12, Alice Smith\n<alice@example.com> wrote:\n"
                     "> Are you open late on Fridays?\n")
    path = tmp_path / "wrapped.eml"
    path.write_bytes(bytes(mail))
    assert read_document(path)[1] == "## From bob@example.com\n\nYes, until 6 pm."


def test_a_mislabelled_charset_does_not_stop_the_file(tmp_path):
    path = tmp_path / "odd.eml"
    path.write_bytes(b"From: x@example.com\nSubject: Odd\nContent-Type: text/plain; charset=x-unknown-8\n\n"
                     b"Price: 5 \xe2\x82\xac, caf\xe9\n")
    assert read_document(path) == ("Odd", "## From x@example.com\n\nPrice: 5 \u20ac, caf\ufffd")


def test_a_file_that_is_not_a_message_is_an_error_naming_it(tmp_path):
    path = tmp_path / "notes.eml"
    path.write_text("just some notes\nwithout any headers\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"notes\.eml: not an e-mail message"):
        read_document(path)


def mbox_entry(mail: EmailMessage) -> bytes:
    """One message as an mbox holds it: its "From " line, then the message with body lines that begin with "From "
    escaped (mboxrd)."""
    raw = bytes(mail).replace(b"\r\n", b"\n")
    escaped = b"\n".join(b">" + line if line.lstrip(b">").startswith(b"From ") else line for line in raw.split(b"\n"))
    return b"From MAILER-DAEMON Mon Mar  4 10:00:00 2024\n" + escaped.rstrip(b"\n") + b"\n\n"


def test_a_mailbox_reads_each_message_once_under_its_subject(tmp_path, caplog):
    question = message(From="bob@example.com", Subject="Refund window", Message_ID="<1@example.com>",
                       Date="Mon, 04 Mar 2024 09:12:00 +0000")
    question.set_content("What is the refund window for damaged items?\n")
    answer = message(From="alice@example.com", To="bob@example.com", Subject="Re: Refund window",
                     Message_ID="<2@example.com>")
    answer.set_content("From the day of delivery you have 30 days.\n\n> What is the refund window?\n")
    spam = message(From="win@example.net", Subject="You won", Message_ID="<3@example.net>", X_Gmail_Labels="Spam")
    spam.set_content("Claim your prize now.\n")
    path = tmp_path / "support.mbox"
    # the answer twice: a mailing list's copy of a mail also sent to you
    path.write_bytes(b"".join(mbox_entry(m) for m in (question, answer, spam, answer)))
    with caplog.at_level("INFO"):
        title, text = read_document(path)
    assert title == "support"
    assert text == ("## Refund window — From bob@example.com, on Mon, 04 Mar 2024 09:12:00 +0000\n\n"
                    "What is the refund window for damaged items?\n\n"
                    "## Re: Refund window — From alice@example.com, to bob@example.com\n\n"
                    "From the day of delivery you have 30 days.")  # the escaped ">From" line is the message's own
    assert "1 messages labelled Spam or Trash" in caplog.text
    assert strips_with_sections(text)[1] == ("From the day of delivery you have 30 days.",
                                             "Re: Refund window — From alice@example.com, to bob@example.com")


def test_a_file_that_is_not_a_mailbox_is_an_error_naming_it(tmp_path):
    path = tmp_path / "inbox.mbox"
    path.write_bytes(bytes(message(From="x@example.com", Subject="one message")))
    with pytest.raises(DataError, match=r"inbox\.mbox: not an mbox file .* an \.eml file"):
        read_document(path)


def forwarded(depth: int) -> str:
    """A message forwarding a message forwarding ... ``depth`` times."""
    text = "Subject: original\nContent-Type: text/plain\n\nThe first words.\n"
    for level in range(depth):
        text = (f"From: a@example.com\nSubject: fw {level}\nMIME-Version: 1.0\nContent-Type: multipart/mixed; "
                f"boundary=b{level}\n\n--b{level}\nContent-Type: text/plain\n\nLevel {level}.\n--b{level}\n"
                f"Content-Type: message/rfc822\n\n{text}\n--b{level}--\n")
    return text


def test_forwards_are_read_ten_deep_and_crafted_nesting_is_an_error_or_a_skipped_message(tmp_path, caplog):
    path = tmp_path / "chain.eml"
    path.write_text(forwarded(12), encoding="utf-8")
    text = read_document(path)[1]
    assert "Level 11." in text and "Level 1." in text and "Level 0." not in text  # the 11th forward inside is named
    assert text.endswith("Attachments: forwarded message fw 0")
    path.write_text(forwarded(600), encoding="utf-8")  # the email package parses nested parts recursively
    with pytest.raises(DataError, match=r"chain\.eml: MIME parts nested too deeply to read"):
        read_document(path)
    box = tmp_path / "box.mbox"
    box.write_text(f"From x\n{forwarded(600)}\nFrom y\nFrom: b@example.com\nSubject: ok\n\nA fine message.\n",
                   encoding="utf-8")
    with caplog.at_level("WARNING"):
        assert read_document(box)[1] == "## ok — From b@example.com\n\nA fine message."
    assert "left out 1 messages whose MIME parts are nested too deeply" in caplog.text


INVITATION = ("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nMETHOD:REQUEST\r\nBEGIN:VEVENT\r\nSUMMARY:Refund policy review\r\n"
              "DTSTART:20240305T130000Z\r\nDTEND:20240305T140000Z\r\nLOCATION:Room 4.2\r\nEND:VEVENT\r\n"
              "END:VCALENDAR\r\n")


def test_an_invitation_reads_its_events_once_under_the_message(tmp_path):
    mail = message(From="Alice <alice@example.com>", To="Bob <bob@example.com>", Date="Mon, 04 Mar 2024 10:00:00 +0000",
                   Subject="Invitation: Refund policy review")
    mail.set_content("You have been invited.")
    mail.add_alternative("<p>You have been invited.</p>", subtype="html")
    mail.add_alternative(INVITATION, subtype="calendar", params={"method": "REQUEST"})
    mail.add_attachment(INVITATION.encode(), maintype="application", subtype="ics", filename="invite.ics")  # again
    path = tmp_path / "invitation.eml"
    path.write_bytes(bytes(mail))
    assert read_document(path)[1] == (
        "## From Alice <alice@example.com>, to Bob <bob@example.com>, on Mon, 04 Mar 2024 10:00:00 +0000\n\n"
        "You have been invited.\n\nEvent: Refund policy review\nWhen: Tue, 05 Mar 2024 13:00-14:00 (UTC)\n"
        "Where: Room 4.2\n\nAttachments: invite.ics")  # the event one paragraph: one strip, title and all
    other = message(From="Alice <alice@example.com>", Subject="Next review")
    other.set_content("The next one.")
    other.add_attachment(INVITATION.replace("Room 4.2", "Room 5").encode(), maintype="text", subtype="calendar",
                         filename="next.ics")  # only attached: read as an attached file is
    path.write_bytes(bytes(other))
    assert read_document(path)[1].endswith("Attachments: next.ics\n\n### Attachment: next.ics\n\n"
                                           "Event: Refund policy review\nWhen: Tue, 05 Mar 2024 13:00-14:00 (UTC)\n"
                                           "Where: Room 5")


def test_an_apple_mail_message_file_reads_as_its_message(tmp_path):
    mail = message(From="Alice <alice@example.com>", Subject="Refund window", Date="Mon, 04 Mar 2024 10:00:00 +0000")
    mail.set_content("The refund window is 30 days.")
    data = bytes(mail)
    path = tmp_path / "12345.emlx"  # the message's length, the message, then Mail's property list
    path.write_bytes(f"{len(data)}\n".encode() + data + b'<?xml version="1.0"?>\n<plist version="1.0"><dict>'
                     b"<key>flags</key><integer>8590195713</integer></dict></plist>\n")
    assert read_document(path) == ("Refund window", "## From Alice <alice@example.com>, on Mon, 04 Mar 2024 "
                                                    "10:00:00 +0000\n\nThe refund window is 30 days.")
    path.write_bytes(data)
    with pytest.raises(DataError, match=r"12345\.emlx: not an Apple Mail message"):
        read_document(path)
