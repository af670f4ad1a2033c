"""Protocol A's header config, typed: what :meth:`RecoveryPlan.config` writes (a run of ours) and what
an import of the recovery release writes (``source`` ``release-a``), read through
:meth:`RecoveryConfig.of` (older headers upgraded: :mod:`memprobe_engine.events.header_upgrade`)."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict

from memprobe_engine.events.header_config import HeaderConfig
from memprobe_engine.events.scoring import AccessMode
from memprobe_engine.recovery.framing import DEFAULT_FRAMING, Framing
from memprobe_engine.recovery.policy import ExclusionPolicy

#: The two ways a slot-filler reads a memory system: its whole store, or what its search returns (the
#: events record it as ``AccessMode``).
Mode = AccessMode
#: Both modes: what a run reads when its header names none.
MODES: tuple[Mode, ...] = ("dump_all", "retrieve")
#: The recovery judge of a run that names none: the ``recovery_judge`` model role (``judge_kind.py``).
MODEL_JUDGE = "model"
#: The protocol's turn cap per episode when a header names none.
DEFAULT_MAX_TURNS = 25


class DialogueEntry(BaseModel):
    """A fixed-dialogue run's ``dialogues``: the recording and the system whose transcripts it fed."""

    model_config = ConfigDict(extra="allow", frozen=True)

    recording: str
    system: str


class RecoveryConfig(HeaderConfig):
    """A protocol-A recording's config (the base's keys plus these)."""

    suite_name = "recovery"

    #: The hidden-state dimensions the run was restricted to; None: every dimension of each user's tasks.
    dimensions: list[str] | None = None
    modes: list[Mode] = list(MODES)
    max_turns: int = DEFAULT_MAX_TURNS
    #: Items a retrieve-mode search returns to the slot-filler.
    k: int = 5
    #: Items the assistant's own memory search returns during the rollout.
    agent_k: int | None = None
    agent_temperature: float | None = None
    simulator_temperature: float | None = None
    #: The exclusion policy (``policy.py``); a header from before policies were recorded is upgraded.
    policy: ExclusionPolicy
    agent_max_tokens: int | None = None
    simulator_max_tokens: int | None = None
    judge_max_tokens: int | None = None
    preference_judge: bool = True
    preference_judge_max_tokens: int | None = None
    #: A fixed-dialogue run's source (``--dialogues``); None: a live rollout.
    dialogues: DialogueEntry | None = None
    #: The prompt layout (``framing.py``); written only when not the default.
    framing: Framing = DEFAULT_FRAMING
    #: ``model`` or ``calibrated:NAME`` (``judge_kind.py``); written only when not the default.
    recovery_judge: str = MODEL_JUDGE
    # An import of the recovery release (``source`` ``release-a``): the release's runs and reports it read.
    release: str | None = None
    release_run: str | None = None
    release_retrieve_run: str | None = None
    release_reports: list[str] | None = None

    @property
    def imported(self) -> bool:
        """Whether the recording is an import (of the release), not a run of ours."""
        return bool(self.source)


def framing_of(config: RecoveryConfig | Mapping[str, object]) -> Framing:
    """The framing a recording was made under (``release`` when its header names none)."""
    return (config if isinstance(config, RecoveryConfig) else RecoveryConfig.of(config)).framing


def policy_of(config: RecoveryConfig | Mapping[str, object]) -> ExclusionPolicy:
    """The policy a recording was made under, from its header config: ``policy`` when recorded; an
    imported release run is the release's own (``paper``); older recordings of ours behaved as
    ``audit`` (both upgrades: ``events/header_upgrade.py``)."""
    return (config if isinstance(config, RecoveryConfig) else RecoveryConfig.of(config)).policy
