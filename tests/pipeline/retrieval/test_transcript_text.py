"""Transcripts and subtitles read as paragraphs of who said what and when, sentences whole across cues."""

import time

import pytest

from models.errors import DataError
from pipeline.retrieval.documents import chunk_text, read_document
from pipeline.retrieval.ingest import collect_files
from pipeline.retrieval.strips import sentence_strips
from pipeline.retrieval.transcript_text import srt_to_text, vtt_to_text

TEAMS = """WEBVTT - Quarterly review

NOTE written by the meeting app
not said by anyone

STYLE
::cue { color: red }

1a2b/12-0
00:00:01.000 --> 00:00:04.500 align:start position:10%
<v Alice Smith>We agreed to ship the refund flow</v>

1a2b/13-0
00:00:04.600 --> 00:00:07.000
<v Alice Smith>on Friday the 14th.</v>

00:00:07.500 --> 00:00:09.000
<v.loud Bob Jones>Who owns the &amp; rollout?</v>

00:00:15.000 --> 00:00:17.000
<v Bob Jones>Sorry, <i>I</i> meant the <00:00:15.500><c.yellow>migration</c>.</v>
"""


def test_a_meeting_transcript_reads_as_who_said_what_and_when(tmp_path):
    path = tmp_path / "review.vtt"
    path.write_text(TEAMS, encoding="utf-8")
    title, text = read_document(path)
    assert title == "Quarterly review"
    assert text.split("\n\n") == [
        "[0:01] Alice Smith: We agreed to ship the refund flow on Friday the 14th.",  # one sentence over two cues
        "[0:07] Bob Jones: Who owns the & rollout?",  # the speaker changed
        "[0:15] Bob Jones: Sorry, I meant the migration.",  # the same speaker after a pause of 6 s
    ]
    assert "not said" not in text and "color" not in text
    strips = [s for chunk in chunk_text(text) for s in sentence_strips(chunk)]
    assert any("ship the refund flow on Friday the 14th" in strip for strip in strips)


def test_speakers_named_in_the_text_are_read_as_speakers_when_most_cues_name_one():
    zoom = ("WEBVTT\n\n1\n00:00:01.000 --> 00:00:03.000\nAlice Smith: Hello everyone.\n\n"
            "2\n00:00:03.100 --> 00:00:05.000\nAlice Smith: Let's start.\n\n"
            "3\n00:00:05.100 --> 00:00:08.000\nBob: Note: the budget is 5k.\n")
    assert vtt_to_text(zoom)[1] == ("[0:01] Alice Smith: Hello everyone. Let's start.\n\n"
                                   "[0:05] Bob: Note: the budget is 5k.")
    captions = ("1\n00:00:01,000 --> 00:00:03,000\nWarning: hot surface.\n\n"
                "2\n00:00:03,100 --> 00:00:05,000\nKeep children away.\n\n"
                "3\n00:00:05,100 --> 00:00:08,000\nThen clean it.\n")
    assert srt_to_text(captions)[1] == "[0:01] Warning: hot surface. Keep children away. Then clean it."  # no speakers


def test_broadcast_turn_marks_start_a_new_speaker_and_untagged_cues_continue_theirs():
    raw = ("WEBVTT\n\n00:00:01.000 --> 00:00:03.000\n>> THE MARKETS CLOSED HIGHER TODAY.\n\n"
           "00:00:03.000 --> 00:00:05.000\nSTOCKS ROSE TWO PERCENT.\n\n"
           "00:00:05.000 --> 00:00:07.000\n>> JOHN: WHAT DROVE THE RALLY?\n>> STRONG EARNINGS.\n\n"
           "00:00:07.000 --> 00:00:09.000\n>> STRONG EARNINGS.\nFROM BANKS.\n\n"  # rolled up a line
           "00:00:09.000 --> 00:00:10.000\nFROM BANKS.\n>> NEXT STORY.\n\n"
           "00:00:20.000 --> 00:00:22.000\n<v Alice>We ship on Monday.\n\n"
           "00:00:30.000 --> 00:00:32.000\nThen we test.\n")
    assert vtt_to_text(raw)[1] == (
        "[0:01] THE MARKETS CLOSED HIGHER TODAY. STOCKS ROSE TWO PERCENT.\n\n[0:05] JOHN: WHAT DROVE THE RALLY?"
        "\n\n[0:05] STRONG EARNINGS. FROM BANKS.\n\n[0:09] NEXT STORY.\n\n[0:20] Alice: We ship on Monday.\n\n"
        "[0:30] Alice: Then we test.")


