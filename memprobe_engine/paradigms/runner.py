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

Resume works as in protocol A: the same command against the same folder skips units whose span
closed ``ok`` and serves every recorded model response back by request hash; other settings are
refused by the header's fingerprint.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import orjson

from memprobe_engine.errors import ConfigError, RecordingError
from memprobe_engine.events.header import HEADER_FILE, new_header
from memprobe_engine.events.memory import Retrieval
from memprobe_engine.events.paradigms import ProbeAnswer
from memprobe_engine.events.payloads import PayloadReader
from memprobe_engine.events.reader import open_recording
from memprobe_engine.events.recorder import Recorder
from memprobe_engine.llm.backends.replay import recorded_answers
from memprobe_engine.llm.types import ChatResult, Usage
from memprobe_engine.memory.base import MemoryServices, SimClock
from memprobe_engine.paradigms.baselines import (
    HEURISTIC_RULES,
    HEURISTICS,
    INPUT_PROTOCOLS,
    SessionIndex,
    full_context_evidence,
    heuristic_answer,
    oracle_evidence,
)
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
from memprobe_engine.paradigms.scoring import score_probe
from memprobe_engine.paradigms.suite import Episode, Probe, Suite, load_suite
from memprobe_engine.runner import (RecordedResponses, UnitTally, can_resume, close_run_clients, fingerprint, run_units,
                                    shard_record_dir)

#: Default number of memories a memory system's search returns to the reader.
DEFAULT_K = 10
#: Default number of sessions naive / time-aware RAG retrieve (the upstream top-k).
DEFAULT_SESSION_K = 5


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


def changed_episodes_message(record: Path, previous: dict[str, Any], config: dict[str, Any]) -> str | None:
    """Why ``record`` cannot be resumed because of its episodes' contents, or None when they match."""
    before = previous.get("episode_digests")
    now: dict[str, str] = config["episode_digests"]
    if not isinstance(before, dict):
        return (f"{record} was recorded before MemProbe fingerprinted episode contents, so a resume cannot check "
                f"that its episodes are unchanged in {config['sessions']}. Pass another --record folder to run "
                f"them afresh.")
    changed = sorted(e for e in set(before) & set(now) if before[e] != now[e])
    if not changed:
        return None
    return (f"{record}: episode(s) {', '.join(changed)} in {config['sessions']} changed since this recording was "
            f"made (content digest differs), so resuming would mix two versions. Pass another --record folder to "
            f"run them afresh.")


def select_units(episodes: Sequence[Episode], systems: Sequence[str],
                 shard: tuple[int, int]) -> list[tuple[Episode, str]]:
    units = [(episode, system) for episode in episodes for system in systems]
    return [unit for i, unit in enumerate(units) if i % shard[1] == shard[0]]


def unit_seed(run_seed: int, episode_id: str, system: str) -> int:
    """A per-unit seed that does not depend on scheduling order."""
    return zlib.crc32(f"{run_seed}:{episode_id}:{system}".encode())


@dataclass
class ParadigmResume:
    completed_units: set[tuple[str, str]] = field(default_factory=set)
    responses: dict[str, ChatResult] = field(default_factory=dict)


def load_paradigm_resume(record: Path) -> ParadigmResume:
    """What an earlier session of this run finished: (episode, system) units and model responses."""
    state = ParadigmResume()
    payloads = PayloadReader(record)
    open_units: dict[str, tuple[str, str]] = {}
    with open_recording(record) as reader:
        for event in reader.iter_events(kinds=["span_begin", "span_end", "llm_call"]):
            if event.kind == "span_begin" and event.span_kind == "episode" and "episode_id" in event.attrs:
                open_units[event.span_id or ""] = (str(event.attrs["episode_id"]), str(event.system))
            elif event.kind == "span_end" and event.span_id in open_units and event.status == "ok":
                state.completed_units.add(open_units[event.span_id or ""])
            elif event.kind == "llm_call" and event.error is None and event.response_text is not None:
                for key, text in recorded_answers(event.model_dump(mode="json"), payloads).items():
                    usage = event.usage if key == event.request_hash else None
                    state.responses.setdefault(key, ChatResult(text=text, model=event.model, usage=Usage(
                        prompt_tokens=usage.prompt_tokens if usage else 0,
                        completion_tokens=usage.completion_tokens if usage else 0)))
    return state


@dataclass
class UnitServices:
    """Run-wide services shared by every unit."""

    chat: Any
    embedder: Any
    recorder: Recorder
    plan: ParadigmPlan


def _record_probe(ctx: UnitServices, episode: Episode, index: int, probe: Probe, protocol: str,
                  evidence: Evidence | None, result: ReaderResult) -> None:
    ctx.recorder.emit(ProbeAnswer(episode_id=episode.episode_id, input_protocol=protocol, probe_index=index,
                                  probe_type=probe.probe_type, question=probe.question,
                                  retrieved=evidence.retrieved if evidence is not None else [],
                                  answer=result.answer, error=result.error, llm_call_seq=result.llm_call_seq))
    ctx.recorder.emit(score_probe(probe, result.answer, error=result.error, spec=episode.latent_spec,
                                  episode_id=episode.episode_id, probe_index=index))


