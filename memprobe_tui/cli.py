"""The two commands the ``memprobe`` CLI registers: ``replay RECORDING`` and ``tui [DIR]``.

Bad input ends with the engine's one-line message naming the path (exit status 2), never a
traceback; the recording is opened before the app starts so that message reaches a normal terminal.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape

from memprobe_engine.model_flags import role_specs
from memprobe_engine.errors import MemProbeError

NO_COLOR_HELP = "Monochrome output (also honoured: the NO_COLOR environment variable)."


def _fail(err: MemProbeError) -> None:
    Console(stderr=True, highlight=False, soft_wrap=True).print(f"[bold red]error:[/] {escape(str(err))}", markup=True)
    raise typer.Exit(2)


MODEL_HELP = ("ROLE=SPEC for live re-runs (slot_filler, recovery_judge, attribution_judge; reader for a paradigm "
              "recording's probes; repeatable); default: MEMPROBE_MODEL… or the embedded model.")


def replay(recording: Annotated[Path, typer.Argument(help="A recording folder (holds header.json and events.jsonl).")],
           no_color: Annotated[bool, typer.Option("--no-color", help=NO_COLOR_HELP)] = False,
           model: Annotated[Optional[list[str]], typer.Option(help=MODEL_HELP)] = None,
           config: Annotated[Optional[Path], typer.Option(help="TOML config with \\[models] for re-runs.")] = None,
           compare: Annotated[Optional[str], typer.Option(
               "--compare", help="Another protocol-A run (REC or REC:SYSTEM; RECORDING may be REC:SYSTEM too): "
                                 "open on the case grid of the two, improved/regressed, Enter side by side.")] = None,
           ) -> None:
    """Replay one recording: run overview, transcripts, memory time travel, dimension inspector; for a
    paradigm (protocol-B) recording: episode list, session stepper, probe inspector with live re-run."""
    import os

    from memprobe_engine.llm.backends.local_child import serve_for_ui
    from memprobe_engine.llm.config import load_llm_config
    from memprobe_engine.protocols import open_session
    from memprobe_tui.app import MemProbeApp
    from memprobe_tui.protocols import entry_for

    if compare is not None:
        _replay_compare(str(recording), compare, no_color)
        return
    try:
        llm_config = load_llm_config(config, os.environ, role_specs(model))
        session = open_session(recording)
    except MemProbeError as err:
        _fail(err)
        return
    serve_for_ui()
    try:
        MemProbeApp(session=session, no_color=no_color, live=entry_for(session).live_hooks(llm_config)).run()
    finally:
        session.close()


def _replay_compare(base_text: str, other_text: str, no_color: bool) -> None:
    from memprobe_engine.errors import ConfigError
    from memprobe_engine.protocols import one_protocol, open_session
    from memprobe_engine.report.compare_inputs import parse_selection
    from memprobe_tui.protocols import entries

    try:
        base, other = parse_selection(base_text), parse_selection(other_text)
        spec = one_protocol([base.path, other.path])
        compare = entries()[spec.name].compare
        if compare is None:
            raise ConfigError(f"replay --compare has no compare screen for {spec.name} runs ({spec.title}); "
                              f"memprobe compare {base_text} {other_text} compares them in the terminal.")
        base_session, other_session = open_session(base.path), open_session(other.path)
    except MemProbeError as err:
        _fail(err)
        return
    try:
        compare(base_session, other_session, base.system, other.system, no_color)
    finally:
        base_session.close()
        other_session.close()


def tui(directory: Annotated[Path, typer.Argument(help="A folder of recordings.")] = Path("recordings"),
        no_color: Annotated[bool, typer.Option("--no-color", help=NO_COLOR_HELP)] = False) -> None:
    """Browse the recordings in a folder, newest first, and replay any of them."""
    from memprobe_engine.llm.backends.local_child import serve_for_ui
    from memprobe_engine.replay import list_recordings
    from memprobe_tui.app import MemProbeApp

    try:
        list_recordings(directory)  # fail here, with the path named, on a missing or foreign folder
    except MemProbeError as err:
        _fail(err)
        return
    serve_for_ui()
    MemProbeApp(folder=directory, no_color=no_color).run()


def serve(target: Annotated[Path, typer.Argument(help="A recording, or a folder of recordings.")] = Path("recordings"),
          port: Annotated[int, typer.Option(help="TCP port to listen on.")] = 8000,
          host: Annotated[str, typer.Option(help="Address to bind; any address but 127.0.0.1 requires the token "
                                                 "printed in the URL.")] = "127.0.0.1",
          max_sessions: Annotated[int, typer.Option(help="Most browser tabs (app processes) served at once; one "
                                                         "more gets a page that says so.")] = 4,
          no_color: Annotated[bool, typer.Option("--no-color", help=NO_COLOR_HELP)] = False) -> None:
    """Serve the TUI in a browser tab (textual-serve): one app per tab, the URL printed at start."""
    from memprobe_engine.errors import ConfigError
    from memprobe_engine.protocols import open_session
    from memprobe_engine.replay import list_recordings

    try:
        from memprobe_tui.serve import serve as serve_tui
        from memprobe_tui.serve_guard import check_port
    except ImportError:
        _fail(MemProbeError("memprobe serve needs textual-serve: pip install -e '.[serve]' (make install has it)."))
        return

    try:  # fail here, with the path or setting named, rather than in every browser tab
        check_port(port)
        if max_sessions < 1:
            raise ConfigError(f"--max-sessions {max_sessions} would refuse every tab: give 1 or more.")
        if (target / "header.json").is_file():
            open_session(target).close()
        else:
            list_recordings(target)
        serve_tui(target, host=host, port=port, no_color=no_color, max_sessions=max_sessions)
    except MemProbeError as err:
        _fail(err)