def test_subrip_without_blank_lines_codes_and_hours_reads():
    srt = ("\ufeff1\r\n00:00:01,000 --> 00:00:02,500\r\n{\\an8}<i>The refund window</i>\r\n"
           "2\r\n00:00:02,600 --> 00:00:04,000\r\nis 14 days.\r\n\r\n"
           "3\r\n01:02:03,000 --> 01:02:06,000\r\n<font color=\"#fff\">- Really?</font>\r\n- Yes.\r\n")
    assert srt_to_text(srt) == ("", "[0:01] The refund window is 14 days.\n\n[1:02:03] - Really? - Yes.")


def test_rolling_captions_are_read_once():
    rolling = ("WEBVTT\nKind: captions\nLanguage: en\n\n00:00:00.000 --> 00:00:02.000\nso today we talk about\n\n"
               "00:00:02.000 --> 00:00:04.000\nso today we talk about\nrefunds and returns\n\n"
               "00:00:04.000 --> 00:00:06.000\nrefunds and returns\nand how long they take\n")
    assert vtt_to_text(rolling) == ("", "[0:00] so today we talk about refunds and returns and how long they take")


def test_a_long_monologue_is_cut_into_paragraphs_at_sentence_ends():
    cues = "".join(f"00:00:{i:02d}.000 --> 00:00:{i:02d}.900\nThis is sentence number {i} of the talk.\n\n"
                   for i in range(40))
    paragraphs = vtt_to_text("WEBVTT\n\n" + cues)[1].split("\n\n")
    assert len(paragraphs) > 2 and all(p.endswith(".") for p in paragraphs)
    assert paragraphs[1].startswith("[0:") and all(len(p.split()) <= 80 + 12 for p in paragraphs)


def test_a_file_without_cues_is_an_error_and_an_empty_transcript_reads_as_empty(tmp_path):
    path = tmp_path / "notes.srt"
    path.write_text("just some notes\n\nabout the meeting\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"notes\.srt: no cues found .*WebVTT \(\.vtt\) or SubRip \(\.srt\)"):
        read_document(path)
    assert vtt_to_text("WEBVTT\nKind: captions\n") == ("", "")
    assert vtt_to_text("WEBVTT\n\n00:00:01.000 --> 00:00:02.000\n<v Ann></v>\n") == ("", "")  # a cue saying nothing


def test_transcripts_are_collected_from_folders(tmp_path):
    (tmp_path / "call.vtt").write_text(TEAMS, encoding="utf-8")
    (tmp_path / "film.srt").write_text("1\n00:00:01,000 --> 00:00:02,000\nHello.\n", encoding="utf-8")
    assert [p.name for p in collect_files([tmp_path])] == ["call.vtt", "film.srt"]


def test_a_long_crafted_transcript_reads_in_linear_time():
    lines = "\n".join(f"00:00:{i % 60:02d}.000 --> 00:00:{i % 60:02d}.500\n<v S{i % 3}>word{i}" for i in range(50_000))
    start = time.perf_counter()
    text = vtt_to_text("WEBVTT\n" + lines + "\n" + "x\n" * 200_000)[1]  # one cue of 200,000 lines last
    assert "word49999" in text and time.perf_counter() - start < 10


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"])
def test_text_files_with_a_utf16_or_utf32_byte_order_mark_are_read_in_it(tmp_path, encoding):
    srt = tmp_path / "film.srt"
    srt.write_bytes("\ufeff1\r\n00:00:01,000 --> 00:00:02,000\r\nGrüße aus Köln.\r\n".encode(encoding))
    assert read_document(srt)[1] == "[0:01] Grüße aus Köln."
    note = tmp_path / "note.txt"
    note.write_bytes("\ufeffWindows Notepad saved this as Unicode.\r\n".encode(encoding))
    assert read_document(note)[1] == "Windows Notepad saved this as Unicode.\n"


def test_a_byte_order_mark_on_bytes_of_another_encoding_is_an_error_naming_it(tmp_path):
    odd = tmp_path / "odd.txt"
    odd.write_bytes(b"\xff\xfeA")  # a UTF-16 mark, then half a character
    with pytest.raises(DataError, match=r"odd\.txt: starts with a UTF-16 byte-order mark but is not UTF-16"):
        read_document(odd)
