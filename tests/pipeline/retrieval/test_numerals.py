"""List numbers in letters and Roman numerals count as the formats that write them do."""

from pipeline.retrieval.numerals import letters, roman


def test_roman_numerals_and_their_limits():
    assert [roman(n) for n in (1, 4, 9, 14, 40, 90, 400, 1994, 3999)] == [
        "i", "iv", "ix", "xiv", "xl", "xc", "cd", "mcmxciv", "mmmcmxcix"]
    assert roman(0) == "0" and roman(4000) == "4000"  # no Roman numeral: the number as it is


def test_letters_count_as_html_and_opendocument_or_as_word():
    assert [letters(n) for n in (1, 26, 27, 28, 52, 53, 702, 703)] == ["a", "z", "aa", "ab", "az", "ba", "zz", "aaa"]
    assert [letters(n, repeated=True) for n in (1, 26, 27, 28, 53)] == ["a", "z", "aa", "bb", "aaa"]
    assert letters(0) == "0" and letters(-2) == "-2"
