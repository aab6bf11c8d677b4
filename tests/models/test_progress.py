"""Progress on stderr: lines (not carriage-return bars) where stderr is not a terminal, nothing for a quick step."""

import time

from models import progress as progress_module
from models.progress import progress, stage


def test_a_quick_step_writes_nothing_where_stderr_is_not_a_terminal(capsys):
    assert list(progress(range(5), desc="reading documents", total=5, unit="file")) == [0, 1, 2, 3, 4]
    assert capsys.readouterr().err == ""  # was tqdm's "reading documents: 0%|" and a carriage return in every log


def test_a_slow_step_writes_whole_lines(capsys, monkeypatch):
    monkeypatch.setattr(progress_module, "FALLBACK_EVERY_S", 0.01)
    for _ in progress(range(3), desc="grading", total=3, unit="pair"):
        time.sleep(0.02)
    err = capsys.readouterr().err
    assert "grading: 1/3 pair\n" in err and "\r" not in err


def test_progress_and_stages_are_silenced_by_the_environment(capsys, monkeypatch):
    monkeypatch.setenv("CRAG_NO_PROGRESS", "1")
    monkeypatch.setattr(progress_module, "FALLBACK_EVERY_S", 0.0)
    with stage("exporting"):
        assert list(progress(iter("ab"), desc="x")) == ["a", "b"]
    assert capsys.readouterr().err == ""


def test_a_stage_says_when_it_starts_and_how_long_it_took(capsys):
    with stage("exporting"):
        pass
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "exporting ..." and err[1].startswith("exporting: done in ") and err[1].endswith(" s")
