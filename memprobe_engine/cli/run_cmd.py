"""``memprobe run``: run (or resume) a benchmark suite into a recording."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.console import Console

from memprobe_engine.cli.model_flags import role_specs
from memprobe_engine.errors import ConfigError
from memprobe_engine.orchestration.progress import ProgressHook

if TYPE_CHECKING:
    from memprobe_engine.orchestration.ray_executor import RayOptions

#: Units at once by default: enough to keep the embedded server's 4 slots busy in the quick run (two
#: systems, each with a simulator and a preference judge in flight); bench/quick_run.py measures it.
DEFAULT_RUN_CONCURRENCY = 4

console = Console(highlight=False, stderr=True, soft_wrap=True)


def _csv(value: Optional[str], flag: str) -> Optional[list[str]]:
    """A comma-separated flag value: None (every one) for ``all`` or no flag. An empty value — often an
    unset shell variable, ``--users "$USERS"`` — is refused rather than read as every one."""
    if value is None or value.strip() == "all":
        return None
    names = [part.strip() for part in value.split(",") if part.strip()]
    if not names:
        raise ConfigError(f"{flag} {value!r} names nothing (an unset shell variable?): give comma-separated names, "
                          f"or {flag} all (the same as leaving the flag out).")
    return names


def _system_list(value: str) -> list[str]:
    """``--systems``: at least one name; an empty list (``--systems ,``) is an error, not nomem."""
    names = [part.strip() for part in value.split(",") if part.strip()]
    if not names:
        raise ConfigError(f"--systems {value!r} names no memory system. Pass one or more comma-separated names, "
                          f"e.g. --systems nomem,longctx_full (memprobe systems list shows them).")
    return unique("--systems", names)


def check_record_folder(record: Path) -> None:
    """``--record ''`` (an unset shell variable) arrives as the current folder, and the recording's files
    would land among the user's own: refused unless the current folder is itself a recording (a resume)."""
    if str(record) == "." and not (Path.cwd() / "header.json").is_file():
        raise ConfigError(f"--record {str(record)!r} names the current folder ({Path.cwd()}), which is not a "
                          f"recording (an empty --record, e.g. an unset shell variable, means the same): name a "
                          f"new folder, e.g. --record recordings/run1.")


def unique(flag: str, names: list[str]) -> list[str]:
    """``names`` when each appears once; a name given twice would run its units twice."""
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        once = ",".join(dict.fromkeys(names))
        raise ConfigError(f"{flag} names {', '.join(repeated)} more than once; each runs once: {flag} {once}")
    return names


def _shard(value: str | None) -> tuple[int, int]:
    """``--shard I/N``; without it, a Slurm array task's shard, else the whole run (0/1)."""
    if value is None:
        from memprobe_engine.orchestration.units import shard_from_env

        return shard_from_env(os.environ) or (0, 1)
    try:
        index, total = (int(x) for x in value.split("/"))
    except ValueError:
        raise ConfigError(f"--shard {value!r}: expected I/N with 0 <= I < N, e.g. --shard 0/4.") from None
    if not 0 <= index < total:
        raise ConfigError(f"--shard {value!r}: I must satisfy 0 <= I < N.")
    return index, total


