"""Swapped opposites: a chunk about "right ventricular hypertrophy" for a question about the left one.

Cross-encoders and bi-encoders alike score such a chunk high (it shares nearly every word with the
question) and the default grader auto-accepted it (P 0.84 for "left ventricular hypertrophy treatment"). A
small list of opposites that change what a phrase refers to is checked: when the question says "left X" and
the chunk says "right X" but never "left X", the grade is kept but made uncertain, with the reason, so the
cascade asks the LLM (and grader-only runs do not treat the chunk as settled). Nothing is decided by this
rule: it only withholds an automatic acceptance. On the recipe's fusion and held-out pairs it fired on 4 of
6,749 pairs, all labelled irrelevant (anterior / posterior cruciate, acute / chronic pancreatitis and
hepatitis, internal / external environment); none of them was above the default's upper threshold, so
`crag eval` of the held-out queries is unchanged (`withheld_swapped_opposites`: 0 of 2,488).
"""

from __future__ import annotations

from collections import defaultdict
from itertools import pairwise

from grader.echo import STOPWORDS, words

__all__ = ["OPPOSITES", "contrast_reason"]

#: pairs of words whose swap changes what the following word refers to
OPPOSITES: tuple[tuple[str, str], ...] = (
    ("left", "right"), ("upper", "lower"), ("anterior", "posterior"), ("superior", "inferior"),
    ("medial", "lateral"), ("proximal", "distal"), ("male", "female"), ("men", "women"), ("acute", "chronic"),
    ("benign", "malignant"), ("increased", "decreased"), ("increase", "decrease"), ("maximum", "minimum"),
    ("north", "south"), ("east", "west"), ("northern", "southern"), ("eastern", "western"), ("import", "export"),
    ("input", "output"), ("inbound", "outbound"), ("internal", "external"), ("hyperthyroidism", "hypothyroidism"),
    ("hypertension", "hypotension"), ("hyperglycemia", "hypoglycemia"), ("systolic", "diastolic"),
    ("enable", "disable"), ("enabled", "disabled"), ("install", "uninstall"), ("upload", "download"),
    ("encrypt", "decrypt"), ("encryption", "decryption"), ("inflow", "outflow"), ("buy", "sell"),
)
_OPPOSITE: dict[str, set[str]] = defaultdict(set)
for _a, _b in OPPOSITES:
    _OPPOSITE[_a].add(_b)
    _OPPOSITE[_b].add(_a)


def contrast_reason(query: str, text: str) -> str | None:
    """Why ``text`` may speak of the opposite of what ``query`` asks ("right ventricular" for "left
    ventricular"), or None. The word after the opposite must be a content word, and the text must not also
    use the query's own phrase (a comparison of both sides is about the question)."""
    asked = words(query)
    said = words(text)
    bigrams = set(pairwise(said))
    before: dict[str, set[str]] = {}  # each word of the text -> the words up to 3 places before it
    for k, w in enumerate(said):
        before.setdefault(w, set()).update(said[max(0, k - 3):k])
    for word, head in pairwise(asked):
        if word not in _OPPOSITE or head in STOPWORDS or word in before.get(head, ()):  # "left and right X"
            continue
        for other in sorted(_OPPOSITE[word]):
            if (other, head) in bigrams:
                return f"the text speaks of '{other} {head}' where the question asks about '{word} {head}'"
    return None

