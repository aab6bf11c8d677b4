"""The readable text of an iCalendar file (``.ics``: a calendar's export, a meeting invitation), read with
icalendar (in the ``rag`` extra).

Read raw, a calendar is property lines (``DTSTART;TZID=Europe/Berlin:20240305T140000``), escapes and time zone
rules. Each event is written as a record instead, as a table's row is (:mod:`pipeline.retrieval.table_text`): what a
reader of the invitation looks for, a ``name: value`` line each, so that the event is one chunk and one strip,
graded and quoted whole (a line "Where: Room 4.2" alone would not say what takes place there)::

    Event: Refund policy review
    When: Tue, 05 Mar 2024 14:00-15:00 (Europe/Berlin)
    Repeats: every 2 weeks on Tuesday and Thursday, until Tue, 30 Apr 2024
    Where: Room 4.2, Building B
    Organizer: Alice Smith <alice@example.com>
    Attendees: Bob <bob@example.com>, carol@example.com
    Description: Agenda: ...

A cancelled event says so ("Event: Standup (cancelled)"), a moved occurrence of a repeating one says which it
replaces ("Instead of: ..."), one repeating with exceptions names them ("Except: ...", "Also: ..."), an all-day event
names its days; attendees past 20 are counted. To-dos read the same way ("To do: ...", "Due: ..."), journal entries
as their summary and text; time zone definitions and alarms are not content. The calendar's name
(``X-WR-CALNAME``) names the document, else its only entry's summary. A line that is not a content line (damaged) is
left out; a file that is not an iCalendar file, or whose components no longer nest, is an error.
"""

from __future__ import annotations

import logging
import re
from datetime import date, datetime, timedelta
from typing import Any

from models.deps import require
from models.errors import DataError
from pipeline.retrieval.email_text import one_line, person
from pipeline.retrieval.table_text import join_records, record_lines

__all__ = ["calendar_records", "ics_to_text", "time_span"]

logger = logging.getLogger(__name__)

FOLDED = re.compile(r"\r?\n[ \t]")  # a long line continues on the next after one space or tab (RFC 5545 3.1)
CONTENT_LINE = re.compile(r'[A-Za-z0-9-]+(?:;[A-Za-z0-9-]+=(?:"[^"]*"|[^";:,]*)(?:,(?:"[^"]*"|[^";:,]*))*)*:',
                          re.ASCII)  # NAME;PARAM=value,"quoted: value":... (a damaged line is left out, not fatal)

DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
WEEKDAYS = {"MO": "Monday", "TU": "Tuesday", "WE": "Wednesday", "TH": "Thursday", "FR": "Friday", "SA": "Saturday",
            "SU": "Sunday"}
ORDINALS = {1: "first", 2: "second", 3: "third", 4: "fourth", 5: "fifth", -1: "last", -2: "second to last"}
FREQUENCIES = {"SECONDLY": ("every second", "seconds"), "MINUTELY": ("every minute", "minutes"),
               "HOURLY": ("hourly", "hours"), "DAILY": ("daily", "days"), "WEEKLY": ("weekly", "weeks"),
               "MONTHLY": ("monthly", "months"), "YEARLY": ("yearly", "years")}
KINDS = {"VEVENT": "Event", "VTODO": "To do", "VJOURNAL": "Journal"}
MAX_ATTENDEES = MAX_DATES = 20  # named; the rest counted


def ics_to_text(raw: str) -> tuple[str, str]:
    """(title, records) of an iCalendar file's text: its calendar name, else its only entry's summary ('' when
    neither), and its events, to-dos and journal entries, one record each (``RECORD_SEPARATOR`` between)."""
    title, records = calendar_records(raw)
    return title, join_records(records)


