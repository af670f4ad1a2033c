"""The command groups every protocol may add subcommands to: ``memprobe generate`` (benchmark inputs) and
``memprobe import`` (published releases). The CLI creates each group once; a protocol adds its own
subcommands through :meth:`~memprobe_engine.protocol_spec.ProtocolSpec.register_commands` (protocol A
``generate users`` and ``import release-a``, protocol B ``generate episodes`` and ``import release-b``)."""

from __future__ import annotations

import typer

generate_app = typer.Typer(help="Generate benchmark inputs with any model.", no_args_is_help=True)
import_app = typer.Typer(help="Import published benchmark releases as sessions and recordings.",
                         no_args_is_help=True)


@import_app.callback()
def _group() -> None:
    """Import published benchmark releases as sessions and recordings."""
