"""Command palette (Ctrl+P) on a paradigm recording: jump to any episode's sessions or any probe,
under any system. Offers nothing on other recordings (the protocol-A provider covers those)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider

from memprobe_engine.paradigms.read.queries import PROBE_ABBREV, EpisodeRow, episode_rows, is_paradigm_recording
from memprobe_engine.replay import ReplaySession
from memprobe_tui.palette_match import match_words
from memprobe_tui.paradigms.episode_stepper import EpisodeScreen
from memprobe_tui.paradigms.episode_table import probe_cell
from memprobe_tui.paradigms.probe_inspector import ProbeScreen
from memprobe_tui.paradigms.render import fmt_score

Candidate = tuple[str, Callable[[], None], str]


def sessions_phrase(row: EpisodeRow) -> str:
    """``9 sessions``, or ``9 sessions, 0 ingested`` for a system that reads the dialogue whole."""
    planned = row.planned_sessions if row.planned_sessions is not None else row.sessions
    return f"{planned} sessions" + (f", {row.sessions} ingested" if row.sessions != planned else "")


class ParadigmCommands(Provider):
    """Candidates are built once per palette opening (``startup``), from the run index."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._candidates: list[Candidate] = []

    def _episode(self, session: ReplaySession, episode_id: str, system: str) -> None:
        self.app.push_screen(EpisodeScreen(session, episode_id, system))

    def _probe(self, session: ReplaySession, episode_id: str, system: str, probe_index: int) -> None:
        self.app.push_screen(ProbeScreen(session, episode_id, system, probe_index))

    async def startup(self) -> None:
        session = getattr(self.screen, "session", None)
        if not isinstance(session, ReplaySession) or not is_paradigm_recording(session) or not session.indexed:
            return
        found: list[Candidate] = []
        for row in episode_rows(session):
            cell = f"{row.episode_id} × {row.system}"
            found.append((f"episode {cell}", partial(self._episode, session, row.episode_id, row.system),
                          f"{row.paradigm} · {row.condition} · {sessions_phrase(row)} · accuracy "
                          f"{fmt_score(row.accuracy)}"))
            for probe in row.probes:
                name = PROBE_ABBREV.get(probe.probe_type, probe.probe_type)
                found.append((f"probe {cell} · P{probe.probe_index + 1} {name}",
                              partial(self._probe, session, row.episode_id, row.system, probe.probe_index),
                              f"{probe.probe_type} · score {probe_cell(probe).plain.split(' ', 1)[-1]}: gold beside "
                              "answer, sub-scores, re-run"))
        self._candidates = found

    async def discover(self) -> Hits:
        for name, run, help_text in self._candidates[:20]:
            yield DiscoveryHit(name, run, help=help_text)

    async def search(self, query: str) -> Hits:
        for name, run, help_text in self._candidates:
            matched = match_words(query, name)
            if matched is not None:
                yield Hit(matched[0], matched[1], run, help=help_text)
