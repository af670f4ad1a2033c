"""Protocol-B runs: episodes × systems as units, concurrent, resumable, sharded, recorded.

A "system" of a paradigm run is one of three things, each answering every probe of an episode:

- a memory system (built-in or plug-in name): the incremental protocol (``protocol.py``) ingests
  the sessions, then the unified reader answers each probe from the system's own ``search`` —
  ``input_protocol="memory"``;
- a reference input protocol (``full_context``, ``naive_rag``, ``time_aware_rag``, ``oracle_rag``):
  no ingestion, the reader answers from the sessions that protocol selects;
- a heuristic (``latest_value``, ``always_update``, ``always_preserve``, ``source_preference``):
  rules only, no model call, ``input_protocol="heuristic"``.

Every answer is scored at once by the rule scorer (``scoring.score_probe``) and both are recorded
inside the probe's span. Recording layout: run → episode span (``span_kind="episode"``; attrs
``episode_id``, ``system``, ``input_protocol``, the episode's labels and ``inputs_ref``, the episode
stored once as a payload) → ``session`` spans (memory systems) → ``probe`` spans.

How the run runs (resume, shards, lifecycle, progress) is :mod:`memprobe_engine.orchestration`'s,
shared with protocol A; this module holds protocol B's plan, its units and one unit's work
(:class:`ParadigmRun`). A resume is also refused when an episode's content changed since the
recording was made (``episode_digests`` in the header).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from memprobe_engine.errors import ConfigError, RecordingError
from memprobe_engine.events.memory import Retrieval
from memprobe_engine.events.paradigms import ProbeAnswer
from memprobe_engine.events.run import SpanBegin
from memprobe_engine.events.union import AnyEvent
from memprobe_engine.memory.base import MemoryServices, SimClock, record_footprint
from memprobe_engine.orchestration.progress import ProgressHook
from memprobe_engine.orchestration.protocol import RunNeeds, RunServices
from memprobe_engine.orchestration.resume import UnitKey, read_resume
from memprobe_engine.orchestration.run import run_protocol
from memprobe_engine.orchestration.units import select_units, shard_record_dir, unit_seed
from memprobe_engine.paradigms.baselines import (
    HEURISTIC_RULES,
    HEURISTICS,
    INPUT_PROTOCOLS,
    SessionIndex,
    full_context_evidence,
    heuristic_answer,
    oracle_evidence,
)
from memprobe_engine.paradigms.config import DEFAULT_K, DEFAULT_SESSION_K, ParadigmConfig
from memprobe_engine.paradigms.protocol import (
    Granularity,
    ingest_episode,
    ordered_sessions,
)
from memprobe_engine.paradigms.reader import (
    Evidence,
    ReaderResult,
    ReaderSettings,
    memory_evidence,
    read_probe,
)
from memprobe_engine.paradigms.scoring import SCORING_MODES, mode_layer, score_probe
from memprobe_engine.paradigms.suite import Episode, Probe, Suite, load_suite
from memprobe_engine.paradigms.provenance_inputs import PROMPT_MODULES, input_hashes

if TYPE_CHECKING:
    from memprobe_engine.events.recorder import Recorder
    from memprobe_engine.llm.cache import ResponseStore
    from memprobe_engine.llm.client import BackendFactory, ChatClient
    from memprobe_engine.llm.config import LLMConfig
    from memprobe_engine.llm.embeddings import TextEmbedder
    from memprobe_engine.orchestration.ray_executor import RayOptions



def input_protocol_of(system: str) -> str:
    """``memory`` for a memory system, the protocol's own name for a reference, ``heuristic``."""
    if system in INPUT_PROTOCOLS:
        return system
    if system in HEURISTICS:
        return "heuristic"
    return "memory"


