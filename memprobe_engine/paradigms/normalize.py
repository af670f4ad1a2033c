"""Value normalization and matching for the protocol-B rule scorer (paper App. C.3, E.1).

A predicted value matches a gold value when, after removing surface variation that does not change
meaning, the gold value is contained in the prediction. The variation removed: letter case, a
leading sentence frame ("the user's gym is …"), leading articles, optional prepositions in time and
quantity expressions ("at 10 AM" = "10 AM", "about 5 retries" = "5 retries"), trailing
punctuation, repeated whitespace, number words ("five" = "5") and a unit after a number when the
number alone decides ("5" = "5 retries"). The rules carry over the upstream scorer's
(``src/eval/protocol.py``); where we go further (articles anywhere at the start, number words
anywhere in the text) it is listed in docs/protocol-b.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

#: Prepositions and hedges that may precede a time or quantity without changing it.
_OPTIONAL_PREPOSITIONS = re.compile(r"\b(?:at|on|in|by|around|approximately|about|roughly)\s+")
#: "the user's deadline is X" / "my gym was X" → "X": a possessive/article subject, then a copula.
_SENTENCE_FRAME = re.compile(r"^(?:the|a|an|my|our|their|its)\s+.*?\b(?:is|was|are|were|remains)\s+")
_LEADING_ARTICLE = re.compile(r"^(?:the|a|an)\s+")
_TRAILING_PUNCT = ".,;:!?"
_SPACES = re.compile(r"\s+")

#: Units that may follow a number; "5", "5 retries" and "5retries" all mean 5 when the number decides.
UNITS: tuple[str, ...] = (
    "retries", "retry", "times", "attempts", "tries",
    "ms", "seconds", "minutes", "hours", "days", "weeks", "months",
    "pm", "am",
    "gb", "mb", "kb", "tb",
    "px", "pt", "em", "rem",
    "%", "percent",
)
_NUMBER_WITH_UNIT = re.compile(r"^(\d+(?:\.\d+)?)\s*(?:" + "|".join(re.escape(u) for u in UNITS) + r")?\.?$")

NUMBER_WORDS: dict[str, str] = {
    "zero": "0", "one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6",
    "seven": "7", "eight": "8", "nine": "9", "ten": "10", "eleven": "11", "twelve": "12",
    "thirteen": "13", "fourteen": "14", "fifteen": "15", "sixteen": "16", "seventeen": "17",
    "eighteen": "18", "nineteen": "19", "twenty": "20", "thirty": "30", "forty": "40",
    "fifty": "50", "sixty": "60", "ninety": "90", "hundred": "100",
}
_NUMBER_WORD = re.compile(r"\b(" + "|".join(NUMBER_WORDS) + r")\b")


@lru_cache(maxsize=65536)
def normalize_value(text: str) -> str:
    """The comparable form of a value or a sentence holding one (cached: gold values repeat)."""
    s = text.lower().strip()
    s = _SENTENCE_FRAME.sub("", s)
    s = s.rstrip(_TRAILING_PUNCT)
    s = _OPTIONAL_PREPOSITIONS.sub("", s)
    s = _LEADING_ARTICLE.sub("", s)
    s = _NUMBER_WORD.sub(lambda m: NUMBER_WORDS[m.group(1)], s)
    return _SPACES.sub(" ", s).strip()


def leading_number(text: str) -> str | None:
    """The number a short value stands for: "5", "5 retries", "5%", or a number word first ("five …")."""
    s = text.strip().lower()
    found = _NUMBER_WITH_UNIT.match(s)
    if found:
        return found.group(1)
    words = s.split()
    return NUMBER_WORDS.get(words[0]) if words else None


def _has_number(number: str, text: str) -> bool:
    return re.search(r"(?<![\d.])" + re.escape(number) + r"(?![\d]|\.\d)", text) is not None


def contains(value: str, text: str) -> bool:
    """``value`` occurs in ``text``; a value that starts or ends with a digit must not continue a
    longer number there ("5 retries" is not in "15 retries", "3" is not in "3.5")."""
    if not (value[:1].isdigit() or value[-1:].isdigit()):
        return value in text
    start = text.find(value)
    while start != -1:
        before = text[start - 1] if start else ""
        after = text[start + len(value):start + len(value) + 2]
        if not (value[0].isdigit() and (before.isdigit() or before == ".")) and \
                not (value[-1].isdigit() and (after[:1].isdigit() or (after[:1] == "." and after[1:2].isdigit()))):
            return True
        start = text.find(value, start + 1)
    return False


@dataclass(frozen=True)
class Match:
    """Whether a gold value was found in a prediction, and how (recorded as the score's reason)."""

    matched: bool
    how: str


def value_match(gold: str, predicted: str) -> Match:
    """Does ``predicted`` state the ``gold`` value? Containment after normalization, plus numbers.

    Order of the checks: raw containment; normalized containment; a purely numeric prediction that
    is part of the gold ("5" for "5 retries"); the gold's number as a whole number in the
    prediction; the prediction's number in the gold.
    """
    gold_l, pred_l = gold.lower().strip(), predicted.lower().strip()
    if not gold_l:
        return Match(False, "empty gold value")
    if contains(gold_l, pred_l):
        return Match(True, "value present in answer")
    gold_n, pred_n = normalize_value(gold_l), normalize_value(pred_l)
    if gold_n and contains(gold_n, pred_n):
        return Match(True, f"normalized value present ({gold_n!r})")
    if pred_n and pred_n in gold_n and leading_number(pred_n):
        return Match(True, f"numeric answer {pred_n!r} is the gold {gold_n!r}")
    gold_number = leading_number(gold_l) or leading_number(gold_n)
    if gold_number and (_has_number(gold_number, pred_n) or _has_number(gold_number, pred_l)):
        return Match(True, f"number {gold_number} present")
    pred_number = leading_number(pred_l)
    if pred_number and _has_number(pred_number, gold_l):
        return Match(True, f"answer's number {pred_number} is in the gold")
    return Match(False, f"expected {gold!r} not found")


def keyword_hits(reference: str, text: str, *, min_len: int = 4) -> tuple[int, int]:
    """How many content words of ``reference`` (longer than 3 characters) occur in ``text``."""
    words = [w for w in re.split(r"[\s,]+", reference.lower()) if len(w.strip()) >= min_len]
    lowered = text.lower()
    return sum(1 for w in words if w in lowered), len(words)
