"""The ``memprobe`` command line (typer). Each shared command group lives in its own module; each
protocol adds its own commands through its spec (:meth:`ProtocolSpec.register_commands
<memprobe_engine.protocol_spec.ProtocolSpec.register_commands>`), to the root and to the shared
``generate``, ``import`` and ``sessions`` groups, so this module names no protocol.

``main`` turns every :class:`MemProbeError` into one line on stderr and exit status 2 — users see
what to fix, not a traceback. Ctrl-C and SIGTERM end a command with :data:`INTERRUPTED_LINE` and
exit status 130 / 143 (128 + the signal): typer would turn the KeyboardInterrupt into a silent exit
130 before ``main`` saw it, so the command group hands it on as :class:`StoppedBySignal` instead.
"""

from __future__ import annotations

import signal
import sys
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperGroup

from memprobe_engine.cli import help_format
from memprobe_engine.errors import MemProbeError

if TYPE_CHECKING:  # typer vendors click privately: its Context, for the override's signature only
    from typer._click.core import Context

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

    def invoke(self, ctx: Context) -> object:  # typer's own click Context (a private module)
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
    compare_cmd,
    doctor_cmd,
    export_cmd,
    groups,
    llm_cmds,
    merge_cmd,
    proxy_cmd,
    recording_cmds,
    report_cmd,
    run_cmd,
    sessions_cmds,
)
from memprobe_engine.protocol_spec import ProtocolSpec  # noqa: E402


def _protocols_with_commands() -> list[ProtocolSpec]:
    """Every protocol, whose own commands join the tree. A plug-in that does not load leaves the built-in
    protocols' commands in place; ``memprobe run`` and the other commands that ask the registry name it."""
    from memprobe_engine.protocols import BUILT_IN, protocols

    try:
        return list(protocols().values())
    except MemProbeError:
        return list(BUILT_IN.values())


#: The shared groups a protocol adds subcommands to, by name.
SHARED_GROUPS = {"generate": groups.generate_app, "import": groups.import_app, "sessions": sessions_cmds.sessions_app}

app.add_typer(recording_cmds.recording_app, name="recording")
app.add_typer(llm_cmds.llm_app, name="llm")
app.command("doctor")(doctor_cmd.doctor)
app.command("run")(run_cmd.run)
app.command("report")(report_cmd.report)
app.command("merge")(merge_cmd.merge)
for _spec in _protocols_with_commands():  # each protocol's own commands and subcommands
    _spec.register_commands(app, SHARED_GROUPS)
app.command("compare")(compare_cmd.compare)
app.add_typer(export_cmd.export_app, name="export")
app.add_typer(sessions_cmds.sessions_app, name="sessions")
app.add_typer(sessions_cmds.systems_app, name="systems")
app.command("proxy")(proxy_cmd.proxy)
app.add_typer(groups.generate_app, name="generate")
app.add_typer(groups.import_app, name="import")


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