@dataclass
class ParadigmPlan:
    """Everything that determines a protocol-B run's results (its fingerprint goes in the header)."""

    sessions_dir: Path
    systems: list[str]
    episodes: list[str] | None = None
    paradigms: list[str] | None = None
    #: Only the first ``limit`` selected episodes (suite order).
    limit: int | None = None
    #: How sessions reach memory systems: turn by turn, or one transcript per session (protocol.py).
    ingest: Granularity = "turns"
    k: int = DEFAULT_K
    session_k: int = DEFAULT_SESSION_K
    reader: ReaderSettings = field(default_factory=ReaderSettings)
    seed: int = 0
    shard: tuple[int, int] = (0, 1)
    embedding_spec: str = "st:minilm"

    def select(self, suite: Suite) -> list[Episode]:
        """The episodes to run, in suite order; unknown ids or paradigms are one clear error."""
        chosen = suite.episodes
        if not chosen:
            raise ConfigError(f"{self.sessions_dir}: suite {suite.name!r} holds no episodes (only specs?). Realize "
                              f"them first (memprobe generate episodes) or point --sessions at a folder with "
                              f"episodes.jsonl.")
        if self.episodes:
            known = {e.episode_id for e in chosen}
            unknown = [e for e in self.episodes if e not in known]
            if unknown:
                raise ConfigError(f"--episodes: {', '.join(unknown)} not in {self.sessions_dir} (it holds "
                                  f"{', '.join(sorted(known))}).")
            wanted = set(self.episodes)
            chosen = [e for e in chosen if e.episode_id in wanted]
        if self.paradigms:
            present = {e.paradigm for e in suite.episodes}
            unknown = [p for p in self.paradigms if p not in present]
            if unknown:
                raise ConfigError(f"--paradigms: {', '.join(unknown)} not in {self.sessions_dir} (it holds "
                                  f"{', '.join(sorted(present))}).")
            chosen = [e for e in chosen if e.paradigm in set(self.paradigms)]
        return chosen[:self.limit] if self.limit is not None else chosen

    def config(self, episodes: Sequence[Episode], llm_resolved: dict[str, Any]) -> dict[str, Any]:
        return {
            "suite": "paradigms", "sessions": str(self.sessions_dir), "episodes": [e.episode_id for e in episodes],
            "paradigms": self.paradigms, "systems": self.systems,
            "input_protocols": {s: input_protocol_of(s) for s in self.systems}, "ingest": self.ingest, "k": self.k,
            "session_k": self.session_k, "reader_max_tokens": self.reader.max_tokens,
            "temperature": self.reader.temperature, "seed": self.seed, "shard": f"{self.shard[0]}/{self.shard[1]}",
            "embeddings": self.embedding_spec, "models": llm_resolved,
            "episode_digests": {e.episode_id: episode_digest(e) for e in episodes},
        }


