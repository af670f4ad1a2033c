"""Keys typed while a recording loads are kept and applied when its screen is ready.

Textual hands a key at once to the screen on top. While a recording loads that is the app's blank
first screen, or an overview whose table is still empty, so `j` Enter typed during a 5 s load moved
no cursor and opened nothing (issue 36). :class:`TypeAheadApp` holds such keys while
:meth:`~TypeAheadApp.keys_wait` says so — no screen pushed yet, or the one on top has ``holds_keys``
set — and a screen that stops holding calls :meth:`~TypeAheadApp.release_keys`. The held keys are then
applied in the order typed, each finished before the next: through the bindings Textual would try
(priority bindings from the app down, then the focused widget's chain up), because a key merely
re-posted is forwarded to the focused widget's queue and would race the next one (`j` still in the
table's queue while Enter's priority binding already opens the row under the cursor). A key no
binding takes, and every key while a text box has focus, goes to the focused widget as typed. A key
that changes the screen lets the new one mount before the next is applied; one that opens a screen
which holds keys too (a recording opened from the browser) leaves the rest held for it.

Keys typed before the app has the terminal (while Python starts and the recording opens) are the
terminal's: :func:`memprobe_tui.typeahead_tty.keep_typeahead` keeps them unechoed and as typed until
the app reads them.
"""

from __future__ import annotations

from collections import deque

from textual import events
from textual.app import App
from textual.widgets import Input, TextArea

#: Keys never held: the app's own way out works while anything loads.
PASS_THROUGH = frozenset({"ctrl+q", "ctrl+c"})
#: How often a replay looks whether the screen a key opened has mounted (seconds).
MOUNT_POLL_S = 0.02


class TypeAheadApp(App[None]):
    """An app that holds keys while its screen is not ready for them (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self._held_keys: deque[events.Key] = deque()
        self._replay_scheduled = False

    def keys_wait(self) -> bool:
        """Whether a key typed now must wait: no screen of ours yet, or the top one still loads."""
        return len(self.screen_stack) <= 1 or bool(getattr(self.screen, "holds_keys", False))

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.Key) and not event.is_forwarded and event.key not in PASS_THROUGH \
                and (self._held_keys or self.keys_wait()):
            self._held_keys.append(event)  # behind any still held: the order typed is kept
            if not self.keys_wait():
                self.release_keys()
            return
        await super().on_event(event)

    def release_keys(self) -> None:
        """Apply the held keys (a screen stopped holding them); from the app's own task, in order."""
        if self._held_keys and not self._replay_scheduled:
            self._replay_scheduled = True
            self.call_later(self._replay_keys)

    async def _replay_keys(self) -> None:
        self._replay_scheduled = False
        while self._held_keys and not self.keys_wait():
            if not self.screen.is_mounted:  # a key opened it: let it mount, then go on
                self._replay_scheduled = True
                self.set_timer(MOUNT_POLL_S, self._replay_keys)
                return
            event = self._held_keys.popleft()
            if isinstance(self.focused, (Input, TextArea)) or not (
                    await self._check_bindings(event.key, priority=True) or await self._check_bindings(event.key)):
                (self.focused or self.screen)._forward_event(event)
