"""Small helpers for Pilot tests: wait until background work is done, read widget text."""

from __future__ import annotations

from textual.pilot import Pilot
from textual.widgets import Static


async def settle(pilot: Pilot[None], rounds: int = 3) -> None:
    """Let workers finish and their messages be handled (a few rounds: workers start workers)."""
    for _ in range(rounds):
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()


def text_of(pilot: Pilot[None], selector: str) -> str:
    """The plain text a Static-like widget currently shows."""
    widget = pilot.app.screen.query_one(selector, Static)
    return str(widget.render())
