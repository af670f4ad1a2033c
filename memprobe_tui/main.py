"""The ``memprobe`` console script: the engine's commands plus ``replay`` and ``tui``.

The command tree is assembled here, at the top of the dependency graph, so the engine package never
imports the UI; Textual itself is imported only when one of the two UI commands runs.
"""

from __future__ import annotations

from memprobe_engine.cli import app
from memprobe_engine.cli import main as engine_main
from memprobe_tui.cli import replay, tui

app.command("replay")(replay)
app.command("tui")(tui)


def main() -> None:
    """Console-script entry point (errors become one line on stderr, as in the engine CLI)."""
    engine_main()
