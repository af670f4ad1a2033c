"""Conversation events: the messages exchanged between the simulated user and the assistant."""

from __future__ import annotations

from typing import Literal

from memprobe_engine.events.base import EventBase


class Message(EventBase):
    """One utterance. ``task_index``/``turn`` locate it in the user's trajectory."""

    kind: Literal["message"] = "message"
    role: Literal["user", "assistant", "system"]
    content: str
    task_index: int | None = None
    turn: int | None = None
    #: For simulated-user messages: the simulator's own label (e.g. followup, clarify, satisfied)
    #: and whether it declared the task done.
    feedback_type: str | None = None
    is_done: bool | None = None
