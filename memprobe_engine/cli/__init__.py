"""The ``memprobe`` command line (typer). Each command group lives in its own module.

``main`` turns every :class:`MemProbeError` into one line on stderr and exit status 2 — users see
what to fix, not a traceback. Ctrl-C and SIGTERM end a command with :data:`INTERRUPTED_LINE` and
exit status 130 / 143 (128 + the signal): typer would turn the KeyboardInterrupt into a silent exit
130 before ``main`` saw it, so the command group hands it on as :class:`StoppedBySignal` instead.
"""

from __future__ import annotations

import signal
import sys
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperGroup

from memprobe_engine.cli import help_format
from memprobe_engine.errors import MemProbeError

help_format.install()  # flags are shown without a "<bool>" type in --help

#: The one line an interrupted command prints (a recording it was writing is closed; the same
#: command continues it).
INTERRUPTED_LINE = "interrupted; resume with the same command"


class StoppedBySignal(Exception):
    """Ctrl-C or SIGTERM stopped the command; ``signum`` says which (exit status 128 + signum)."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"interrupted by {signal.Signals(signum).name}")
        self.signum = signum


class _Commands(TyperGroup):
    """The command group: a KeyboardInterrupt leaves it as :class:`StoppedBySignal`, which typer
    passes on to :func:`main` (it swallows KeyboardInterrupt itself)."""

    def invoke(self, ctx: Any) -> Any:  # typer's own click Context (a private module)
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as err:
            # lifecycle.Interrupted names the signal (SIGTERM); a plain one is Ctrl-C.
            raise StoppedBySignal(getattr(err, "signum", None) or signal.SIGINT) from None


def _on_sigterm(signum: int, frame: object) -> None:
    """SIGTERM outside a run's own handler (startup, a report): stop like Ctrl-C, named as SIGTERM."""
    from memprobe_engine.orchestration.lifecycle import Interrupted

    raise Interrupted(signum)


app = typer.Typer(
    cls=_Commands,
    name="memprobe",
    help="Audit the long-term memory of LLM agents: run benchmarks, record every step, replay and report.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

from memprobe_engine.cli import (  # noqa: E402
    ablation_cmd,
    compare_cmd,
    doctor_cmd,
    export_cmd,
    generate_cmd,
    import_cmd,
    judge_cmd,
    llm_cmds,
    merge_cmd,
    proxy_cmd,
    recording_cmds,
    report_cmd,
    rescore_cmd,
    run_cmd,
    sessions_cmds,
)

app.add_typer(recording_cmds.recording_app, name="recording")
app.add_typer(llm_cmds.llm_app, name="llm")
app.add_typer(judge_cmd.judge_app, name="judge")
app.command("doctor")(doctor_cmd.doctor)
app.command("run")(run_cmd.run)
app.command("report")(report_cmd.report)
app.command("merge")(merge_cmd.merge)
app.command("rescore")(rescore_cmd.rescore)
app.command("compare")(compare_cmd.compare)
app.add_typer(export_cmd.export_app, name="export")
app.command("reader-ablation")(ablation_cmd.reader_ablation)
app.add_typer(sessions_cmds.sessions_app, name="sessions")
app.add_typer(sessions_cmds.systems_app, name="systems")
app.command("proxy")(proxy_cmd.proxy)
app.add_typer(generate_cmd.generate_app, name="generate")
app.add_typer(import_cmd.import_app, name="import")


def main() -> None:
    """Console-script entry point."""
    signal.signal(signal.SIGTERM, _on_sigterm)
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
    except (StoppedBySignal, KeyboardInterrupt) as err:  # KeyboardInterrupt: one outside the commands
        from memprobe_engine.orchestration.prompt_exit import completed, exit_now

        if completed() is not None:  # the signal came after the run finished its work: nothing was lost
            exit_now(0)
        signum = getattr(err, "signum", None) or signal.SIGINT
        print(INTERRUPTED_LINE, file=sys.stderr, flush=True)
        exit_now(128 + signum)  # no wait for a thread still loading a model (prompt_exit)
