"""Protocol A's run options: the ``memprobe run`` flags it reads, turned into its plan.

The CLI only parses flags and dispatches; what a flag means (merged under a config file's
``[protocol]`` table, checked, defaulted to the release's values) is decided here.
"""

from __future__ import annotations

from typing import cast, get_args

from memprobe_engine.errors import ConfigError
from memprobe_engine.protocol_spec import RunCommon
from memprobe_engine.recovery.options import RecoveryOptions
from memprobe_engine.run_flags import csv_names, system_names
from memprobe_engine.recovery.dialogue_source import parse_source
from memprobe_engine.recovery.framing import DEFAULT_FRAMING, check_framing
from memprobe_engine.recovery.judge_kind import check_judge, default_judge
from memprobe_engine.recovery.policy import DEFAULT_POLICY, check_policy
from memprobe_engine.recovery.protocol_config import cap, load_protocol_table, merged
from memprobe_engine.recovery.rollout import RolloutSettings
from memprobe_engine.recovery.runner import RecoveryPlan
from memprobe_engine.recovery.config import Mode


def recovery_plan(common: RunCommon, options: RecoveryOptions) -> RecoveryPlan:
    """The plan of a protocol-A run: flags over the config file's ``[protocol]`` table over the
    release's defaults; a bad value is one ConfigError naming the flag."""
    table = load_protocol_table(common.config)
    systems = system_names(common.systems)
    users, dims = csv_names(options.users, "--users"), csv_names(options.dims, "--dims")
    source = parse_source(options.dialogues) if options.dialogues is not None else None
    mode_list = csv_names(options.modes, "--modes") or list(table.modes or ["dump_all", "retrieve"])
    bad = [m for m in mode_list if m not in get_args(Mode)]
    if bad:
        raise ConfigError(f"--modes: {', '.join(bad)} unknown; use dump_all and/or retrieve.")
    turns = merged(options.max_turns, table.max_turns, 25)
    if turns < 1:
        raise ConfigError("--max-turns must be at least 1.")
    for flag, value in (("--agent-max-tokens", options.agent_max_tokens),
                        ("--simulator-max-tokens", options.simulator_max_tokens),
                        ("--judge-max-tokens", options.judge_max_tokens),
                        ("--preference-judge-max-tokens", options.preference_judge_max_tokens)):
        if value is not None and value < 0:
            raise ConfigError(f"{flag} {value}: a reply cap is a number of tokens; give a positive number, "
                              f"or 0 for no cap.")
    defaults = RolloutSettings()
    framing = check_framing(merged(options.framing, table.framing, DEFAULT_FRAMING))
    recovery_judge = check_judge(merged(options.recovery_judge, table.recovery_judge, default_judge(framing)))
    settings = RolloutSettings(
        max_turns=turns, seed=common.seed,
        agent_max_tokens=cap(merged(options.agent_max_tokens, table.agent_max_tokens, None)),
        simulator_max_tokens=cap(merged(options.simulator_max_tokens, table.simulator_max_tokens, None)),
        judge_max_tokens=cap(merged(options.judge_max_tokens, table.judge_max_tokens, None)),
        preference_judge_max_tokens=merged(options.preference_judge_max_tokens, table.preference_judge_max_tokens,
                                           None),
        agent_k=merged(None, table.agent_k, defaults.agent_k),
        agent_temperature=merged(None, table.agent_temperature, defaults.agent_temperature),
        simulator_temperature=merged(None, table.simulator_temperature, defaults.simulator_temperature),
        # A fixed dialogue has no live assistant reply to rate: no preference judge (no metric D).
        preference_judge=False if options.no_preference_judge or source is not None
        else merged(None, table.preference_judge, True),
        policy=check_policy(merged(options.policy, table.policy, DEFAULT_POLICY)),
        framing=framing, recovery_judge=recovery_judge)
    return RecoveryPlan(sessions_dir=common.sessions, users=users, dimensions=dims, systems=systems,
                        modes=cast("list[Mode]", mode_list), settings=settings, shard=common.shard,
                        embedding_spec=merged(common.embeddings, table.embeddings, "st:minilm"), dialogues=source)


__all__ = ["recovery_plan"]
