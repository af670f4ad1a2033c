"""Protocol B's run options: the ``memprobe run --suite paradigms`` flags it reads, turned into its
plan, and what ``--dry-run`` shows of it. The CLI only parses flags and dispatches."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from memprobe_engine.errors import ConfigError
from memprobe_engine.paradigms.options import ParadigmOptions
from memprobe_engine.protocol_spec import RunCommon
from memprobe_engine.run_flags import csv_names, unique
from memprobe_engine.paradigms.protocol import GRANULARITIES
from memprobe_engine.paradigms.reader import ReaderSettings
from memprobe_engine.paradigms.runner import (
    ParadigmPlan,
    describe_plan,
    input_protocol_of,
    needs_models,
)

if TYPE_CHECKING:
    from memprobe_engine.llm.config import LLMConfig
    from memprobe_engine.llm.resolved import ResolvedProtocol


def paradigm_plan(common: RunCommon, options: ParadigmOptions) -> ParadigmPlan:
    """The plan of a protocol-B run; a bad value is one ConfigError naming the flag."""
    systems = unique("--systems", csv_names(common.systems, "--systems") or [])
    if options.ingest not in GRANULARITIES:
        raise ConfigError(f"--ingest {options.ingest!r}: use turns or session.")
    if options.limit is not None and options.limit < 1:
        raise ConfigError("--limit must be at least 1.")
    if options.k < 1 or options.session_k < 1:
        raise ConfigError("--k and --session-k must be at least 1.")
    if options.reader_max_tokens < 16:
        raise ConfigError("--reader-max-tokens must be at least 16 (the answer is a small JSON object).")
    if common.sessions == Path("sessions"):
        raise ConfigError("--suite paradigms needs --sessions pointing at a paradigm suite folder, e.g. "
                          "--sessions sessions/paradigms/upstream-sample.")
    return ParadigmPlan(sessions_dir=common.sessions, systems=systems,
                        episodes=csv_names(options.episodes, "--episodes"),
                        paradigms=csv_names(options.paradigms, "--paradigms"), limit=options.limit,
                        ingest=options.ingest, k=options.k, session_k=options.session_k,
                        reader=ReaderSettings(max_tokens=options.reader_max_tokens, seed=common.seed),
                        seed=common.seed, shard=common.shard, embedding_spec=common.embeddings or "st:minilm")


def paradigm_protocol(plan: ParadigmPlan, llm_config: LLMConfig, record: Path | None) -> ResolvedProtocol:
    """What ``--dry-run`` prints for a protocol-B run: the roles it calls with their sampling, its
    parameters, and its units and calls (without those ``record`` already finished)."""
    from memprobe_engine.llm.resolved import ResolvedProtocol, role_setting
    from memprobe_engine.memory.registry import system_needs

    roles = []
    if needs_models(plan.systems):
        roles.append(role_setting(llm_config, "reader", temperature=plan.reader.temperature,
                                  max_tokens=plan.reader.max_tokens, note="answers every probe"))
    if any(input_protocol_of(s) == "memory" and "memory_writer" in system_needs(s).model_roles
           for s in plan.systems):
        roles.append(role_setting(llm_config, "memory_writer", temperature=None, max_tokens=None,
                                  note="memory systems' own calls"))
    return ResolvedProtocol(
        suite="paradigms", roles=roles,
        parameters={"sessions": str(plan.sessions_dir), "systems": plan.systems, "ingest": plan.ingest,
                    "k (memories per probe)": plan.k, "session_k (RAG sessions per probe)": plan.session_k,
                    "seed": plan.seed, "shard": f"{plan.shard[0]}/{plan.shard[1]}",
                    "embeddings": plan.embedding_spec},
        notes=describe_plan(plan, record))


__all__ = ["paradigm_plan", "paradigm_protocol"]
