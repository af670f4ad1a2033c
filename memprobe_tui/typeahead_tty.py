"""Keys typed before the app has the terminal: kept for it, as typed.

A terminal in its usual (canonical) mode echoes the keys over the screen, holds them until Enter and
turns Enter into a line feed, which the app then reads as Ctrl+J: `j` Enter typed while `memprobe
replay` started and opened a recording moved the cursor at best and never opened the row. The console
script calls :func:`keep_typeahead` before it imports anything heavy (Python and the engine take a
second or more to load on a busy machine): for the UI commands it switches echo and line editing off
until the process exits, when the terminal's settings are restored (after Textual restored what it
found, which is this mode). The app reads the keys when it starts and holds them until its screen is
ready (:mod:`memprobe_tui.typeahead`). No Textual import here, so the switch comes first.
"""

from __future__ import annotations

import atexit
import contextlib
import sys
import termios
from collections.abc import Sequence
from typing import Any

#: The commands that start the app in this terminal.
UI_COMMANDS = frozenset({"replay", "tui"})


def keep_typeahead(argv: Sequence[str]) -> bool:
    """For a UI command (``argv[1]``) on a terminal, keep the keys typed from now on as typed and
    unechoed; the terminal is restored at exit. Whether it switched."""
    if len(argv) < 2 or argv[1] not in UI_COMMANDS:
        return False
    fd, before = _terminal()
    if before is None:  # not a terminal (a pipe, a browser tab through memprobe serve)
        return False
    mode = list(before)
    mode[0] &= ~termios.ICRNL                      # iflag: Enter stays a carriage return
    mode[3] &= ~(termios.ICANON | termios.ECHO)    # lflag: key by key, not echoed
    try:
        termios.tcsetattr(fd, termios.TCSANOW, mode)
    except termios.error:
        return False
    atexit.register(_restore, fd, before)
    return True


def _restore(fd: int, before: list[Any]) -> None:
    with contextlib.suppress(termios.error, OSError):
        termios.tcsetattr(fd, termios.TCSANOW, before)


def _terminal() -> tuple[int, list[Any] | None]:
    """stdin's descriptor and terminal settings; None when it is no terminal."""
    try:
        fd = sys.stdin.fileno()
        return fd, termios.tcgetattr(fd)
    except (OSError, ValueError, AttributeError, termios.error):
        return -1, None