def run(
    ctx: typer.Context,
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
    shard: Annotated[Optional[str], typer.Option(
        help="Run shard I of N (writes DIR.shard-I-of-N; join with memprobe merge). Default: in a Slurm job array, "
             "the array task's shard ((SLURM_ARRAY_TASK_ID - MIN) / STEP of SLURM_ARRAY_TASK_COUNT), else 0/1.")]
    = None,
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
    framing: Annotated[Optional[str], typer.Option(
        help="recovery: prompt framing, release (default; the release's layout) or embedded (the same content "
             "framed for a small model: cache-friendly layout, stricter judge, in-role simulated user); "
             "docs/protocol-a.md.")] = None,
    recovery_judge: Annotated[Optional[str], typer.Option(
        "--recovery-judge", help="recovery: who judges a fill, model (the recovery_judge role's model, the paper's "
                                 "judge; default) or calibrated[:NAME] (a cross-encoder trained on the paper's own "
                                 "judgments, no model call; default under --framing embedded); docs/protocol-a.md."
    )] = None,
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
    dialogues: Annotated[Optional[str], typer.Option(
        help="recovery: fixed-dialogue (off-policy) run: feed each task's recorded dialogue from RECORDING[@SYSTEM] "
             "to the memory systems instead of a live rollout (no simulator, assistant or preference-judge call), "
             "e.g. sessions/release-a/dialogues.")] = None,
    executor: Annotated[str, typer.Option(help="Where units run: local (this process, --concurrency at once) or ray "
                                          "(one Ray task per unit; docs/scale.md).")] = "local",
    ray_address: Annotated[Optional[str], typer.Option(help="--executor ray: the cluster to join (e.g. auto, or "
                                                       "HOST:6379); default: a local Ray instance.")] = None,
    ray_workers: Annotated[int, typer.Option(help="--executor ray without --ray-address: worker processes of the "
                                             "local instance (units at once).")] = 2,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the resolved protocol (models, temperatures, "
                                          "caps, k, policy; for paradigms units and calls), the expected calls, "
                                          "tokens, cost and embedded wall time per role, and stop; no model is "
                                          "called and nothing is written.")] = False,
    price: Annotated[Optional[list[str]], typer.Option(
        "--price", help="With --dry-run: ROLE=IN/OUT, price per million prompt/completion tokens (default=… prices "
                        "every role; repeatable; or a [prices] table in --config).")] = None,
) -> None:
    """Run a benchmark and record every step; re-running the same command resumes it."""
    from memprobe_engine.cli.dry_run import print_resolved
    from memprobe_engine.llm.cache import ResponseCache
    from memprobe_engine.llm.config import load_llm_config
    from memprobe_engine.orchestration.progress import CommandProgress
    from memprobe_engine.paradigms.run_options import ParadigmOptions, paradigm_plan, paradigm_protocol
    from memprobe_engine.llm.backends import check_specs
    from memprobe_engine.paradigms.runner import needs_models, run_paradigms
    from memprobe_engine.recovery.protocol_config import recovery_protocol
    from memprobe_engine.recovery.run_options import RecoveryOptions, recovery_plan
    from memprobe_engine.recovery.runner import run_recovery

    if suite not in ("recovery", "paradigms"):
        raise ConfigError(f"--suite {suite!r}: use recovery (protocol A) or paradigms (protocol B).")
    refuse_other_protocol_flags(ctx, suite, RecoveryOptions.own_flags if suite == "paradigms"
                                else ParadigmOptions.own_flags)
    if concurrency < 1:
        raise ConfigError(f"--concurrency {concurrency}: give how many to run at once, 1 or more (e.g. "
                          f"--concurrency 4).")
    check_record_folder(record)
    from memprobe_engine.llm.pricing import load_prices

    load_prices(config, price)  # a bad price (flag or [prices]) is refused with or without --dry-run
    if price and not dry_run:
        raise ConfigError("--price is read only with --dry-run (the cost estimate); add --dry-run, or drop it "
                          "(`memprobe report --price` prices a finished run).")
    for flag, listed in (("--users", users), ("--dims", dims), ("--episodes", episodes)):
        unique(flag, _csv(listed, flag) or [])
    ray = ray_options(executor, ray_address, ray_workers)
    cache = None if no_cache else ResponseCache()
    run_work: Callable[[ProgressHook], Coroutine[Any, Any, Path]]
    if suite == "paradigms":
        paradigm = paradigm_plan(ParadigmOptions(
            sessions=sessions, systems=unique("--systems", _csv(systems, "--systems") or []), shard=_shard(shard), seed=seed, episodes=_csv(episodes, "--episodes"),
            paradigms=_csv(paradigms, "--paradigms"), limit=limit, ingest=ingest, k=k, session_k=session_k,
            reader_max_tokens=reader_max_tokens, embeddings=embeddings or "st:minilm"))
        llm_config = load_llm_config(config, os.environ, role_specs(model))  # a bad config fails here
        if dry_run:  # units, calls and their expected tokens: no server is started, no recording written
            from memprobe_engine.cli.estimate_view import print_estimate
            from memprobe_engine.llm.pricing import load_prices
            from memprobe_engine.paradigms.estimate import estimate_paradigms

            print_resolved(paradigm_protocol(paradigm, llm_config, record), console)
            if needs_models(paradigm.systems):
                print_estimate(estimate_paradigms(paradigm), llm_config, load_prices(config, price),
                               Console(highlight=False))
            return
        if needs_models(paradigm.systems):
            check_specs(llm_config.models.values())  # before the recording pins a spec that cannot work
        run_work = lambda hook: run_paradigms(paradigm, record, llm_config=llm_config, concurrency=concurrency,
                                              cache=cache, progress=hook, signals=True, ray=ray)
    else:
        recovery = recovery_plan(RecoveryOptions(
            sessions=sessions, systems=_system_list(systems), config=config, shard=_shard(shard), seed=seed,
            users=_csv(users, "--users"), dims=_csv(dims, "--dims"), modes=_csv(modes, "--modes"), max_turns=max_turns,
            agent_max_tokens=agent_max_tokens, simulator_max_tokens=simulator_max_tokens,
            judge_max_tokens=judge_max_tokens, preference_judge_max_tokens=preference_judge_max_tokens,
            no_preference_judge=no_preference_judge, policy=policy, embeddings=embeddings, dialogues=dialogues,
            framing=framing, recovery_judge=recovery_judge))
        llm_config = load_llm_config(config, os.environ, role_specs(model))
        if dry_run:  # the resolved protocol only: no server is started, no recording written
            from memprobe_engine.cli.estimate_view import print_estimate
            from memprobe_engine.llm.pricing import load_prices
            from memprobe_engine.recovery.estimate import estimate_recovery
            from memprobe_engine.recovery.outcome_shares import header_specs, measure_shares

            shown = Console(highlight=False)
            print_resolved(recovery_protocol(recovery, llm_config), shown)
            # Branch shares from earlier runs beside this one (same models), as docs/usage.md says.
            shares = measure_shares([record.parent], header_specs({"models": llm_config.resolved()}),
                                    fixed_dialogues=recovery.dialogues is not None,
                                    framing=recovery.settings.framing, exclude=record)
            print_estimate(estimate_recovery(recovery, shares), llm_config, load_prices(config, price), shown)
            return
        check_specs(llm_config.models.values())  # before the recording pins a spec that cannot work
        run_work = lambda hook: run_recovery(recovery, record, llm_config=llm_config, concurrency=concurrency,
                                             cache=cache, progress=hook, signals=True, ray=ray)
    with CommandProgress("run", unit="units") as progress:
        # Printed at once: the first minutes may go to model start-up, which the display then shows.
        progress.phase(f"recording to {record}; models start on their first call")
        out = asyncio.run(run_work(progress.hook))
    console.print(f"recorded to [bold]{out}[/]  (report: memprobe report {out})")


