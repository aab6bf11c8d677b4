import argparse

import pytest

from models.cli_args import int_at_least
from pipeline.cli.main import main


def test_a_count_below_its_minimum_is_refused_naming_the_value_and_what_the_minimum_means():
    parse = int_at_least(0, "0: all of them")
    assert parse("0") == 0 and parse("12") == 12
    with pytest.raises(argparse.ArgumentTypeError, match=r"must be >= 0 \(0: all of them\), got -5"):
        parse("-5")
    with pytest.raises(argparse.ArgumentTypeError, match=r"must be a whole number, got '2\.5'"):
        parse("2.5")


@pytest.mark.parametrize(("argv", "named"), [
    (["grade-file", "p.jsonl", "--out", "o.jsonl", "--batch-size", "0"], "--batch-size: must be >= 1, got 0"),
    (["grade-file", "p.jsonl", "--out", "o.jsonl", "--max-line-chars", "0"], "--max-line-chars: must be >= 1"),
    (["eval", "--model", "default", "--data", "p.jsonl", "--limit", "-5"], "--limit: must be >= 0 (0: all of them)"),
    (["eval", "--model", "default", "--data", "p.jsonl", "--batch-size", "0"], "--batch-size: must be >= 1"),
    (["answerability", "--model", "default", "--data", "p.jsonl", "--out", "a", "--min-per-class", "0"],
     "--min-per-class: must be >= 1, got 0"),
    (["bench", "--model", "default", "--chunks", "0"], "--chunks: must be >= 1, got 0"),  # was a ZeroDivisionError
    (["bench", "--model", "default", "--repeats", "0"], "--repeats: must be >= 1, got 0"),  # was an IndexError
])
def test_commands_refuse_a_bad_count_before_reading_anything(capsys, argv, named):
    # a batch size of 0 used to mean "the default" and a --limit of -5 "every pair", silently
    with pytest.raises(SystemExit) as exited:
        main(argv)  # p.jsonl does not exist: the refusal comes before any file is opened
    assert exited.value.code == 2 and named in capsys.readouterr().err
