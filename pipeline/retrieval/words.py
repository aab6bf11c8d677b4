"""Words that carry no content in a question: used for aspects, rewrites and whole-question matching."""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["HOW_MEASURES", "QUESTION_WORDS", "STOPWORDS", "content_terms", "content_words"]

QUESTION_WORDS = {"what", "which", "who", "whom", "whose", "when", "where", "why", "how", "is", "are", "was",
                  "were", "do", "does", "did", "can", "could", "should", "would", "the", "a", "an", "of", "in",
                  "on", "for", "to", "please", "tell", "me", "about", "i", "my", "we", "our", "you", "your"}
# words that are never an aspect of a question: function words, quantifiers and light verbs
STOPWORDS = QUESTION_WORDS | {
    "am", "be", "been", "being", "has", "have", "had", "having", "will", "shall", "may", "might", "must", "and",
    "or", "but", "nor", "not", "no", "yes", "if", "then", "than", "that", "this", "these", "those", "there",
    "here", "it", "its", "they", "them", "their", "theirs", "he", "him", "his", "she", "her", "hers", "us", "at",
    "by", "from", "with", "into", "onto", "upon", "over", "under", "between", "among", "through", "during",
    "before", "after", "above", "below", "up", "down", "out", "off", "per", "via", "as", "so", "such", "very",
    "too", "also", "just", "only", "own", "same", "other", "another", "any", "all", "both", "each", "every",
    "either", "neither", "few", "many", "much", "more", "most", "less", "least", "several", "some", "lot",
    "lots", "one", "ones", "get", "gets", "got", "go", "goes", "went", "gone", "make", "makes", "made", "take",
    "takes", "took", "run", "runs", "ran", "use", "used", "uses", "come", "came", "give", "gave", "given",
    "know", "known", "called", "named", "mean", "means", "kind", "type", "thing", "things", "way", "ways",
    "happen", "happens", "happened", "happening",  # "what happens if ..." asks for an outcome it rarely names
    "ask", "asks", "asked", "asking", "need", "needs", "want", "wants",  # "do I need to ask for ...": the asker's
}


# "how long", "how many", "how old": after "how" these ask for a measure; they are the question's form, and an
# answer ("5-7 business days", "about 40") rarely repeats them; after "too" ("takes too long") they describe
# the problem, which the answer (a timeout option) names in its own words
HOW_MEASURES = {"long", "many", "much", "far", "often", "old", "big", "large", "small", "tall", "high", "fast",
                "soon", "early", "late", "deep", "wide", "heavy", "frequently"}


def content_words(words: Sequence[str]) -> list[str]:
    """``words`` (a question's, in order) without stopwords and without the measure of "how long" / "too long";
    case and repeats kept. An acronym that spells a stopword ("US", "IT") is content, unless the whole question
    is in capitals."""
    kept: list[str] = []
    previous = ""
    shouting = 2 * sum(w.isupper() for w in words) > len(words)
    for word in words:
        low = word.lower()
        acronym = not shouting and word.isupper() and len(word) >= 2
        if (low not in STOPWORDS or acronym) and not (previous in ("how", "too") and low in HOW_MEASURES):
            kept.append(word)
        previous = low
    return kept


def content_terms(text: str) -> list[str]:
    """The question's content words, lower-cased, in order, without repeats or stopwords."""
    return list(dict.fromkeys(content_words(re.findall(r"\w+", text.lower()))))