async def _memory_unit(ctx: UnitServices, episode: Episode, system_name: str) -> None:
    from memprobe_engine.memory.registry import create_system
    from memprobe_engine.recovery.rollout import record_footprint

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
    index_ = SessionIndex(sessions, ctx.embedder) if protocol in ("naive_rag", "time_aware_rag") else None
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
    # user_id carries the episode id so every event of the unit names its (episode, system) cell —
    # the store timeline keys on (user_id, system), and concurrent units must not share a track.
    with ctx.recorder.span(f"{episode.episode_id} × {system}", "episode", user_id=episode.episode_id, system=system,
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


ProgressHook = Callable[[str, int, int], None]


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
    return any(s in ("naive_rag", "time_aware_rag") or (input_protocol_of(s) == "memory" and s != "nomem")
               for s in systems)


async def run_paradigms(plan: ParadigmPlan, record: Path, *, llm_config: Any, concurrency: int = 1,
                        cache: Any | None = None, backend_factory: Any | None = None, embedder: Any | None = None,
                        progress: ProgressHook | None = None, signals: bool = False) -> Path:
    """Run (or resume) a protocol-B benchmark into ``record``; returns the recording directory.

    The recording's lifecycle (run_start / run_end with its status, spans left open closed as
    cancelled, lock released) is :func:`memprobe_engine.lifecycle.recorded_run`'s; ``signals=True``
    (the CLI) makes SIGTERM end the run as ``interrupted``. Every flag is validated before the
    recording is created."""
    from memprobe_engine.lifecycle import recorded_run
    from memprobe_engine.llm.client import ChatClient

    check_systems(plan.systems)
    episodes = plan.select(load_suite(plan.sessions_dir))
    config = plan.config(episodes, llm_config.resolved() if needs_models(plan.systems) else {})
    config["fingerprint"] = fingerprint(config)
    record = shard_record_dir(record, plan.shard)
    state = ParadigmResume()
    if (record / HEADER_FILE).exists():
        with open_recording(record) as reader:
            previous_config = reader.header.config
            previous = previous_config.get("fingerprint")
        stale = changed_episodes_message(record, previous_config, config)
        if stale is not None:
            raise RecordingError(stale)
        if not can_resume(previous_config, config):
            raise RecordingError(f"{record} holds a run with different settings (fingerprint {previous} ≠ "
                                 f"{config['fingerprint']}). Resume it with the same command and flags, or pass "
                                 f"another --record folder.")
        state = load_paradigm_resume(record)
    wants_embedder = embedder is None and needs_embedder(plan.systems)
    if wants_embedder:
        from memprobe_engine.llm.embeddings import parse_embedding_spec

        parse_embedding_spec(plan.embedding_spec, origin="--embeddings")  # before any recording exists
    run_id = "paradigms-" + dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    header = None if (record / HEADER_FILE).exists() else new_header(run_id, "paradigms", config)
    async with recorded_run(record, header=header, suite="paradigms", signals=signals,
                            resumed=bool(state.completed_units or state.responses)) as run:
        recorder = run.recorder
        chat = ChatClient(llm_config, recorder=recorder, cache=RecordedResponses(state.responses, cache),
                          backend_factory=backend_factory)
        run.scrub = getattr(chat, "scrub", None)
        units = [(e, s) for e, s in select_units(episodes, plan.systems, plan.shard)
                 if (e.episode_id, s) not in state.completed_units]
        try:
            if wants_embedder:
                from memprobe_engine.llm.embeddings import Embedder

                embedder = Embedder.from_spec(plan.embedding_spec, recorder=recorder)
            ctx = UnitServices(chat=chat, embedder=embedder, recorder=recorder, plan=plan)
            with recorder.span("run", "run"):
                await run_units(
                    [(f"{episode.episode_id} × {system}", partial(run_unit, ctx, episode, system))
                     for episode, system in units],
                    concurrency=concurrency, tally=UnitTally(len(units)), progress=progress)
        finally:
            await close_run_clients(chat, embedder)
    return record


def describe_plan(plan: ParadigmPlan, record: Path | None = None) -> list[str]:
    """What ``--dry-run`` prints: units, sessions to ingest, reader calls; no model is called. With
    ``record`` holding an earlier session of the run, units it finished are left out (as resume would)."""
    check_systems(plan.systems)
    episodes = plan.select(load_suite(plan.sessions_dir))
    units = select_units(episodes, plan.systems, plan.shard)
    total, finished = len(units), 0
    if record is not None and (shard_record_dir(record, plan.shard) / HEADER_FILE).exists():
        completed = load_paradigm_resume(shard_record_dir(record, plan.shard)).completed_units
        finished = sum(1 for e, s in units if (e.episode_id, s) in completed)
        units = [(e, s) for e, s in units if (e.episode_id, s) not in completed]
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


__all__ = ["DEFAULT_K", "DEFAULT_SESSION_K", "ParadigmPlan", "describe_plan", "input_protocol_of",
           "load_paradigm_resume", "run_paradigms", "run_unit"]
