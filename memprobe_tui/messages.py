"""Messages that workers post to screens. Workers never touch widgets: they compute in a thread (or
await the engine) and post one of these; the screen's handler, on the UI thread, updates widgets."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import RenderableType
from textual.message import Message

from memprobe_engine.llm.call_progress import CallProgress


class IndexProgress(Message):
    """The index pass has covered ``done`` of ``total`` lines."""

    def __init__(self, done: int, total: int) -> None:
        super().__init__()
        self.done, self.total = done, total


class Loaded(Message):
    """A worker finished computing ``data`` for the view called ``what`` (screens dispatch on it)."""

    def __init__(self, what: str, data: Any) -> None:
        super().__init__()
        self.what, self.data = what, data


class RecordingGrew(Message):
    """A followed recording has ``added`` new events; screens showing it redraw."""

    def __init__(self, added: int) -> None:
        super().__init__()
        self.added = added


class RescoreText(Message):
    """A piece of streamed re-score output (from ``stage``), or a progress note (``note=True``)."""

    def __init__(self, text: str, note: bool = False, stage: str | None = None) -> None:
        super().__init__()
        self.text, self.note, self.stage = text, note, stage


class RescoreStage(Message):
    """An attribution stage of a running re-score finished."""

    def __init__(self, mode: str, stage: int, verdict: str, reason: str | None) -> None:
        super().__init__()
        self.mode, self.stage, self.verdict, self.reason = mode, stage, verdict, reason


class RescoreScore(Message):
    """A running re-score produced a new judge score for ``mode``."""

    def __init__(self, mode: str, score: float | None, reason: str | None) -> None:
        super().__init__()
        self.mode, self.score, self.reason = mode, score, reason


class RescoreProgress(Message):
    """What the model call of a running re-run does before its reply streams (engine's CallProgress)."""

    def __init__(self, progress: CallProgress) -> None:
        super().__init__()
        self.progress = progress


class RescoreFinished(Message):
    """The re-score worker ended: ``outcome`` is done, cancelled or failed."""

    def __init__(self, outcome: str) -> None:
        super().__init__()
        self.outcome = outcome


class ShowText(Message):
    """Show ``lines`` full screen under ``title`` (re-applying the search ``query``). Panes and screens
    post it and the app pushes the text view, so no widget or base screen imports a screen above it."""

    def __init__(self, title: str, lines: Sequence[RenderableType], query: str = "", *, export_as: str = "",
                 data: object = None) -> None:
        super().__init__()
        self.title, self.lines, self.query = title, list(lines), query
        #: What an export of this text is named after (``settings``); empty: after the title.
        self.export_as = export_as
        #: What ``W`` writes as JSON (the settings' header, not their text); None: the text.
        self.data = data