def episode_digest(episode: Episode) -> str:
    """A short hash of everything an episode holds (sessions, probes, gold, spec): a resume over a suite
    whose episode was since re-realized or edited would otherwise mix two versions of it in one run."""
    return hashlib.sha256(orjson.dumps(episode.model_dump(mode="json"), option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


def recorded_episode_digests(record: Path) -> dict[str, str] | None:
    """The digests of the episodes ``record``'s units ran, from the episode each unit stored as its
    ``inputs_ref`` payload; None when some unit stored none (then nothing can be checked)."""
    from memprobe_engine.events.payloads import PayloadReader
    from memprobe_engine.events.reader import open_recording

    digests: dict[str, str] = {}
    payloads = PayloadReader(record)
    with open_recording(record) as reader:
        for span in reader.iter_events(kinds=["span_begin"]):
            if span.kind != "span_begin" or span.span_kind != "episode" or "episode_id" not in span.attrs:
                continue
            ref = span.attrs.get("inputs_ref")
            if not isinstance(ref, str):
                return None
            stored = payloads.get(ref)
            digests[str(span.attrs["episode_id"])] = hashlib.sha256(
                orjson.dumps(stored, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]
    return digests


def upgraded_digests(record: Path, previous: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    """An older header (made before episode contents were fingerprinted) with the digests its units'
    stored episodes show; episodes it never started take today's (nothing of theirs can mix).
    Unchanged when some unit stored no episode: the resume is then refused as unverifiable."""
    recorded = recorded_episode_digests(record)
    if recorded is None:
        return previous
    return {**previous, "episode_digests": {**(ParadigmConfig.of(config).episode_digests or {}), **recorded}}


def changed_episodes_message(record: Path, previous: dict[str, Any], config: dict[str, Any]) -> str | None:
    """Why ``record`` cannot be resumed because of its episodes' contents, or None when they match."""
    before = ParadigmConfig.of(previous).episode_digests
    ours = ParadigmConfig.of(config)
    now = ours.episode_digests or {}
    if before is None:
        return (f"{record} was recorded before MemProbe fingerprinted episode contents and without a copy of each "
                f"unit's episode, so a resume cannot check "
                f"that its episodes are unchanged in {ours.sessions}. Pass another --record folder to run "
                f"them afresh.")
    changed = sorted(e for e in set(before) & set(now) if before[e] != now[e])
    if not changed:
        return None
    return (f"{record}: episode(s) {', '.join(changed)} in {ours.sessions} changed since this recording was "
            f"made (content digest differs), so resuming would mix two versions. Pass another --record folder to "
            f"run them afresh.")


#: One unit: an episode and the system (memory system, reference protocol or heuristic) answering it.
Unit = tuple[Episode, str]


@dataclass
class UnitServices:
    """Run-wide services shared by every unit, with the plan."""

    chat: ChatClient
    embedder: TextEmbedder | None
    recorder: Recorder
    plan: ParadigmPlan


def _record_probe(ctx: UnitServices, episode: Episode, index: int, probe: Probe, protocol: str,
                  evidence: Evidence | None, result: ReaderResult) -> None:
    ctx.recorder.emit(ProbeAnswer(episode_id=episode.episode_id, input_protocol=protocol, probe_index=index,
                                  probe_type=probe.probe_type, question=probe.question,
                                  retrieved=evidence.retrieved if evidence is not None else [],
                                  answer=result.answer, error=result.error, llm_call_seq=result.llm_call_seq))
    # The run's own score in the default mode (the paper's labels), the other mode as a layer beside it.
    # Each score's scorer_version names its mode (kept out of the header: a recording made before the
    # modes must still resume).
    for mode in SCORING_MODES:
        scored = score_probe(probe, result.answer, error=result.error, spec=episode.latent_spec,
                             episode_id=episode.episode_id, probe_index=index, mode=mode)
        scored.layer = mode_layer(mode)
        ctx.recorder.emit(scored)


async def _memory_unit(ctx: UnitServices, episode: Episode, system_name: str) -> None:
    from memprobe_engine.memory.registry import create_system

    services = MemoryServices(recorder=ctx.recorder, clock=SimClock(),
                              seed=unit_seed(ctx.plan.seed, episode.episode_id, system_name), chat=ctx.chat,
                              embedder=ctx.embedder)
    system = create_system(system_name, services)
    await ingest_episode(system, episode, recorder=ctx.recorder, clock=services.clock, granularity=ctx.plan.ingest)
    record_footprint(ctx.recorder, system)
    for index, probe in enumerate(episode.probes):
        with ctx.recorder.span(f"probe {index}: {probe.probe_type}", "probe", episode_id=episode.episode_id,
                               probe_index=index, probe_type=probe.probe_type):
            hits = await system.search(probe.question, ctx.plan.k)
            ctx.recorder.emit(Retrieval(query=probe.question, k=ctx.plan.k, item_ids=[h.id for h in hits],
                                        scores=[h.score for h in hits], purpose="reader"))
            evidence = memory_evidence(hits)
            result = await read_probe(ctx.chat, evidence, probe.question, probe.probe_type, ctx.plan.reader)
            _record_probe(ctx, episode, index, probe, "memory", evidence, result)


async def _reference_unit(ctx: UnitServices, episode: Episode, protocol: str) -> None:
    sessions = ordered_sessions(episode)
    index_ = None
    if protocol in ("naive_rag", "time_aware_rag"):
        if ctx.embedder is None:  # needs_embedder() names both, so a run always has one here
            raise ConfigError(f"{protocol} ranks sessions by embedding, but the run has no embedder.")
        index_ = SessionIndex(sessions, ctx.embedder)
    for index, probe in enumerate(episode.probes):
        with ctx.recorder.span(f"probe {index}: {probe.probe_type}", "probe", episode_id=episode.episode_id,
                               probe_index=index, probe_type=probe.probe_type):
            if protocol == "full_context":
                evidence = full_context_evidence(sessions)
            elif protocol == "oracle_rag":
                evidence = oracle_evidence(sessions)
            else:
                assert index_ is not None
                evidence = await index_.evidence(probe.question, ctx.plan.session_k,
                                                 time_aware=protocol == "time_aware_rag")
                ctx.recorder.emit(Retrieval(query=probe.question, k=ctx.plan.session_k,
                                            item_ids=[item.id for item in evidence.retrieved],
                                            scores=[item.score for item in evidence.retrieved], purpose="reader"))
            result = await read_probe(ctx.chat, evidence, probe.question, probe.probe_type, ctx.plan.reader)
            _record_probe(ctx, episode, index, probe, protocol, evidence, result)


def _heuristic_unit(ctx: UnitServices, episode: Episode, name: str) -> None:
    belief = HEURISTIC_RULES[name](episode, ordered_sessions(episode))
    for index, probe in enumerate(episode.probes):
        with ctx.recorder.span(f"probe {index}: {probe.probe_type}", "probe", episode_id=episode.episode_id,
                               probe_index=index, probe_type=probe.probe_type):
            answer = heuristic_answer(belief, probe.probe_type, name)
            _record_probe(ctx, episode, index, probe, "heuristic", None,
                          ReaderResult(answer=answer, error=None, llm_call_seq=None))


async def run_unit(ctx: UnitServices, episode: Episode, system: str) -> None:
    """One episode × one system, end to end, inside its ``episode`` span."""
    protocol = input_protocol_of(system)
    inputs_ref = ctx.recorder.put_payload(episode.model_dump(mode="json"))
    # ``unit`` names the episode on every event of the unit: the store timeline keys on (unit, system),
    # and concurrent units must not share a track.
    with ctx.recorder.span(f"{episode.episode_id} × {system}", "episode", unit=episode.episode_id, system=system,
                           episode_id=episode.episode_id, input_protocol=protocol, paradigm=episode.paradigm,
                           condition=episode.condition, expected_behavior=episode.expected_behavior,
                           split=episode.is_split, sessions=len(episode.sessions), probes=len(episode.probes),
                           inputs_ref=inputs_ref):
        if protocol == "memory":
            await _memory_unit(ctx, episode, system)
        elif protocol == "heuristic":
            _heuristic_unit(ctx, episode, system)
        else:
            await _reference_unit(ctx, episode, protocol)


def check_systems(systems: Sequence[str]) -> None:
    """Fail before any model call on a name that is neither a protocol, a heuristic nor a system."""
    from memprobe_engine.memory.registry import load_system_class

    if not systems:
        raise ConfigError("--systems is empty; name at least one, e.g. --systems full_context,latest_value,amem.")
    for name in systems:
        if input_protocol_of(name) == "memory":
            try:
                load_system_class(name)
            except ConfigError as err:
                raise ConfigError(f"{err} Protocol B also accepts the input protocols {', '.join(INPUT_PROTOCOLS)} "
                                  f"and the heuristics {', '.join(HEURISTICS)}.") from None


def needs_models(systems: Sequence[str]) -> bool:
    return any(input_protocol_of(s) != "heuristic" for s in systems)


def needs_embedder(systems: Sequence[str]) -> bool:
    """The retrieval baselines embed sessions; a memory system embeds when its class says so."""
    from memprobe_engine.memory.registry import system_needs

    return any(s in ("naive_rag", "time_aware_rag") or (input_protocol_of(s) == "memory" and system_needs(s).embedder)
               for s in systems)


class ParadigmRun:
    """Protocol B as the orchestrator runs it (:class:`~memprobe_engine.orchestration.protocol.BenchmarkProtocol`).

    Constructing it validates the plan (systems, episodes, paradigms) before any recording exists."""

    suite = "paradigms"
    resume_kinds: tuple[str, ...] = ()
    prompt_modules: tuple[str, ...] = PROMPT_MODULES

    def input_hashes(self, config: dict[str, Any]) -> dict[str, str]:
        return input_hashes(config)

    def __init__(self, plan: ParadigmPlan) -> None:
        check_systems(plan.systems)
        self.plan = plan
        self.shard = plan.shard
        self.episodes = plan.select(load_suite(plan.sessions_dir))

    def config(self, llm_config: LLMConfig) -> dict[str, Any]:
        return self.plan.config(self.episodes, llm_config.resolved() if needs_models(self.plan.systems) else {})

    def resume_config(self, record: Path, previous: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(previous.get("episode_digests"), dict):
            previous = upgraded_digests(record, previous, config)
        stale = changed_episodes_message(record, previous, config)
        if stale is not None:
            raise RecordingError(stale)
        return previous

    def needs(self) -> RunNeeds:
        return RunNeeds(models=needs_models(self.plan.systems),
                        embedding_spec=self.plan.embedding_spec if needs_embedder(self.plan.systems) else None)

    def units(self) -> list[Unit]:
        return [(episode, system) for episode in self.episodes for system in self.plan.systems]

    def unit_key(self, unit: Unit) -> UnitKey:
        return unit[0].episode_id, unit[1]

    def unit_label(self, unit: Unit) -> str:
        return f"{unit[0].episode_id} × {unit[1]}"

    def unit_of_span(self, span: SpanBegin) -> UnitKey | None:
        if span.span_kind == "episode" and "episode_id" in span.attrs:
            return str(span.attrs["episode_id"]), str(span.system)
        return None

    def resume_event(self, event: AnyEvent) -> None:
        return None

    async def run_unit(self, services: RunServices, unit: Unit) -> None:
        await run_unit(UnitServices(chat=services.chat, embedder=services.embedder, recorder=services.recorder,
                                    plan=self.plan), *unit)


async def run_paradigms(plan: ParadigmPlan, record: Path, *, llm_config: LLMConfig, concurrency: int = 1,
                        cache: ResponseStore | None = None, backend_factory: BackendFactory | None = None,
                        embedder: TextEmbedder | None = None, progress: ProgressHook | None = None,
                        signals: bool = False, ray: RayOptions | None = None) -> Path:
    """Run (or resume) a protocol-B benchmark into ``record``; returns the recording directory (see
    :func:`memprobe_engine.orchestration.run.run_protocol`)."""
    return await run_protocol(ParadigmRun(plan), record, llm_config=llm_config, concurrency=concurrency, cache=cache,
                              backend_factory=backend_factory, embedder=embedder, progress=progress,
                              signals=signals, ray=ray)


def describe_plan(plan: ParadigmPlan, record: Path | None = None) -> list[str]:
    """What ``--dry-run`` prints: units, sessions to ingest, reader calls; no model is called. With
    ``record`` holding an earlier session of the run, units it finished are left out (as resume would)."""
    run = ParadigmRun(plan)
    episodes = run.episodes
    units = select_units(run.units(), plan.shard)
    total, finished = len(units), 0
    if record is not None:
        completed = read_resume(shard_record_dir(record, plan.shard), unit_of=run.unit_of_span).completed_units
        finished = sum(1 for unit in units if run.unit_key(unit) in completed)
        units = [unit for unit in units if run.unit_key(unit) not in completed]
    by_kind: dict[str, int] = {}
    sessions = reader_calls = 0
    for episode, system in units:
        kind = input_protocol_of(system)
        by_kind[kind] = by_kind.get(kind, 0) + 1
        if kind == "memory":
            sessions += len(episode.sessions)
        if kind != "heuristic":
            reader_calls += len(episode.probes)
    lines = [(f"suite {plan.sessions_dir}: {len(episodes)} episode(s) × {len(plan.systems)} system(s) = "
              f"{total} unit(s) in shard {plan.shard[0]}/{plan.shard[1]}"),
             "units to run by input protocol: " + (", ".join(f"{k} {n}" for k, n in sorted(by_kind.items())) or "none"),
             f"sessions ingested by memory systems: {sessions} (their memory_writer calls depend on the system)",
             f"reader calls (role reader, k={plan.k}, session_k={plan.session_k}): {reader_calls}",
             f"probes scored by rules: {sum(len(e.probes) for e, _ in units)}"]
    if finished:
        lines.insert(1, f"{finished} unit(s) already finished in {record} are skipped (resume)")
    return lines


__all__ = ["DEFAULT_K", "DEFAULT_SESSION_K", "ParadigmPlan", "ParadigmRun", "describe_plan", "input_protocol_of",
           "run_paradigms", "run_unit"]
