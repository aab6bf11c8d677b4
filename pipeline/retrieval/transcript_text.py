"""The readable text of transcripts and subtitles (``.vtt`` WebVTT, ``.srt`` SubRip): who said what, and when.

Meeting recordings (Teams, Zoom, Google Meet), video captions and podcast transcripts come as cues: a few words
each, with a time range. Read cue by cue, a sentence is cut every few seconds and a speaker's name repeats on
every line; a question about what was decided needs the sentences whole. So cues are joined into paragraphs: a
new one when the speaker changes, after a pause of :data:`PAUSE_SECONDS` or more, or once a paragraph holds
:data:`PARAGRAPH_WORDS` words and its last cue ends a sentence. Each paragraph opens with its start time and its
speaker, ``[12:03] Alice Smith: ...``, so that an answer quoting it says where in the recording it was said.

The speaker is the cue's WebVTT voice (``<v Alice Smith>``, as Teams writes it) or, when most cues of the file
open with one (as Zoom writes them), a leading ``Name:``; a cue without one continues its speaker (captioning tools
often tag only a change of voice), unless it opens with ``>>``, broadcast captions' mark of a new speaker, who is
then unnamed unless a ``NAME:`` follows the mark. Styling tags, inline timestamps, positioning codes
(``{\\an8}``) and character references are removed; a line repeated from the cue before (rolling captions, as
YouTube's automatic ones roll) is read once. ``NOTE``, ``STYLE`` and ``REGION`` blocks and cue settings are not
text. A WebVTT header's own title (``WEBVTT - Quarterly review``) names the document.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

from models.errors import DataError

__all__ = ["srt_to_text", "vtt_to_text"]

PAUSE_SECONDS = 3.0
PARAGRAPH_WORDS = 80
TIMING = re.compile(r"^\s*((?:\d+:)?\d{1,2}:\d{2}[.,]\d{1,3})\s*-->\s*((?:\d+:)?\d{1,2}:\d{2}[.,]\d{1,3})")
VOICE = re.compile(r"<v(?:\.[\w.-]*)?[ \t]+([^>]*)>")  # <v Alice>, <v.loud Bob Jones>
TAG = re.compile(r"</?[a-zA-Z][^>]*>|<\d[\d:.]*>")  # styling tags and inline timestamps (<00:01.500>)
POSITION = re.compile(r"\{\\[^}]*\}")  # SubRip's ASS codes: {\an8}, {\i1}
NAMED_SPEAKER = re.compile(r"^([A-Z][\w'.-]*(?: [A-Z][\w'.-]*){0,3}):[ \t]+(?=\S)")  # "Alice Smith: ..."
SENTENCE_END = re.compile(r"[.!?][\"')\]]*$")
NOT_CUES = ("NOTE", "STYLE", "REGION")
TURN = re.compile(r"^>>+\s*")  # broadcast captions: ">>" opens a new speaker's words, ">>>" a new story


@dataclass
class _Cue:
    start: float
    end: float
    speaker: str
    text: str
    turn: bool = False  # opens with ">>": a new speaker, named only by the cue itself
    raw: list[str] = field(default_factory=list)  # its lines as written (turn marks kept), to spot rolled lines


def vtt_to_text(raw: str) -> tuple[str, str]:
    """(title, paragraphs) of a WebVTT file; the title is the header's own text after ``WEBVTT``, if any."""
    lines = _lines(raw)
    title = ""
    if lines and lines[0].startswith("WEBVTT"):
        title = lines[0][len("WEBVTT"):].strip().lstrip("-\u2013\u2014:").strip()
    return title, _paragraphs(_cues(lines))


def srt_to_text(raw: str) -> tuple[str, str]:
    """('', paragraphs) of a SubRip file."""
    return "", _paragraphs(_cues(_lines(raw)))


def _lines(raw: str) -> list[str]:
    """The file's lines, whatever its line ends, without a byte-order mark."""
    return raw.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n").split("\n")


