"""Protocol A's own ``memprobe run`` options, as its spec declares them (``-P key=value`` or the flag of the
same name); ``run_options.recovery_plan`` turns them into the plan."""

from __future__ import annotations

from memprobe_engine.protocol_spec import ProtocolOptions


class RecoveryOptions(ProtocolOptions):
    """Protocol A's own ``memprobe run`` options (None: not given; the config file's ``[protocol]``
    table, then the release's value, decides)."""

    users: str | None = None
    dims: str | None = None
    modes: str | None = None
    max_turns: int | None = None
    agent_max_tokens: int | None = None
    simulator_max_tokens: int | None = None
    judge_max_tokens: int | None = None
    preference_judge_max_tokens: int | None = None
    no_preference_judge: bool = False
    policy: str | None = None
    framing: str | None = None
    recovery_judge: str | None = None
    dialogues: str | None = None
