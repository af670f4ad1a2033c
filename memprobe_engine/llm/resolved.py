"""What a run would do, resolved without running it: each role's model spec and sampling, and the
suite's protocol parameters. Suites build a :class:`ResolvedProtocol`; ``memprobe run --dry-run``
prints it (``cli/dry_run.py``). It lives beside the model configuration so a suite can build one
without importing the command line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memprobe_engine.llm.config import LLMConfig


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


def role_setting(llm_config: LLMConfig, role: str, *, temperature: float | None, max_tokens: int | None,
                 note: str = "") -> RoleSetting:
    """The setting of ``role`` under ``llm_config`` (an :class:`~memprobe_engine.llm.config.LLMConfig`)."""
    spec = llm_config.spec_for(role)
    extra = f"context {spec.context_tokens:,} tokens" if spec.context_tokens else ""
    return RoleSetting(role=role, spec=spec.spec_string(), temperature=temperature, max_tokens=max_tokens,
                       note="; ".join(part for part in (note, extra) if part))
