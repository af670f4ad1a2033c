"""``memprobe run --dry-run``: print the resolved protocol and exit, making no model call.

Reusable by every suite: a suite builds a :class:`ResolvedProtocol` (its name, the model spec of
each role it uses with that role's sampling settings, and its protocol parameters) and calls
:func:`print_resolved`. Nothing here starts a server, opens a recording or reads a key's value.
"""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table

from memprobe_engine.llm.resolved import ResolvedProtocol, RoleSetting, role_setting

__all__ = ["ResolvedProtocol", "RoleSetting", "print_resolved", "role_setting"]


def _value(value: object) -> str:
    if value is None:
        return "none"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value) or "(none)"
    return str(value)


def print_resolved(protocol: ResolvedProtocol, console: Console | None = None) -> None:
    """Print ``protocol`` as two tables (roles, parameters) and a closing line saying nothing ran."""
    console = console or Console(highlight=False)
    roles = Table(title=f"{protocol.suite}: models per role", title_justify="left", box=box.SIMPLE_HEAD)
    for header in ("role", "model", "temperature", "reply cap", "note"):
        roles.add_column(header, no_wrap=header != "note")
    for r in protocol.roles:
        roles.add_row(r.role, r.spec, _value(r.temperature), _value(r.max_tokens), r.note)
    console.print(roles)
    params = Table(title=f"{protocol.suite}: protocol parameters", title_justify="left", box=box.SIMPLE_HEAD)
    params.add_column("parameter", no_wrap=True)
    params.add_column("value")
    for name, value in protocol.parameters.items():
        params.add_row(name, _value(value))
    console.print(params)
    for note in protocol.notes:
        console.print(note)
    console.print("dry run: no model was called and no recording was written.")
