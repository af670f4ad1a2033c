"""The ``memprobe`` console script: the engine's commands plus ``replay``, ``tui`` and ``serve``.

The command tree is assembled here, at the top of the dependency graph, so the engine package never
imports the UI; Textual itself is imported only when one of the three UI commands runs.
"""

from __future__ import annotations

from memprobe_engine.cli import app
from memprobe_engine.cli import main as engine_main
from memprobe_tui.cli import replay, serve, tui

app.command("replay")(replay)
app.command("tui")(tui)
app.command("serve")(serve)


def main() -> None:
    """Console-script entry point (errors become one line on stderr, as in the engine CLI)."""
    engine_main()


if __name__ == "__main__":  # `memprobe serve` starts one app per browser tab as `python -m memprobe_tui.main`
    main()
