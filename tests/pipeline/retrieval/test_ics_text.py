"""A calendar (.ics) reads as what its events say: what, when, how often, where, who, and the description."""

import random

import pytest

from models.errors import DataError
from pipeline.retrieval.archives import DocumentText
from pipeline.retrieval.documents import chunk_text, is_record_metadata, read_document
from tests.pipeline.conftest import assert_needs_extra

TEAM_CALENDAR = """\
BEGIN:VCALENDAR
VERSION:2.0
PRODID:-//crag-grader tests//EN
X-WR-CALNAME:Support team
BEGIN:VTIMEZONE
TZID:Europe/Berlin
BEGIN:STANDARD
DTSTART:19701025T030000
TZOFFSETFROM:+0200
TZOFFSETTO:+0100
END:STANDARD
END:VTIMEZONE
BEGIN:VEVENT
UID:review@example.com
SUMMARY:Refund policy review
DTSTART;TZID=Europe/Berlin:20240305T140000
DTEND;TZID=Europe/Berlin:20240305T150000
RRULE:FREQ=WEEKLY;INTERVAL=2;BYDAY=TU,TH;UNTIL=20240430T000000Z
EXDATE;TZID=Europe/Berlin:20240312T140000,20240314T140000
EXDATE;TZID=Europe/Berlin:20240402T140000
RDATE;VALUE=DATE:20240410
LOCATION:Room 4.2\\, Building B
ORGANIZER;CN=Alice Smith:mailto:alice@example.com
ATTENDEE;CN=Bob;ROLE=REQ-PARTICIPANT:mailto:bob@example.com
ATTENDEE:mailto:carol@example.com
DESCRIPTION:Agenda:\\n- the new refund
  window of 30 days\\n- store credit
BEGIN:VALARM
ACTION:DISPLAY
DESCRIPTION:Reminder
TRIGGER:-PT15M
END:VALARM
END:VEVENT
BEGIN:VEVENT
UID:review@example.com
RECURRENCE-ID;TZID=Europe/Berlin:20240319T140000
SUMMARY:Refund policy review
DTSTART;TZID=Europe/Berlin:20240320T090000
DURATION:PT90M
END:VEVENT
BEGIN:VEVENT
UID:offsite@example.com
SUMMARY:Company offsite
DTSTART;VALUE=DATE:20240610
DTEND;VALUE=DATE:20240613
STATUS:CANCELLED
END:VEVENT
BEGIN:VEVENT
UID:retro@example.com
SUMMARY:Release retro
DTSTART:20240329T160000Z
DTEND:20240330T100000Z
RRULE:FREQ=MONTHLY;BYDAY=-1FR;COUNT=3
END:VEVENT
BEGIN:VTODO
UID:page@example.com
SUMMARY:Update the refund page
DUE:20240301T170000Z
END:VTODO
END:VCALENDAR
""".replace("\n", "\r\n")


def test_a_team_calendar_reads_as_one_record_per_event(tmp_path):
    path = tmp_path / "team.ics"
    path.write_text(TEAM_CALENDAR, encoding="utf-8", newline="")
    title, text = read_document(path)
    assert title == "Support team"
    assert text.split("\n\x1e\n") == [
        "Event: Refund policy review\n"
        "When: Tue, 05 Mar 2024 14:00-15:00 (Europe/Berlin)\n"
        "Repeats: every 2 weeks on Tuesday and Thursday, until Tue, 30 Apr 2024\n"
        "Also: Wed, 10 Apr 2024 (all day)\n"
        "Except: Tue, 12 Mar 2024 14:00, Thu, 14 Mar 2024 14:00, Tue, 02 Apr 2024 14:00\n"  # given on two lines
        "Where: Room 4.2, Building B\n"  # escapes undone
        "Organizer: Alice Smith <alice@example.com>\n"
        "Attendees: Bob <bob@example.com>, carol@example.com\n"
        "Description: Agenda:\n- the new refund window of 30 days\n- store credit",  # folded line joined; no alarm
        # a moved occurrence: its own time, and which one it replaces
        "Event: Refund policy review\nWhen: Wed, 20 Mar 2024 09:00-10:30 (Europe/Berlin)\n"
        "Instead of: Tue, 19 Mar 2024 14:00 (Europe/Berlin)",
        "Event: Company offsite (cancelled)\nWhen: Mon, 10 Jun 2024 - Wed, 12 Jun 2024 (all day)",  # end exclusive
        "Event: Release retro\nWhen: Fri, 29 Mar 2024 16:00 - Sat, 30 Mar 2024 10:00 (UTC)\n"
        "Repeats: monthly on the last Friday, 3 times",
        "To do: Update the refund page\nDue: Fri, 01 Mar 2024 17:00 (UTC)",
    ]
    assert "TZOFFSET" not in text and "Reminder" not in text
    chunks = chunk_text(text)
    assert len(chunks) == 5 and chunks[0].startswith("Event: Refund policy review\n")  # an event is a chunk
    document = DocumentText.read(path)
    assert document.suffix == ".ics" and is_record_metadata({"format": "ics"})  # graded and quoted whole


def test_an_invitation_is_named_by_its_event_and_malformed_lines_lose_only_themselves(tmp_path):
    path = tmp_path / "invite.ics"
    path.write_text("BEGIN:VCALENDAR\nVERSION:2.0\nMETHOD:CANCEL\nBEGIN:VEVENT\nSUMMARY:Standup\nDTSTART:notadate\n"
                    "RRULE:FREQ=SOMETIMES\nthis line is not a property\nLOCATION:Room 1\nEND:VEVENT\nEND:VCALENDAR\n",
                    encoding="utf-8")
    assert read_document(path) == ("Standup", "Event: Standup (cancelled)\nWhere: Room 1")  # METHOD:CANCEL


def test_files_that_are_not_calendars_are_errors_naming_them(tmp_path):
    path = tmp_path / "notes.ics"
    path.write_text("Team notes, not a calendar\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"notes\.ics: not an iCalendar file"):
        read_document(path)
    path.write_text("BEGIN:VCALENDAR\nEND:VEVENT\nEND:VCALENDAR\n", encoding="utf-8")  # components that do not nest
    with pytest.raises(DataError, match=r"notes\.ics: not a readable iCalendar file"):
        read_document(path)


def test_damaged_calendars_raise_only_data_errors(tmp_path):
    rng = random.Random(3)
    read = 0
    for copy in range(200):
        damaged = list(TEAM_CALENDAR)
        for _ in range(rng.randint(1, 20)):
            damaged[rng.randrange(len(damaged))] = rng.choice(":;=,\\\"\r\n xZT0-")
        path = tmp_path / f"damaged-{copy}.ics"
        path.write_text("".join(damaged), encoding="utf-8", newline="")
        try:
            read_document(path)
            read += 1
        except DataError as exc:
            assert path.name in str(exc)
    assert read > 0


def test_without_the_rag_extra_the_error_names_it(tmp_path, monkeypatch):
    path = tmp_path / "team.ics"
    path.write_text(TEAM_CALENDAR, encoding="utf-8")
    assert_needs_extra(path, "icalendar", "rag", monkeypatch)
