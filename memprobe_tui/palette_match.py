"""Palette matching by words in any order: ``mem0 user_001`` finds ``transcript user_001 × mem0``.

Textual's matcher is one fuzzy pass over the whole query, so the words had to come in the
candidate's order. Here each word of the query must match on its own (fuzzily, case-insensitive);
the hit's score is the mean of the words' scores and every matched letter is highlighted.
"""

from __future__ import annotations

from textual.content import Content
from textual.fuzzy import Matcher


def match_words(query: str, candidate: str) -> tuple[float, Content] | None:
    """(score, higher is better; highlighted candidate), or None when some word of ``query`` does not match."""
    words = query.split()
    if not words:
        return None
    content = Content(candidate)
    total = 0.0
    for word in words:
        matcher = Matcher(word)
        score, offsets = matcher.fuzzy_search.match(word, candidate)
        if score <= 0:
            return None
        total += score
        for offset in offsets:
            if not candidate[offset].isspace():
                content = content.stylize(matcher.match_style, offset, offset + 1)
    return total / len(words), content
