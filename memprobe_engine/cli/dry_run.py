"""``memprobe run --dry-run``: print the resolved protocol and exit, making no model call.

Reusable by every suite: a suite builds a :class:`ResolvedProtocol` (its name, the model spec of
each role it uses with that role's sampling settings, and its protocol parameters) and calls
:func:`print_resolved`. Nothing here starts a server, opens a recording or reads a key's value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table


@dataclass(frozen=True)
class RoleSetting:
    """One role as a run would call it: its model spec and the sampling it is called with."""

    role: str
    spec: str
    temperature: float | None = None
    max_tokens: int | None = None
    note: str = ""


@dataclass
class ResolvedProtocol:
    """What a run would do: suite, roles with models and sampling, and the protocol parameters."""

    suite: str
    roles: Sequence[RoleSetting]
    parameters: Mapping[str, Any] = field(default_factory=dict)
    notes: Sequence[str] = ()


def role_setting(llm_config: Any, role: str, *, temperature: float | None, max_tokens: int | None,
                 note: str = "") -> RoleSetting:
    """The setting of ``role`` under ``llm_config`` (an :class:`~memprobe_engine.llm.config.LLMConfig`)."""
    spec = llm_config.spec_for(role)
    extra = f"context {spec.context_tokens:,} tokens" if spec.context_tokens else ""
    return RoleSetting(role=role, spec=spec.spec_string(), temperature=temperature, max_tokens=max_tokens,
                       note="; ".join(part for part in (note, extra) if part))


def _value(value: Any) -> str:
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
