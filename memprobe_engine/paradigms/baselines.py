"""Reference input protocols (evidence for the unified reader) and rule heuristics (no model at all).

Input protocols — each names what the reader sees for a probe, with the episode's sessions as the
retrievable units:

- ``full_context``: every session in order;
- ``naive_rag``: the top-``k`` sessions by embedding similarity to the question, shown in timeline
  order but numbered only within the retrieved subset (the reader learns nothing about position);
- ``time_aware_rag``: the same sessions, each labelled with its position in the whole timeline;
- ``oracle_rag``: the gold evidence — every non-filler session (encoding and perturbation parts),
  labelled with its position; a diagnostic upper bound, not a deployable system.

Session types are never shown to the reader: they would tell it which session holds the change.

Heuristics — shortcut detectors from the paper's App. E, answering every probe type in the reader's
JSON formats so the same scorer scores them:

- ``latest_value``: the candidate value (initial, new, distractors) mentioned last wins;
- ``always_update``: the new value always replaces the initial one;
- ``always_preserve``: the initial value never changes;
- ``source_preference``: only values a *user* turn states count; a candidate that appears only in
  assistant replies or tool outputs is reported as a rejected conflict from that source.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from memprobe_engine.events.paradigms import RetrievedItem
from memprobe_engine.llm.embeddings import cosine_top_k
from memprobe_engine.paradigms.protocol import session_transcript
from memprobe_engine.paradigms.reader import Evidence
from memprobe_engine.paradigms.suite import Episode, Session

if TYPE_CHECKING:
    from memprobe_engine.llm.embeddings import TextEmbedder

INPUT_PROTOCOLS = ("full_context", "naive_rag", "time_aware_rag", "oracle_rag")
HEURISTICS = ("latest_value", "always_update", "always_preserve", "source_preference")
#: Headings of the retrieved sessions in the reader's prompt, plain and time-aware.
RETRIEVED_HEADING = "RETRIEVED SESSIONS (a subset of the conversation history)"
TIME_AWARE_HEADING = "RETRIEVED SESSIONS (a subset, labelled with their place in the timeline)"
#: Session types that hold the gold evidence (everything that is not a filler).
ORACLE_TYPES = frozenset({"encoding", "perturbation", "perturbation_p1", "perturbation_p2"})
#: A session as the reader sees it (the same transcript session-granularity ingestion offers a system).
session_text = session_transcript


def _block(session: Session, label: str) -> str:
    return f"--- {label} ---\n{session_text(session)}"


def full_context_evidence(sessions: Sequence[Session]) -> Evidence:
    blocks = [_block(s, f"Session {i + 1} of {len(sessions)}") for i, s in enumerate(sessions)]
    return Evidence(heading="CONVERSATION HISTORY (every session, oldest first)", text="\n\n".join(blocks))


def _retrieved(sessions: Sequence[Session], chosen: Sequence[tuple[int, float | None]],
               label: Callable[[int, int], str]) -> tuple[str, list[RetrievedItem]]:
    """Blocks for the chosen (position, score) sessions in timeline order, and their retrieved items."""
    ordered = sorted(chosen)
    items = [RetrievedItem(id=f"session-{sessions[pos].session_idx}", text=session_text(sessions[pos]), score=score)
             for pos, score in chosen]
    blocks = [_block(sessions[pos], label(rank, pos)) for rank, (pos, _) in enumerate(ordered)]
    return "\n\n".join(blocks), items


def oracle_evidence(sessions: Sequence[Session]) -> Evidence:
    chosen = [(pos, None) for pos, s in enumerate(sessions) if s.session_type in ORACLE_TYPES]
    text, items = _retrieved(sessions, chosen, lambda _rank, pos: f"Session {pos + 1} of {len(sessions)}")
    return Evidence(heading="EVIDENCE SESSIONS (selected for this question, labelled with their place in the "
                            "timeline)", text=text, retrieved=items)


class SessionIndex:
    """Sessions of one episode as retrievable units, embedded once (the embedder caches vectors)."""

    def __init__(self, sessions: Sequence[Session], embedder: TextEmbedder) -> None:
        self.sessions = list(sessions)
        self._embedder = embedder
        self._matrix: npt.NDArray[np.float32] | None = None

    async def top_k(self, question: str, k: int) -> list[tuple[int, float]]:
        """(position, cosine) of the ``k`` sessions closest to ``question``, best first."""
        if not self.sessions or k <= 0:
            return []
        if self._matrix is None:
            self._matrix = np.asarray(await self._embedder.embed([session_text(s) for s in self.sessions]),
                                      dtype=np.float32)
        query = np.asarray(await self._embedder.embed([question]), dtype=np.float32)[0]
        return [(int(row), float(score)) for row, score in cosine_top_k(query, self._matrix,
                                                                        min(k, len(self.sessions)))]

    async def evidence(self, question: str, k: int, *, time_aware: bool) -> Evidence:
        chosen: list[tuple[int, float | None]] = list(await self.top_k(question, k))
        total = len(self.sessions)
        if time_aware:
            text, items = _retrieved(self.sessions, chosen, lambda _rank, pos: f"Session {pos + 1} of {total}")
            heading = TIME_AWARE_HEADING
        else:
            text, items = _retrieved(self.sessions, chosen, lambda rank, _pos: f"Retrieved session {rank + 1}")
            heading = RETRIEVED_HEADING
        return Evidence(heading=heading, text=text, retrieved=items)


# -- heuristics ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Belief:
    """What a heuristic concludes about the fact; every probe's answer is rendered from it."""

    current: str
    initial: str
    changed: bool
    source_class: str
    trigger: str
    conflict: str | None = None
    conflict_source: str = "unknown"
    conflict_status: str = "unknown"
    conflict_applies: bool = False


