"""Whether a process of this host still runs: what a recording's writer lock, a live run's check and the
response cache's claims each ask before treating another process's mark as stale."""

from __future__ import annotations

import os


def running(pid: int) -> bool:
    """Whether process ``pid`` of this host still runs (one of another user counts as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
