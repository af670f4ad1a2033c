"""Command palette (Ctrl+P) on a paradigm recording: jump to any episode's sessions or any probe,
under any system. Offers nothing on other recordings (the protocol-A provider covers those)."""

from __future__ import annotations

from functools import partial

from memprobe_engine.paradigms.read.queries import PROBE_ABBREV, EpisodeRow, episode_rows, is_paradigm_recording
from memprobe_engine.replay import ReplaySession
from memprobe_tui.palette_match import Candidate, CandidateCommands
from memprobe_tui.paradigms.episode_stepper import EpisodeScreen
from memprobe_tui.paradigms.episode_table import probe_cell
from memprobe_tui.paradigms.probe_inspector import ProbeScreen
from memprobe_tui.paradigms.render import fmt_score


def sessions_phrase(row: EpisodeRow) -> str:
    """``9 sessions``, or ``9 sessions, 0 ingested`` for a system that reads the dialogue whole."""
    planned = row.planned_sessions if row.planned_sessions is not None else row.sessions
    return f"{planned} sessions" + (f", {row.sessions} ingested" if row.sessions != planned else "")


class ParadigmCommands(CandidateCommands):
    """Every episode's sessions and every probe, under every system."""

    def _episode(self, session: ReplaySession, episode_id: str, system: str) -> None:
        self.app.push_screen(EpisodeScreen(session, episode_id, system))

    def _probe(self, session: ReplaySession, episode_id: str, system: str, probe_index: int) -> None:
        self.app.push_screen(ProbeScreen(session, episode_id, system, probe_index))

    def candidates(self, session: ReplaySession) -> list[Candidate]:
        if not is_paradigm_recording(session) or not session.indexed:
            return []
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
        return found
