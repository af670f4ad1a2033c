"""The ``memprobe`` console script: the engine's commands plus ``replay``, ``tui`` and ``serve``.

The command tree is assembled here, at the top of the dependency graph, so the engine package never
imports the UI; Textual itself is imported only when one of the three UI commands runs.
"""

from __future__ import annotations

import sys

from memprobe_tui.typeahead_tty import keep_typeahead

# First, before the engine loads (a second or more): keys typed while `replay` or `tui` starts are
# kept for the app, as typed (memprobe_tui.typeahead_tty).
keep_typeahead(sys.argv)

from memprobe_engine.cli import app  # noqa: E402 - after the terminal is switched, on purpose
from memprobe_engine.cli import main as engine_main  # noqa: E402
from memprobe_tui.cli import replay, serve, tui  # noqa: E402

app.command("replay")(replay)
app.command("tui")(tui)
app.command("serve")(serve)


def main() -> None:
    """Console-script entry point (errors become one line on stderr, as in the engine CLI)."""
    engine_main()


if __name__ == "__main__":  # `memprobe serve` starts one app per browser tab as `python -m memprobe_tui.main`
    main()
