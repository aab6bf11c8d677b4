"""Words that carry no content in a question: used for aspects, rewrites and whole-question matching."""

from __future__ import annotations

import re

__all__ = ["QUESTION_WORDS", "STOPWORDS", "content_terms"]

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
}


def content_terms(text: str) -> list[str]:
    """The question's content words, lower-cased, in order, without repeats or stopwords."""
    seen: list[str] = []
    for word in re.findall(r"\w+", text.lower()):
        if word not in STOPWORDS and word not in seen:
            seen.append(word)
    return seen

