"""``memprobe run``: run (or resume) a benchmark suite into a recording."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

from memprobe_engine.cli.model_flags import role_specs
from memprobe_engine.errors import ConfigError

#: Units at once by default: enough to keep the embedded server's 4 slots busy in the quick run (two
#: systems, each with a simulator and a preference judge in flight); bench/quick_run.py measures it.
DEFAULT_RUN_CONCURRENCY = 4

console = Console(highlight=False, stderr=True)


def _csv(value: Optional[str]) -> Optional[list[str]]:
    if value is None or value.strip() in ("", "all"):
        return None
    return [part.strip() for part in value.split(",") if part.strip()]


def _system_list(value: str) -> list[str]:
    """``--systems``: at least one name; an empty list (``--systems ,``) is an error, not nomem."""
    names = [part.strip() for part in value.split(",") if part.strip()]
    if not names:
        raise ConfigError(f"--systems {value!r} names no memory system. Pass one or more comma-separated names, "
                          f"e.g. --systems nomem,longctx_full (memprobe systems list shows them).")
    return names


def _shard(value: str) -> tuple[int, int]:
    try:
        index, total = (int(x) for x in value.split("/"))
    except ValueError:
        raise ConfigError(f"--shard {value!r}: expected I/N with 0 <= I < N, e.g. --shard 0/4.") from None
    if not 0 <= index < total:
        raise ConfigError(f"--shard {value!r}: I must satisfy 0 <= I < N.")
    return index, total


def run(
    record: Annotated[Path, typer.Option(help="Recording directory to write (an existing one is resumed).")],
    suite: Annotated[str, typer.Option(help="Benchmark suite: recovery (protocol A) or paradigms (protocol B).")]
    = "recovery",
    sessions: Annotated[Path, typer.Option(help="Sessions folder (pool.json, users/), or for paradigms a suite "
                                           "folder (episodes.jsonl), e.g. sessions/paradigms/upstream-sample.")]
    = Path("sessions"),
    users: Annotated[Optional[str], typer.Option(help="Comma-separated user ids, or all.")] = None,
    dims: Annotated[Optional[str], typer.Option(help="Comma-separated dimension names, or all (31 per user).")] = None,
    systems: Annotated[str, typer.Option("--systems", "--system", help="Comma-separated memory systems: built-in "
                                         "names, package.module:Class, or plug-in entry-point names.")]
    = "nomem,longctx_full",
    modes: Annotated[Optional[str], typer.Option(help="Access modes: dump_all,retrieve (default: both).")] = None,
    max_turns: Annotated[Optional[int], typer.Option(help="Turn cap per task (default 25, the paper's).")] = None,
    model: Annotated[Optional[list[str]], typer.Option(help="ROLE=SPEC (repeatable), e.g. default=local:fast, "
                                                       "slot_filler=openai:gpt-4o-mini.")] = None,
    config: Annotated[Optional[Path], typer.Option(help="TOML config with \\[models].")] = None,
    concurrency: Annotated[int, typer.Option(help="Units (user × system, or episode × system) run at once, and "
                                             "dimensions scored at once per unit. Each model is further paced by "
                                             "its spec's concurrency (the embedded model: one request per slot).")
                           ] = DEFAULT_RUN_CONCURRENCY,
    shard: Annotated[str, typer.Option(help="Run shard I of N (writes DIR.shard-I-of-N; join with memprobe merge).")]
    = "0/1",
    seed: Annotated[int, typer.Option(help="Run seed (sampling seeds, memory ids).")] = 0,
    agent_max_tokens: Annotated[Optional[int], typer.Option(help="Cap on assistant reply tokens (0 or default: "
                                                            "none, as in the release).")] = None,
    simulator_max_tokens: Annotated[Optional[int], typer.Option(help="Cap on simulated-user reply tokens (0 or "
                                                                "default: none).")] = None,
    judge_max_tokens: Annotated[Optional[int], typer.Option(help="Cap on judge / slot-fill / attribution tokens "
                                                            "(0 or default: none).")] = None,
    preference_judge_max_tokens: Annotated[Optional[int], typer.Option(
        help="Cap on the preference judge's tokens, which rates every preference with a reason (default: "
             "--judge-max-tokens; 0: none).")] = None,
    no_preference_judge: Annotated[bool, typer.Option("--no-preference-judge",
                                                      help="Skip the per-turn preference judge (no metric D).")] = False,
    embeddings: Annotated[Optional[str], typer.Option(help="Embedding spec: st:minilm (offline, default), "
                                                      "st:/local/model/dir or openai:MODEL@URL.")] = None,
    policy: Annotated[Optional[str], typer.Option(help="recovery: exclusion policy, paper (default; the release's "
                                                  "rules) or audit (unusable cases excluded); docs/protocol-a.md.")]
    = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Do not use the persistent response cache.")] = False,
    episodes: Annotated[Optional[str], typer.Option(help="paradigms: comma-separated episode ids, or all.")] = None,
    paradigms: Annotated[Optional[str], typer.Option(help="paradigms: interference, misinformation, consolidation, "
                                                     "reconsolidation (comma-separated), or all.")] = None,
    limit: Annotated[Optional[int], typer.Option(help="paradigms: only the first N selected episodes.")] = None,
    ingest: Annotated[str, typer.Option(help="paradigms: how sessions reach memory systems: turns (one observation "
                                        "per turn) or session (one transcript per session).")] = "turns",
    k: Annotated[int, typer.Option(help="paradigms: memories a memory system's search returns to the reader.")] = 10,
    session_k: Annotated[int, typer.Option(help="paradigms: sessions naive_rag / time_aware_rag retrieve.")] = 5,
    reader_max_tokens: Annotated[int, typer.Option(help="paradigms: cap on the reader's answer tokens.")] = 300,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the resolved protocol (models, temperatures, "
                                          "caps, k, policy; for paradigms units and calls) and stop; no model is "
                                          "called and nothing is written.")] = False,
) -> None:
    """Run a benchmark and record every step; re-running the same command resumes it."""
    from memprobe_engine.llm.cache import ResponseCache
    from memprobe_engine.llm.config import load_llm_config
    from memprobe_engine.cli.dry_run import print_resolved
    from memprobe_engine.recovery.policy import DEFAULT_POLICY, check_policy
    from memprobe_engine.recovery.protocol_config import cap, load_protocol_table, merged, recovery_protocol
    from memprobe_engine.recovery.rollout import RolloutSettings
    from memprobe_engine.orchestration.progress import CommandProgress
    from memprobe_engine.recovery.runner import RecoveryPlan, run_recovery

    if suite == "paradigms":
        from memprobe_engine.cli.run_paradigms import ParadigmOptions, run_paradigms_command

        run_paradigms_command(ParadigmOptions(
            record=record, sessions=sessions, episodes=_csv(episodes), paradigms=_csv(paradigms), limit=limit,
            ingest=ingest,
            systems=_csv(systems) or [], model=role_specs(model), config=config, concurrency=concurrency,
            shard=_shard(shard), seed=seed, k=k, session_k=session_k, reader_max_tokens=reader_max_tokens,
            embeddings=embeddings or "st:minilm", no_cache=no_cache, dry_run=dry_run))
        return
    if suite != "recovery":
        raise ConfigError(f"--suite {suite!r}: use recovery (protocol A) or paradigms (protocol B).")
    table = load_protocol_table(config)
    mode_list = _csv(modes) or list(table.modes or ["dump_all", "retrieve"])
    bad = [m for m in mode_list if m not in ("dump_all", "retrieve")]
    if bad:
        raise ConfigError(f"--modes: {', '.join(bad)} unknown; use dump_all and/or retrieve.")
    turns = merged(max_turns, table.max_turns, 25)
    if turns < 1:
        raise ConfigError("--max-turns must be at least 1.")
    for flag, value in (("--agent-max-tokens", agent_max_tokens), ("--simulator-max-tokens", simulator_max_tokens),
                        ("--judge-max-tokens", judge_max_tokens),
                        ("--preference-judge-max-tokens", preference_judge_max_tokens)):
        if value is not None and value < 0:
            raise ConfigError(f"{flag} {value}: a reply cap is a number of tokens; give a positive number, "
                              f"or 0 for no cap.")
    defaults = RolloutSettings()
    settings = RolloutSettings(
        max_turns=turns, seed=seed,
        agent_max_tokens=cap(merged(agent_max_tokens, table.agent_max_tokens, None)),
        simulator_max_tokens=cap(merged(simulator_max_tokens, table.simulator_max_tokens, None)),
        judge_max_tokens=cap(merged(judge_max_tokens, table.judge_max_tokens, None)),
        preference_judge_max_tokens=merged(preference_judge_max_tokens, table.preference_judge_max_tokens, None),
        agent_k=merged(None, table.agent_k, defaults.agent_k),
        agent_temperature=merged(None, table.agent_temperature, defaults.agent_temperature),
        simulator_temperature=merged(None, table.simulator_temperature, defaults.simulator_temperature),
        preference_judge=False if no_preference_judge else merged(None, table.preference_judge, True),
        policy=check_policy(merged(policy, table.policy, DEFAULT_POLICY)))
    embeddings = merged(embeddings, table.embeddings, "st:minilm")
    plan = RecoveryPlan(sessions_dir=sessions, users=_csv(users), dimensions=_csv(dims),
                        systems=_system_list(systems), modes=mode_list, settings=settings,  # type: ignore[arg-type]
                        shard=_shard(shard), embedding_spec=embeddings)
    llm_config = load_llm_config(config, os.environ, role_specs(model))
    if dry_run:  # the resolved protocol only: no server is started, no recording written
        print_resolved(recovery_protocol(plan, llm_config), Console(highlight=False))
        return
    with CommandProgress("run", unit="units") as progress:
        # Printed at once: the first minutes may go to model start-up, which the display then shows.
        progress.phase(f"recording to {record}; models start on their first call")
        out = asyncio.run(run_recovery(plan, record, llm_config=llm_config, concurrency=concurrency,
                                       cache=None if no_cache else ResponseCache(), progress=progress.hook,
                                       signals=True))
    console.print(f"recorded to [bold]{out}[/]  (report: memprobe report {out})")
