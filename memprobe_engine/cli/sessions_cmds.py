"""``memprobe sessions validate``, ``memprobe systems list`` and ``memprobe systems install``."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

sessions_app = typer.Typer(help="Benchmark inputs: validate pools, users, banks and tasks.", no_args_is_help=True)
systems_app = typer.Typer(help="Memory systems: built-ins, library adapters and installed plug-ins.",
                          no_args_is_help=True)
console = Console(highlight=False)


@sessions_app.command("validate")
def validate(path: Annotated[Path, typer.Argument(help="Sessions folder, one user folder, or one file.")]
             = Path("sessions")) -> None:
    """Report every problem, with file and field; exit 1 if any. A protocol-B suite (a folder with
    episodes.jsonl / latent_specs.json) is checked against the paper's E.1 rules, naming file, episode, field."""
    from memprobe_engine.protocols import inputs_spec

    # The protocol whose inputs these are checks them (a path none recognises: the default protocol's).
    problems = inputs_spec(path).validate_inputs(path)
    for problem in problems:
        console.print(str(problem), markup=False)
    if problems:
        console.print(f"[red]{len(problems)} problem(s)[/] in {path}")
        raise typer.Exit(1)
    console.print(f"[green]valid[/]: {path}")


@systems_app.command("list")
def list_systems() -> None:
    """Every memory system: built-ins, adapters over third-party libraries (with the installed
    library's version, or why one cannot run here) and plug-ins of the memprobe.memory_systems group."""
    from memprobe_engine.memory.registry import list_systems as registry_list

    table = Table("system", "kind", "version", "description")
    for row in registry_list():
        text = escape(row.description) if row.kind != "plug-in" else f"{escape(row.description)} [dim]({escape(row.origin)})[/]"
        if row.unavailable is not None:
            text = f"[yellow]unavailable: {escape(row.unavailable)}[/]\n{text}"
        table.add_row(escape(row.name), row.kind, row.version or "-", text)
    console.print(table)


@systems_app.command("install")
def install_system(name: Annotated[str, typer.Argument(help="The library whose own environment to create: cognee.")]) -> None:
    """Create the separate virtual environment a library adapter runs in (cognee: .venv-cognee, or
    MEMPROBE_COGNEE_VENV), with the adapter's exact pin. The engine's own environment is not touched."""
    from memprobe_engine.memory.adapters.cognee import COGNEE_PIN, cognee_venv, install_cognee

    if name != "cognee":
        console.print(f"[red]error[/]: only cognee runs in an environment of its own; install '{escape(name)}' "
                      + escape(f"with its extra, e.g. pip install 'memprobe[{name}]'"))
        raise typer.Exit(2)
    console.print(f"installing {COGNEE_PIN} into {cognee_venv()} (about 1.6 GB, several minutes)…")
    try:
        version, seconds = install_cognee()
    except (OSError, subprocess.CalledProcessError) as err:
        console.print(f"[red]error[/]: installing {COGNEE_PIN} into {cognee_venv()} failed: {escape(str(err))}. "
                      f"Check network access to PyPI and free disk space, then run the command again.")
        raise typer.Exit(2) from None
    console.print(f"[green]cognee {version}[/] ready in {cognee_venv()} ({seconds:.0f} s); "
                  f"use it with --systems cognee")
