"""The exception a signal turns into inside a command (Ctrl-C or SIGTERM), naming the signal: the run's
lifecycle records it as ``interrupted`` and the CLI exits with 128 + its number."""

from __future__ import annotations

import signal


class Interrupted(KeyboardInterrupt):
    """The run was stopped by a signal; ``signum`` says which (the CLI exits with 128 + signum)."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"interrupted by {signal.Signals(signum).name}")
        self.signum = signum