def ray_options(executor: str, address: str | None, workers: int) -> RayOptions | None:
    """``--executor`` and its flags, checked before anything is written."""
    from memprobe_engine.orchestration.ray_executor import RayOptions

    if executor not in ("local", "ray"):
        raise ConfigError(f"--executor {executor!r}: use local (this process) or ray (one Ray task per unit).")
    if executor == "local":
        if address is not None:
            raise ConfigError("--ray-address is read only with --executor ray; add --executor ray, or drop it.")
        return None
    if workers < 1:
        raise ConfigError(f"--ray-workers {workers}: give how many worker processes to start, 1 or more.")
    try:
        import ray  # noqa: F401 - only whether it is installed
    except ImportError:
        raise ConfigError("--executor ray needs Ray: pip install 'memprobe[ray]', or run with --executor local.") \
            from None
    return RayOptions(address=address, workers=workers)


def given_flags(ctx: typer.Context) -> list[str]:
    """The options given on the command line (or by environment), as the command spells them."""
    given = []
    for param in ctx.command.params:
        source = ctx.get_parameter_source(param.name) if param.name else None
        # By name: typer ships its own copy of click, whose ParameterSource is not click's.
        if source is not None and source.name in ("COMMANDLINE", "ENVIRONMENT") and param.opts:
            given.append(param.opts[0])
    return given


def refuse_other_protocol_flags(ctx: typer.Context, suite: str, foreign: tuple[str, ...]) -> None:
    """One line for a flag the chosen protocol would silently ignore (it belongs to the other one)."""
    stray = [flag for flag in given_flags(ctx) if flag in foreign]
    if stray:
        other = "recovery" if suite == "paradigms" else "paradigms"
        raise ConfigError(f"{', '.join(stray)}: only a --suite {other} run reads "
                          f"{'this flag' if len(stray) == 1 else 'these flags'}, and this is a --suite {suite} run. "
                          f"Drop {'it' if len(stray) == 1 else 'them'}, or pass --suite {other}.")