def calendar_records(raw: str) -> tuple[str, list[str]]:
    """(title, one record per event, to-do or journal entry) of an iCalendar file's text."""
    icalendar = require("icalendar", "rag")
    if "BEGIN:VCALENDAR" not in raw[:4096].upper():
        raise DataError("not an iCalendar file (it does not begin a VCALENDAR); an .ics file is a calendar "
                        "export or an invitation")
    lines = FOLDED.sub("", raw).splitlines()
    content = [line for line in lines if CONTENT_LINE.match(line)]
    if dropped := sum(1 for line in lines if line.strip()) - len(content):
        logger.info("left out %d lines that are not iCalendar content lines (NAME;PARAM=...:value)", dropped)
    try:
        calendars = icalendar.Calendar.from_ical("\r\n".join(content), multiple=True)
    except Exception as exc:  # icalendar raises ValueError, KeyError... for lines it cannot parse
        raise DataError(f"not a readable iCalendar file ({type(exc).__name__}: {exc})") from exc
    records: list[str] = []
    summaries: list[str] = []
    name = ""
    for calendar in calendars:
        name = name or one_line(str(calendar.get("X-WR-CALNAME") or ""))
        cancelled = str(calendar.get("METHOD") or "").upper() == "CANCEL"
        for component in calendar.subcomponents:
            if component.name in KINDS:
                summary, record = _component_record(component, cancelled)
                summaries.append(summary)
                records.append(record)
    return name or (summaries[0] if len(summaries) == 1 else ""), records


def _component_record(component: Any, cancelled: bool) -> tuple[str, str]:
    """(summary, record) of one event, to-do or journal entry."""
    summary = one_line(str(component.get("SUMMARY") or ""))
    status = str(component.get("STATUS") or "").upper()
    what = (summary or "untitled") + (" (cancelled)" if cancelled or status == "CANCELLED" else "")
    fields = [(KINDS[component.name], what)]
    start, zone = _time(component, "DTSTART")
    end = _time(component, "DTEND")[0]
    if end is None and isinstance(start, date) and isinstance(duration := _value(component, "DURATION"), timedelta):
        end = start + duration
    if start is not None:
        fields.append(("When", time_span(start, end, zone)))
    if (due := _time(component, "DUE"))[0] is not None:
        fields.append(("Due", time_span(due[0], None, due[1])))
    if isinstance(rule := _value(component, "RRULE"), dict):
        fields.append(("Repeats", _repeats(rule)))
    for name, word in (("RDATE", "Also"), ("EXDATE", "Except")):
        days = _dates(component, name)
        fields.append((word, _listed([time_span(day, None, "") for day in days], MAX_DATES)))
    if (replaced := _time(component, "RECURRENCE-ID"))[0] is not None:
        fields.append(("Instead of", time_span(replaced[0], None, replaced[1])))
    fields.append(("Where", one_line(str(component.get("LOCATION") or ""))))
    if (organizer := component.get("ORGANIZER")) is not None:
        fields.append(("Organizer", _person(organizer)))
    attendees = component.get("ATTENDEE")
    attendees = attendees if isinstance(attendees, list) else [attendees] if attendees is not None else []
    fields.append(("Attendees", _listed([who for attendee in attendees if (who := _person(attendee))],
                                        MAX_ATTENDEES)))
    description = "\n".join(line.rstrip() for line in str(component.get("DESCRIPTION") or "").splitlines()).strip()
    fields.append(("Description", description))
    return summary, record_lines(fields)


def _listed(items: list[str], limit: int) -> str:
    """At most ``limit`` items, the rest counted ("a, b and 3 more")."""
    more = len(items) - limit
    return ", ".join(items[:limit]) + (f" and {more} more" if more > 0 else "")


def _value(component: Any, name: str) -> Any:
    """A property's decoded value; None when absent or malformed (one line's loss, not the calendar's)."""
    if name not in component:
        return None
    try:
        return component.decoded(name)
    except Exception:  # icalendar raises its own errors for a broken property
        return None


