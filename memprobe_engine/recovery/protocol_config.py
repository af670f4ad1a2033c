"""Protocol-A settings from a config file's ``[protocol]`` table, merged under the command-line flags.

``sessions/paper.toml`` holds the recovery release's configuration this way: the turn cap, k, the
sampling temperatures, the reply caps and the exclusion policy, next to its ``[models]``. A flag
given on the command line wins over the file; a setting given in neither keeps the
:class:`~memprobe_engine.recovery.rollout.RolloutSettings` default (which is the release's).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from memprobe_engine.errors import ConfigError
from memprobe_engine.llm.config import read_config_file
from memprobe_engine.llm.spec import first_validation_problem
from memprobe_engine.recovery.framing import Framing
from memprobe_engine.recovery.policy import ExclusionPolicy

if TYPE_CHECKING:
    from memprobe_engine.llm.config import LLMConfig
    from memprobe_engine.llm.resolved import ResolvedProtocol
    from memprobe_engine.recovery.runner import RecoveryPlan

T = TypeVar("T")

#: A reply cap in the file: a token count, or 0 for "no cap" (TOML has no null).
Cap = int


class ProtocolTable(BaseModel):
    """The keys a ``[protocol]`` table may set; anything else is a typo and is refused."""

    model_config = ConfigDict(extra="forbid")

    max_turns: int | None = Field(default=None, ge=1)
    agent_k: int | None = Field(default=None, ge=1)
    agent_temperature: float | None = Field(default=None, ge=0)
    simulator_temperature: float | None = Field(default=None, ge=0)
    agent_max_tokens: Cap | None = Field(default=None, ge=0)
    simulator_max_tokens: Cap | None = Field(default=None, ge=0)
    judge_max_tokens: Cap | None = Field(default=None, ge=0)
    preference_judge_max_tokens: Cap | None = Field(default=None, ge=0)
    preference_judge: bool | None = None
    policy: ExclusionPolicy | None = None
    framing: Framing | None = None
    recovery_judge: str | None = None
    modes: list[Literal["dump_all", "retrieve"]] | None = None
    embeddings: str | None = None


def load_protocol_table(path: Path | None) -> ProtocolTable:
    """The ``[protocol]`` table of ``path`` (empty when there is no file or no table)."""
    if path is None:
        return ProtocolTable()
    data = read_config_file(path)
    table = data.get("protocol", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: `protocol` must be a table ([protocol]).")
    try:
        return ProtocolTable.model_validate(table)
    except ValidationError as err:
        raise ConfigError(f"{path} [protocol]: {first_validation_problem(err)}. Keys: "
                          f"{', '.join(ProtocolTable.model_fields)}.") from None


def cap(value: int | None) -> int | None:
    """A reply cap as the sampling parameters take it: 0 (or None) means none is sent."""
    return None if not value else value


def merged(flag: T | None, table_value: T | None, default: T) -> T:
    """The command-line flag when given, else the file's value, else the default."""
    if flag is not None:
        return flag
    return table_value if table_value is not None else default


def recovery_protocol(plan: RecoveryPlan, llm_config: LLMConfig) -> ResolvedProtocol:
    """What a protocol-A run of ``plan`` would do, for ``memprobe run --dry-run``: every role with
    its model and sampling, the protocol parameters, and the policy (a
    :class:`~memprobe_engine.llm.resolved.ResolvedProtocol`)."""
    from memprobe_engine.llm.resolved import ResolvedProtocol, role_setting  # noqa: F811 (at run time)
    from memprobe_engine.memory.memt_react import REACT_PARAMS
    from memprobe_engine.memory.registry import system_needs
    from memprobe_engine.recovery.policy import DESCRIPTIONS
    from memprobe_engine.recovery.scoring import RETRIEVE_K

    s = plan.settings
    roles = [] if plan.dialogues is not None else [
        role_setting(llm_config, "agent", temperature=s.agent_temperature, max_tokens=s.agent_max_tokens),
        role_setting(llm_config, "simulator", temperature=s.simulator_temperature, max_tokens=s.simulator_max_tokens)]
    if s.preference_judge:
        roles.append(role_setting(llm_config, "preference_judge", temperature=0.0, max_tokens=s.preference_judge_cap))
    roles_of = {name: system_needs(name).model_roles for name in plan.systems}  # declared on each system
    writers = [name for name, roles_ in roles_of.items() if "memory_writer" in roles_]
    if writers:
        roles.append(role_setting(llm_config, "memory_writer", temperature=0.0, max_tokens=None,
                                  note=f"write side of {', '.join(writers)}"))
    if any("reader" in roles_ for roles_ in roles_of.values()):
        roles.append(role_setting(llm_config, "reader", temperature=REACT_PARAMS.temperature,
                                  max_tokens=REACT_PARAMS.max_tokens, note="memt's ReAct retrieval policy"))
    for role in ("slot_filler", "recovery_judge", "attribution_judge"):
        if role == "recovery_judge" and s.recovery_judge != "model":
            continue  # the calibrated judge makes no model call
        roles.append(role_setting(llm_config, role, temperature=0.0, max_tokens=s.judge_max_tokens))
    rollout = plan.dialogues.describe() + "; no simulator, assistant or preference-judge call; metrics A, C, " \
        "D not applicable" if plan.dialogues is not None else "live (simulator and assistant)"
    parameters = {
        "rollout": rollout, "sessions": str(plan.sessions_dir), "users": plan.users or "all",
        "dimensions": plan.dimensions or "all",
        "systems": plan.systems, "access modes": plan.modes, "turn cap": s.max_turns,
        "k (assistant context)": s.agent_k, "k (retrieve mode)": RETRIEVE_K, "embeddings": plan.embedding_spec,
        "preference judge": "on" if s.preference_judge else "off", "seed": s.seed,
        "exclusion policy": DESCRIPTIONS[s.policy],
        "prompt framing": "release (the recovery release's layout)" if s.framing == "release" else
        "embedded (the release's content framed for a small model; docs/protocol-a.md)",
        "recovery judge": "the recovery_judge role's model (the paper's judge)" if s.recovery_judge == "model"
        else f"{s.recovery_judge} (trained on the paper's judgments, no model call; docs/protocol-a.md)",
        "shard": f"{plan.shard[0]}/{plan.shard[1]}",
    }
    return ResolvedProtocol(suite="recovery (protocol A)", roles=roles, parameters=parameters)
