"""The ``memprobe`` command line (typer). Each command group lives in its own module.

``main`` turns every :class:`MemProbeError` into one line on stderr and exit status 2 — users see
what to fix, not a traceback.
"""

from __future__ import annotations

import sys

import typer
from rich.console import Console
from rich.markup import escape

from memprobe_engine.cli import help_format
from memprobe_engine.errors import MemProbeError

help_format.install()  # flags are shown without a "<bool>" type in --help

app = typer.Typer(
    name="memprobe",
    help="Audit the long-term memory of LLM agents: run benchmarks, record every step, replay and report.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

from memprobe_engine.cli import (doctor_cmd, generate_cmd, import_cmd, llm_cmds, merge_cmd,  # noqa: E402
                                 proxy_cmd, recording_cmds, report_cmd, rescore_cmd, run_cmd, sessions_cmds)

app.add_typer(recording_cmds.recording_app, name="recording")
app.add_typer(llm_cmds.llm_app, name="llm")
app.command("doctor")(doctor_cmd.doctor)
app.command("run")(run_cmd.run)
app.command("report")(report_cmd.report)
app.command("merge")(merge_cmd.merge)
app.command("rescore")(rescore_cmd.rescore)
app.add_typer(sessions_cmds.sessions_app, name="sessions")
app.add_typer(sessions_cmds.systems_app, name="systems")
app.command("proxy")(proxy_cmd.proxy)
app.add_typer(generate_cmd.generate_app, name="generate")
app.add_typer(import_cmd.import_app, name="import")


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except MemProbeError as err:
        console = Console(stderr=True, highlight=False, soft_wrap=True)
        console.print(f"[bold red]error:[/] {escape(str(err))}", markup=True)
        sys.exit(2)
    except RecursionError:
        # A pathologically nested input (JSON, TOML) that a parser followed too deep: say so in one line.
        Console(stderr=True, highlight=False).print(
            "[bold red]error:[/] an input file is nested too deeply to read (thousands of levels of brackets). "
            "Check the sessions / config files passed to this command.", markup=True)
        sys.exit(2)
    except KeyboardInterrupt as err:
        signum = getattr(err, "signum", None)  # lifecycle.Interrupted: stopped by SIGTERM
        Console(stderr=True).print(f"interrupted{f' ({err})' if signum else ''}; the recording is closed and "
                                   f"can be resumed" if signum else "interrupted")
        sys.exit(128 + signum if signum else 130)