def _dates(component: Any, name: str) -> list[date]:
    """The dates or times of a list property (EXDATE, RDATE; it may appear on several lines); [] when absent or
    malformed."""
    try:
        found = component.get(name)
        lists = found if isinstance(found, list) else [found] if found is not None else []
        return [value.dt for listed in lists for value in listed.dts if isinstance(value.dt, date)]
    except Exception:  # icalendar raises its own errors for a broken property
        return []


def _time(component: Any, name: str) -> tuple[date | None, str]:
    """(a time property's date or datetime, the zone it is given in: its TZID, "UTC" for a UTC time, '' for a
    floating one); (None, '') when absent or malformed."""
    value = _value(component, name)
    if not isinstance(value, date):
        return None, ""
    tzid = getattr(component.get(name), "params", {}).get("TZID")
    if tzid:
        return value, one_line(str(tzid))
    return value, "UTC" if isinstance(value, datetime) and value.utcoffset() == timedelta(0) else ""


def time_span(start: Any, end: Any, zone: str) -> str:
    """``start`` to ``end`` as a reader says it: one day's times once ("Tue, 05 Mar 2024 14:00-15:00"), all-day
    dates by their days (an end date is exclusive in iCalendar), the zone after."""
    if not isinstance(start, date):
        return ""
    if not isinstance(start, datetime):
        last = end - timedelta(days=1) if isinstance(end, date) and not isinstance(end, datetime) else start
        days = _day(start) if last <= start else f"{_day(start)} - {_day(last)}"
        return f"{days} (all day)"
    text = f"{_day(start)} {start:%H:%M}"
    if isinstance(end, datetime) and (end.tzinfo is None) == (start.tzinfo is None) and end > start:
        text += f"-{end:%H:%M}" if end.date() == start.date() else f" - {_day(end)} {end:%H:%M}"
    return f"{text} ({zone})" if zone else text


def _day(value: date) -> str:
    """A date as an e-mail's Date header names it, in English whatever the locale: ``Tue, 05 Mar 2024``."""
    return f"{DAYS[value.weekday()]}, {value.day:02d} {MONTHS[value.month - 1]} {value.year}"


def _repeats(rule: Any) -> str:
    """A recurrence rule in words: "every 2 weeks on Tuesday and Thursday, until Tue, 30 Apr 2024"."""
    frequency = str((rule.get("FREQ") or [""])[0]).upper()
    if frequency not in FREQUENCIES:
        return ""
    once, unit = FREQUENCIES[frequency]
    interval = (rule.get("INTERVAL") or [1])[0]
    text = once if interval in (1, "1") else f"every {interval} {unit}"
    days = [_weekday(str(day)) for day in rule.get("BYDAY") or []]
    if days := [day for day in days if day]:
        text += " on " + (days[0] if len(days) == 1 else ", ".join(days[:-1]) + " and " + days[-1])
    if month_days := rule.get("BYMONTHDAY"):
        text += " on day " + ", ".join(str(day) for day in month_days)
    if (until := (rule.get("UNTIL") or [None])[0]) is not None and isinstance(until, date):
        text += f", until {_day(until)}"
    elif count := (rule.get("COUNT") or [None])[0]:
        text += f", {count} times"
    return text


def _weekday(day: str) -> str:
    """``TU`` -> "Tuesday", ``1MO`` -> "the first Monday", ``-1FR`` -> "the last Friday"; '' for anything else."""
    name = WEEKDAYS.get(day[-2:].upper(), "")
    number = day[:-2].lstrip("+")
    if not name or not number:
        return name
    try:
        return f"the {ORDINALS.get(int(number), f'{int(number)}th')} {name}"
    except ValueError:
        return ""


def _person(address: Any) -> str:
    """An organizer or attendee as an e-mail header writes a person: ``Name <address>``; '' for a malformed one."""
    try:
        mail, name = str(address), str(address.params.get("CN") or "")
    except Exception:  # icalendar raises its own errors for a broken property
        return ""
    return person(name, mail[len("mailto:"):] if mail.lower().startswith("mailto:") else mail)