def _mentions(text: str, value: str) -> bool:
    return bool(value) and re.search(re.escape(value), text, re.IGNORECASE) is not None


def _candidates(episode: Episode) -> list[str]:
    spec = episode.latent_spec
    seen: list[str] = []
    for value in [spec.canonical_initial, spec.canonical_new, *spec.distractor_values]:
        if value and value not in seen:
            seen.append(value)
    return seen


def _last_mention(sessions: Sequence[Session], candidates: Sequence[str], roles: set[str]) -> str | None:
    """The candidate mentioned (in turns of ``roles``) in the latest session that mentions any; when
    several are, the first in ``candidates`` order (initial, new, distractors) — the upstream rule."""
    best, best_pos = None, -1
    for s_pos, session in enumerate(sessions):
        text = "\n".join(turn.content for turn in session.dialogue if turn.role in roles)
        for value in candidates:
            if _mentions(text, value) and s_pos > best_pos:
                best, best_pos = value, s_pos
    return best


def latest_value(episode: Episode, sessions: Sequence[Session]) -> Belief:
    initial = episode.latent_spec.canonical_initial
    current = _last_mention(sessions, _candidates(episode), {"user", "assistant", "tool_output"}) or initial
    changed = current != initial
    return Belief(current=current, initial=initial, changed=changed, source_class="user",
                  trigger=f"{current} was the most recently mentioned value" if changed else "",
                  conflict=current if changed else None, conflict_status="accepted" if changed else "unknown",
                  conflict_applies=changed)


def always_update(episode: Episode, sessions: Sequence[Session]) -> Belief:
    spec = episode.latent_spec
    return Belief(current=spec.canonical_new, initial=spec.canonical_initial, changed=True, source_class="user",
                  trigger=f"the user switched from {spec.canonical_initial} to {spec.canonical_new}",
                  conflict=spec.canonical_new, conflict_status="accepted", conflict_applies=True)


def always_preserve(episode: Episode, sessions: Sequence[Session]) -> Belief:
    initial = episode.latent_spec.canonical_initial
    return Belief(current=initial, initial=initial, changed=False, source_class="user", trigger="")


def source_preference(episode: Episode, sessions: Sequence[Session]) -> Belief:
    initial = episode.latent_spec.canonical_initial
    candidates = _candidates(episode)
    current = _last_mention(sessions, candidates, {"user"}) or initial
    changed = current != initial
    others = [v for v in candidates if v != current]
    rival = _last_mention(sessions, others, {"assistant", "tool_output"})
    rival_source = "unknown"
    if rival is not None:
        roles = {t.role for s in sessions for t in s.dialogue if _mentions(t.content, rival)}
        rival_source = "stale_tool" if "tool_output" in roles else "assistant" if "assistant" in roles else "unknown"
    return Belief(current=current, initial=initial, changed=changed, source_class="user",
                  trigger=f"the user stated {current}" if changed else "", conflict=rival,
                  conflict_source=rival_source, conflict_status="not_accepted" if rival else "unknown",
                  conflict_applies=False)


HEURISTIC_RULES: dict[str, Callable[[Episode, Sequence[Session]], Belief]] = {
    "latest_value": latest_value, "always_update": always_update, "always_preserve": always_preserve,
    "source_preference": source_preference,
}


def heuristic_answer(belief: Belief, probe_type: str, name: str) -> dict[str, Any]:
    """The belief as the reader's JSON answer for ``probe_type`` (same fields as the reader's schema)."""
    why = f"{name} heuristic (no model)"
    previous = belief.initial if belief.changed else None
    if probe_type == "current_value":
        return {"answer": belief.current, "reason": why}
    if probe_type == "previous_value":
        return {"answer": previous if previous is not None else "None", "reason": why}
    if probe_type == "change_detection":
        return {"changed": belief.changed, "current_value": belief.current, "previous_value": previous,
                "reason": why}
    if probe_type == "source":
        return {"source_description": f"the {belief.source_class} stated {belief.current}",
                "source_class": belief.source_class, "accepted": True, "reason": why}
    if probe_type == "conflict_value":
        return {"conflict_value_mentioned": belief.conflict is not None, "conflict_value": belief.conflict,
                "source_class": belief.conflict_source, "status_class": belief.conflict_status,
                "applies_to_target": belief.conflict_applies, "current_value": belief.current, "reason": why}
    if probe_type == "temporal":
        return {"changed": belief.changed, "old_value": previous, "new_value": belief.current if belief.changed
                else None, "trigger": belief.trigger, "reason": why, "timing": ""}
    raise ValueError(f"probe type {probe_type!r} has no heuristic answer")


__all__ = [
    "HEURISTICS",
    "HEURISTIC_RULES",
    "INPUT_PROTOCOLS",
    "ORACLE_TYPES",
    "Belief",
    "SessionIndex",
    "full_context_evidence",
    "heuristic_answer",
    "oracle_evidence",
    "session_text",
]
