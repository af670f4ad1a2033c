"""Whether a simulated user's reply speaks as the user or slips into the assistant's role.

A small model asked to play the user tends to answer as the assistant it was trained to be ("Great
choices! Let me know if there's anything else you need.", "Sure! I can help you write a note … How
can I assist you today?"). Such a reply discloses nothing about the user and must not steer the
episode: under the ``embedded`` framing (:mod:`.framing`) it is an unusable simulator reply, its
reason recorded. The markers are offers of help and service phrases a user does not say to the
assistant helping them; each is named in the reason so an audit can see what matched.
"""

from __future__ import annotations

import re

#: (name, pattern) of what an assistant says and a user asking for help does not.
_MARKERS: tuple[tuple[str, str], ...] = (
    ("offers help", r"\bhow (?:can|may|could) i (?:help|assist)\b"),
    ("offers help", r"\b(?:i(?:'|’)?d|i would|i(?:'|’)?ll|i will|i(?:'|’)?m|i am) (?:be )?(?:happy|glad|delighted) to "
                    r"(?:help|assist)\b"),
    ("offers help", r"\b(?:sure|certainly|of course|absolutely)[!,.]? i can help\b"),
    ("offers help", r"\bi can (?:help|assist) you\b"),
    ("offers more help", r"\b(?:is there )?anything else (?:you need|i can|you(?:'|’)?d like|you would like)\b"),
    ("offers more help", r"\blet me know if (?:there(?:'|’)?s anything|you have any (?:other |more )?questions|you "
                         r"need anything (?:else|more))\b"),
    ("asks how the advice works out", r"\b(?:works?|worked|goes|went|turns? out) (?:best |well |out )?for you\b"),
    ("offers more help", r"\bfeel free to (?:ask|reach out|let me know)\b"),
    ("offers more help", r"\bdon(?:'|’)?t hesitate to (?:ask|reach out|let me know)\b"),
    ("accepts thanks", r"^\W*you(?:'|’)?re (?:very |most )?welcome\b"),
    ("accepts thanks", r"\bi(?:'|’)?m glad (?:i|that i) could help\b"),
    ("wishes the user well", r"\b(?:i )?hope (?:this|that) helps\b"),
    ("praises the user's choice", r"^\s*(?:great|excellent|wonderful) (?:choice|choices|question)s?\b"),
    ("speaks as an AI", r"\bas an ai\b"),
    ("sums the user up", r"^\W*it (?:sounds|seems|looks) like you(?:(?:'|’)(?:d|re)| would| are)? (?:enjoy|like|want|"
                         r"need|are|already|have)\b"),
    ("suggests to the user", r"\bhave you (?:thought about|considered) (?:visiting|trying|checking|going)\b"),
)
ASSISTANT_MARKERS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern, re.IGNORECASE)) for name, pattern in _MARKERS)


#: A quoted passage: what the user would send someone else may well offer help ("… but I can help
#: you with a couple problems"), so quotes are not read.
QUOTED = re.compile(r"“[^”]*”|\"[^\"]*\"")


def out_of_role_reason(text: str) -> str | None:
    """Why ``text`` reads as the assistant's reply rather than the user's, or None when it does not."""
    own = QUOTED.sub(" ", text)
    found = [(name, match.group(0)) for name, pattern in ASSISTANT_MARKERS if (match := pattern.search(own))]
    if not found:
        return None
    names = ", ".join(dict.fromkeys(name for name, _ in found))
    quotes = "; ".join(f'"{quote}"' for _, quote in found[:3])
    return f"the reply speaks as the assistant, not as the user ({names}: {quotes})"


#: A run of this many words shared with another text is a copy, not a reaction to it.
COPY_RUN_WORDS = 6


def _word_list(text: str) -> list[str]:
    return re.findall(r"[\w']+", text.lower().replace("’", "'"))


def copied_run(text: str, source: str, run: int = COPY_RUN_WORDS) -> str | None:
    """The first run of ``run`` words that ``text`` repeats from ``source`` word for word (case and
    punctuation aside), or None. A user line that repeats the assistant's own message ("I hope this
    message finds you well." from the note it was shown) writes the assistant's part; one that repeats
    its bank entry copies the entry, which the release's rules forbid."""
    words = _word_list(text)
    seen = {tuple(window) for window in _windows(_word_list(source), run)}
    return next((" ".join(window) for window in _windows(words, run) if tuple(window) in seen), None)


def _windows(words: list[str], run: int) -> list[list[str]]:
    return [words[start:start + run] for start in range(len(words) - run + 1)]