def _cues(lines: list[str]) -> list[_Cue]:
    """Every cue: a timing line and the text lines after it, up to a blank line or the next timing line (a file
    that leaves out blank lines still reads; a SubRip number right before a timing line is not text)."""
    cues: list[tuple[float, float, list[str]]] = []
    block_start, skipping, in_cue = True, False, False  # a NOTE / STYLE / REGION opening a block skips it
    for at, line in enumerate(lines):
        if not line.strip():
            block_start, skipping, in_cue = True, False, False
            continue
        timing = TIMING.match(line)
        if block_start and not timing and line.split(maxsplit=1)[0] in NOT_CUES:
            skipping = True
        block_start = False
        if timing:
            skipping, in_cue = False, True
            cues.append((_seconds(timing.group(1)), _seconds(timing.group(2)), []))
        elif in_cue and not skipping and not (line.strip().isdigit() and at + 1 < len(lines)
                                              and TIMING.match(lines[at + 1])):
            cues[-1][2].append(line)
    header_end = next((at for at, line in enumerate(lines) if not line.strip()), len(lines))
    if not cues and any(line.strip() for line in lines[header_end:]):
        raise DataError("no cues found (no line like '00:00:01.000 --> 00:00:04.000'); a transcript is read from "
                        "WebVTT (.vtt) or SubRip (.srt) cues")
    return [cue for raw in cues for cue in _clean(*raw) if cue.text]


def _seconds(stamp: str) -> float:
    """Seconds of a cue time: ``01:02:03.500`` or ``02:03,500``."""
    parts = stamp.replace(",", ".").split(":")
    return sum(float(part) * 60 ** power for power, part in enumerate(reversed(parts)))


def _clean(start: float, end: float, lines: list[str]) -> list[_Cue]:
    """The cue of these text lines: its speaker (its voice tag) and its lines without markup; a cue holding
    several ``>>`` turns is one cue per turn, at the same times."""
    voice = next((found for line in lines if (found := VOICE.search(line))), None)
    speaker = " ".join(voice.group(1).split()) if voice else ""
    cleaned = [text for line in lines if (text := " ".join(html.unescape(TAG.sub("", POSITION.sub("", line))).split()))]
    cues = [_Cue(start, end, speaker, "")]
    for line in cleaned:
        if turn := TURN.match(line):
            words = line[turn.end():]
            named = NAMED_SPEAKER.match(words)
            cues.append(_Cue(start, end, named.group(1) if named else "", words[named.end():] if named else words,
                             turn=True, raw=[line]))
        else:
            cues[-1].text = f"{cues[-1].text}\n{line}" if cues[-1].text else line
            cues[-1].raw.append(line)
    return cues


def _named_speakers(cues: list[_Cue]) -> bool:
    """Whether the file names speakers in the text (``Alice: ...``): most cues open so, with a few names only."""
    names = [m.group(1) for cue in cues if (m := NAMED_SPEAKER.match(cue.text))]
    return len(names) * 2 > len(cues) and len(set(names)) <= max(2, len(names) // 3)


def _paragraphs(cues: list[_Cue]) -> str:
    """The cues joined into paragraphs (see the module), each led by its start time and speaker."""
    if cues and not any(cue.speaker for cue in cues) and _named_speakers(cues):
        for cue in cues:
            if named := NAMED_SPEAKER.match(cue.text):
                cue.speaker, cue.text = named.group(1), cue.text[named.end():]
    paragraphs: list[str] = []
    speaker, words, last_end, last_line = None, 0, 0.0, ""
    current: list[str] = []
    for cue in cues:
        lines = cue.text.split("\n")
        turn = cue.turn
        if cue.raw[0] == last_line and cue.speaker in ("", speaker):  # a rolling caption repeats its last line
            lines, turn = lines[1:], False  # (a repeated turn mark opens no new turn)
        if not lines:
            continue
        last_line = cue.raw[-1]
        text = " ".join(lines)
        speaker_changed = turn or (bool(cue.speaker) and cue.speaker != speaker)
        long_enough = words >= PARAGRAPH_WORDS and bool(current) and SENTENCE_END.search(current[-1]) is not None
        if current and (speaker_changed or cue.start - last_end >= PAUSE_SECONDS or long_enough):
            paragraphs.append(" ".join(current))
            current, words = [], 0
        if not current:
            speaker = cue.speaker if turn else cue.speaker or speaker
            current.append(f"[{_clock(cue.start)}]" + (f" {speaker}:" if speaker else ""))
        current.append(text)
        words += len(text.split())
        last_end = max(last_end, cue.end)
    if current:
        paragraphs.append(" ".join(current))
    return "\n\n".join(paragraphs)


def _clock(seconds: float) -> str:
    """12:03, or 1:02:03 past the first hour."""
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"
