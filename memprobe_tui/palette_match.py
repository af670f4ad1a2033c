"""Palette matching by words in any order: ``mem0 user_001`` finds ``transcript user_001 × mem0``.

Textual's matcher is one fuzzy pass over the whole query, so the words had to come in the
candidate's order. Here each word of the query must match on its own (fuzzily, case-insensitive);
the hit's score is the mean of the words' scores and every matched letter is highlighted.

:class:`CandidateCommands` is every protocol's palette provider but for its candidates: it lists them
once per palette opening, offers the first ones before anything is typed, and matches them this way.
"""

from __future__ import annotations

from collections.abc import Callable

from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.content import Content
from textual.fuzzy import Matcher

from memprobe_engine.replay import ReplaySession

#: A palette entry: what it says, what it runs, its help line.
Candidate = tuple[str, Callable[[], None], str]

#: Candidates offered before anything is typed.
DISCOVER = 20


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


class CandidateCommands(Provider):
    """Candidates are built once per palette opening (``startup``), from the run index."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._candidates: list[Candidate] = []

    def candidates(self, session: ReplaySession) -> list[Candidate]:
        """The protocol's entries for the recording on screen (none where it is not the protocol's)."""
        raise NotImplementedError

    async def startup(self) -> None:
        session = getattr(self.screen, "session", None)
        if isinstance(session, ReplaySession):
            self._candidates = self.candidates(session)

    async def discover(self) -> Hits:
        for name, run, help_text in self._candidates[:DISCOVER]:
            yield DiscoveryHit(name, run, help=help_text)

    async def search(self, query: str) -> Hits:
        for name, run, help_text in self._candidates:
            matched = match_words(query, name)
            if matched is not None:
                yield Hit(matched[0], matched[1], run, help=help_text)
