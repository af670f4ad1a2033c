"""Keys typed before the app has the terminal: kept for it, as typed (no Textual import here, so the
terminal is switched before the app's modules load).

A terminal in its usual (canonical) mode echoes the keys over the screen, holds them until Enter and
turns Enter into a line feed, which the app then reads as Ctrl+J: `j` Enter typed while `memprobe
replay` opened a recording did nothing. :func:`typeahead_kept` switches echo and line editing off for
that time; the app reads the keys when it starts and holds them until its screen is ready
(:mod:`memprobe_tui.typeahead`).
"""

from __future__ import annotations

import contextlib
import sys
import termios
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def typeahead_kept() -> Iterator[None]:
    """While the app loads, keep keys typed at the terminal for it: not echoed over the screen, and
    as typed (a canonical terminal would hold them until Enter and turn Enter into a line feed, which
    the app reads as Ctrl+J). The terminal's settings are restored afterwards, whatever the app left."""
    fd, before = _terminal()
    if before is not None:
        mode = list(before)
        mode[0] &= ~termios.ICRNL                      # iflag: Enter stays a carriage return
        mode[3] &= ~(termios.ICANON | termios.ECHO)    # lflag: key by key, not echoed
        with contextlib.suppress(termios.error):
            termios.tcsetattr(fd, termios.TCSANOW, mode)
    try:
        yield
    finally:
        if before is not None:
            with contextlib.suppress(termios.error):
                termios.tcsetattr(fd, termios.TCSANOW, before)


def _terminal() -> tuple[int, list[Any] | None]:
    """stdin's descriptor and terminal settings; None when it is no terminal (a pipe, a web tab)."""
    try:
        fd = sys.stdin.fileno()
        return fd, termios.tcgetattr(fd)
    except (OSError, ValueError, AttributeError, termios.error):
        return -1, None
