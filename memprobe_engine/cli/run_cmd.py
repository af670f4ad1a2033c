"""``memprobe run``: run (or resume) a benchmark suite into a recording."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape

from memprobe_engine.model_flags import role_specs
from memprobe_engine.errors import ConfigError
from memprobe_engine.orchestration.prompt_exit import run_interruptible
from memprobe_engine.protocol_spec import RunCommon, option_values
from memprobe_engine.run_flags import check_record_folder
from memprobe_engine.run_flags import shard as shard_flag

if TYPE_CHECKING:
    from memprobe_engine.orchestration.ray_executor import RayOptions

#: Units at once by default: enough to keep the embedded server's 4 slots busy in the quick run (two
#: systems, each with a simulator and a preference judge in flight); bench/quick_run.py measures it.
DEFAULT_RUN_CONCURRENCY = 4

console = Console(highlight=False, stderr=True, soft_wrap=True)


def run(
    ctx: typer.Context,
    record: Annotated[Path, typer.Option(help="Recording directory to write (an existing one is resumed).")],
    suite: Annotated[str, typer.Option(help="Benchmark protocol: recovery (protocol A), paradigms (protocol B), or "
                                           "one a package registers (memprobe_engine/protocols.py).")]
    = "recovery",
    param: Annotated[Optional[list[str]], typer.Option(
        "--param", "-P", help="KEY=VALUE: one of the protocol's own options (repeatable), e.g. -P max_turns=5; "
                              "each option flag below is the same as its -P key.")] = None,
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
    from memprobe_engine.llm.backends import check_specs
    from memprobe_engine.llm.cache import ResponseCache
    from memprobe_engine.llm.config import load_llm_config
    from memprobe_engine.llm.pricing import load_prices
    from memprobe_engine.orchestration.progress import CommandProgress
    from memprobe_engine.protocols import protocols, spec_for

    spec = spec_for(suite)
    values = dict(ctx.params)
    refuse_other_protocol_flags(ctx, spec.name, {name: other.name for other in protocols().values() if other is not spec
                                                 for name in other.options.model_fields
                                                 if name not in spec.options.model_fields})
    options = option_values(spec, values, param or [])
    if concurrency < 1:
        raise ConfigError(f"--concurrency {concurrency}: give how many to run at once, 1 or more (e.g. "
                          f"--concurrency 4).")
    check_record_folder(record)
    load_prices(config, price)  # a bad price (flag or [prices]) is refused with or without --dry-run
    if price and not dry_run:
        raise ConfigError("--price is read only with --dry-run (the cost estimate); add --dry-run, or drop it "
                          "(`memprobe report --price` prices a finished run).")
    if embeddings is not None:  # refused even when no chosen system embeds (it would be read, or not, unseen)
        from memprobe_engine.llm.embeddings import parse_embedding_spec

        parse_embedding_spec(embeddings, origin="--embeddings")
    ray = ray_options(executor, ray_address, ray_workers)
    llm_config = load_llm_config(config, os.environ, role_specs(model))  # a bad config fails here
    common = RunCommon(record=record, sessions=sessions, systems=systems, config=config, shard=shard_flag(shard),
                       seed=seed, concurrency=concurrency, embeddings=embeddings, llm_config=llm_config,
                       cache=None if no_cache else ResponseCache(), ray=ray)
    planned = spec.plan(common, options)
    for warning in planned.warnings:
        Console(stderr=True, highlight=False, soft_wrap=True).print(f"[yellow]warning:[/] {escape(warning)}")
    if dry_run:  # the resolved protocol and the expected calls: no server is started, no recording written
        from memprobe_engine.cli.estimate_view import print_estimate

        shown = Console(highlight=False)
        # Notes unwrapped (a unit count or a path stays on one line for grep); tables keep their width.
        print_resolved(planned.resolved, Console(highlight=False, soft_wrap=True))
        if planned.estimate is not None:
            print_estimate(planned.estimate(), llm_config, load_prices(config, price), shown)
        return
    if planned.needs_models:
        check_specs(llm_config.models.values())  # before the recording pins a spec that cannot work
    with CommandProgress("run", unit="units") as progress:
        # Printed at once: the first minutes may go to model start-up, which the display then shows.
        progress.phase(f"recording to {record}; models start on their first call")
        out = run_interruptible(planned.start(progress.hook))  # a signal exits at once (prompt_exit)
    console.print(f"recorded to [bold]{out}[/]  (report: memprobe report {out})")


def ray_options(executor: str, address: str | None, workers: int) -> RayOptions | None:
    """``--executor`` and its flags, checked before anything is written."""
    if executor not in ("local", "ray"):
        raise ConfigError(f"--executor {executor!r}: use local (this process) or ray (one Ray task per unit).")
    if executor == "local":
        if address is not None:
            raise ConfigError("--ray-address is read only with --executor ray; add --executor ray, or drop it.")
        return None
    from memprobe_engine.orchestration.ray_executor import RayOptions  # a local run needs none of it
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


def refuse_other_protocol_flags(ctx: typer.Context, suite: str, foreign: dict[str, str]) -> None:
    """One line for a flag the chosen protocol would silently ignore: ``foreign`` maps each option only
    other protocols have to the protocol that reads it."""
    given = {param.name: param.opts[0] for param in ctx.command.params if param.name and param.opts}
    stray = [(given[name], owner) for name, owner in foreign.items()
             if name in given and given[name] in given_flags(ctx)]
    if stray:
        flags = ", ".join(flag for flag, _ in stray)
        owners = sorted({owner for _, owner in stray})
        other = owners[0] if len(owners) == 1 else " or ".join(owners)
        raise ConfigError(f"{flags}: only a --suite {other} run reads "
                          f"{'this flag' if len(stray) == 1 else 'these flags'}, and this is a --suite {suite} run. "
                          f"Drop {'it' if len(stray) == 1 else 'them'}, or pass --suite {other}.")
