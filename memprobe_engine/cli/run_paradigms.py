"""``memprobe run --suite paradigms``: protocol B's side of the run command (kept apart from protocol A's
options so ``run_cmd.py`` only dispatches)."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from memprobe_engine.errors import ConfigError

console = Console(highlight=False, stderr=True, soft_wrap=True)


@dataclass(frozen=True)
class ParadigmOptions:
    """The run command's flags that protocol B reads."""

    record: Path
    sessions: Path
    episodes: list[str] | None
    paradigms: list[str] | None
    limit: int | None
    ingest: str
    systems: list[str]
    model: list[str]
    config: Path | None
    concurrency: int
    shard: tuple[int, int]
    seed: int
    k: int
    session_k: int
    reader_max_tokens: int
    embeddings: str
    no_cache: bool
    dry_run: bool


def run_paradigms_command(options: ParadigmOptions) -> None:
    """Resolve the flags into a plan, then print it (``--dry-run``) or run it."""
    from memprobe_engine.llm.cache import ResponseCache
    from memprobe_engine.llm.config import load_llm_config
    from memprobe_engine.paradigms.protocol import GRANULARITIES
    from memprobe_engine.paradigms.reader import ReaderSettings
    from memprobe_engine.paradigms.runner import (
        ParadigmPlan,
        describe_plan,
        input_protocol_of,
        needs_models,
        run_paradigms,
    )
    from memprobe_engine.orchestration.progress import stderr_progress

    if options.ingest not in GRANULARITIES:
        raise ConfigError(f"--ingest {options.ingest!r}: use turns or session.")
    if options.limit is not None and options.limit < 1:
        raise ConfigError("--limit must be at least 1.")
    if options.k < 1 or options.session_k < 1:
        raise ConfigError("--k and --session-k must be at least 1.")
    if options.reader_max_tokens < 16:
        raise ConfigError("--reader-max-tokens must be at least 16 (the answer is a small JSON object).")
    sessions = options.sessions
    if sessions == Path("sessions"):
        raise ConfigError("--suite paradigms needs --sessions pointing at a paradigm suite folder, e.g. "
                          "--sessions sessions/paradigms/upstream-sample.")
    plan = ParadigmPlan(sessions_dir=sessions, systems=options.systems, episodes=options.episodes,
                        paradigms=options.paradigms, limit=options.limit,
                        ingest=options.ingest, k=options.k, session_k=options.session_k,
                        reader=ReaderSettings(max_tokens=options.reader_max_tokens, seed=options.seed),
                        seed=options.seed, shard=options.shard, embedding_spec=options.embeddings)
    llm_config = load_llm_config(options.config, os.environ, list(options.model))  # a bad config fails here
    if options.dry_run:
        from memprobe_engine.cli.dry_run import ResolvedProtocol, print_resolved, role_setting
        from memprobe_engine.memory.registry import system_needs

        roles = []
        if needs_models(plan.systems):
            roles.append(role_setting(llm_config, "reader", temperature=plan.reader.temperature,
                                      max_tokens=plan.reader.max_tokens, note="answers every probe"))
        if any(input_protocol_of(s) == "memory" and "memory_writer" in system_needs(s).model_roles
               for s in plan.systems):
            roles.append(role_setting(llm_config, "memory_writer", temperature=None, max_tokens=None,
                                      note="memory systems' own calls"))
        print_resolved(ResolvedProtocol(
            suite="paradigms", roles=roles,
            parameters={"sessions": str(plan.sessions_dir), "systems": plan.systems, "ingest": plan.ingest,
                        "k (memories per probe)": plan.k, "session_k (RAG sessions per probe)": plan.session_k,
                        "seed": plan.seed, "shard": f"{plan.shard[0]}/{plan.shard[1]}",
                        "embeddings": plan.embedding_spec},
            notes=describe_plan(plan, options.record)), console)
        return
    out = asyncio.run(run_paradigms(plan, options.record, llm_config=llm_config, concurrency=options.concurrency,
                                    cache=None if options.no_cache else ResponseCache(), progress=stderr_progress,
                                    signals=True))
    console.print(f"recorded to [bold]{out}[/]  (report: memprobe report {out})")
