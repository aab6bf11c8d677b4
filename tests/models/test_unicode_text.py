"""Text with UTF-16 halves (surrogates) is made storable: pairs become their character, a lone half U+FFFD."""

from models.unicode_text import whole_characters


def test_pairs_become_their_character_and_a_lone_half_is_replaced():
    assert whole_characters("smile \ud83d\ude00 and \udcff alone") == "smile \U0001f600 and \ufffd alone"
    assert whole_characters("plain text, caf\u00e9 \U0001f600") == "plain text, caf\u00e9 \U0001f600"
    assert whole_characters("\ude00\ud83d").encode("utf-8") == "\ufffd\ufffd".encode()  # halves out of order
