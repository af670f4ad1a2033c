"""How ``--help`` shows options. Typer (0.29) prints a type after every option, so a flag such as
``--no-cache`` reads ``--no-cache <bool>`` as if it took a value; flags take none, so they are
shown with no type. Imported once by the command tree (``memprobe_engine.cli``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from typer.core import TyperOption

if TYPE_CHECKING:  # typer vendors click privately: its Context, for the signature only
    from typer._click.core import Context

_typed = TyperOption.display_type_rich


def _flag_shows_no_type(self: TyperOption, ctx: Context) -> str | None:
    # ``ctx`` is typer's vendored click Context (typer._click, a private module): passed through only.
    if self.is_flag and self.metavar is None:
        return None
    result = _typed(self, ctx)
    return None if result is None else str(result)


def install() -> None:
    """Apply the rule (idempotent)."""
    TyperOption.display_type_rich = _flag_shows_no_type  # type: ignore[method-assign]
