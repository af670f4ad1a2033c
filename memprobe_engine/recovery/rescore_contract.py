"""The re-score contract: what a replay UI's "re-run" panel asks for and how it is told the results.

A re-score re-runs the slot-filler, the judge and the attribution stages of one (user, system,
dimension) against the recorded store, appending new events (``judge_score.rescore_of`` points at
the original) — it never re-runs the system under test and never rewrites earlier events. While it
runs it reports through a :class:`RescoreSink`: streamed text pieces, stage verdicts, scores and
what the model call under way does before its reply streams. The
UI passes a sink whose methods post messages (they may be called from any thread or task).
``recovery/rescore.py`` implements it (:func:`rescore_dimension`); ``replay/`` re-exports the types.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from memprobe_engine.llm.call_progress import CallProgress


@dataclass(frozen=True)
class RescoreRequest:
    """Which case to re-score, in which recording, under which access modes."""

    recording: Path
    user_id: str
    system: str
    dimension: str
    modes: tuple[str, ...] = ("dump_all", "retrieve")
    #: One model spec for the slot-filler and both judges of this re-run (the UI asks before it
    #: runs); None: the configured ones.
    model: str | None = None


class RescoreSink(Protocol):
    """Receives a running re-score's output; every method must be cheap and thread-safe."""

    def text(self, piece: str, stage: str | None = None) -> None:
        """A piece of streamed model output; ``stage`` names the step producing it (slot_fill,
        judge, stage 1…) so a viewer can start a new section when it changes."""

    def note(self, message: str) -> None:
        """A progress line, e.g. which step starts now."""

    def stage(self, mode: str, stage: int, verdict: str, reason: str | None) -> None:
        """An attribution stage finished with ``verdict``."""

    def score(self, mode: str, score: float | None, reason: str | None) -> None:
        """The new judge score of ``mode`` (None: excluded)."""

    def progress(self, progress: CallProgress) -> None:
        """What the model call under way does before its reply streams: starting the model, waiting,
        evaluating the prompt (so many of so many tokens). Optional: a sink without it is not told."""


RescoreFunction = Callable[[RescoreRequest, RescoreSink], Awaitable[None]]
