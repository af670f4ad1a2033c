"""What a protocol-B run will ask of its models, before it runs: calls and tokens per role, as a range.

The estimate walks the run's own units (episode × system, the shard's) and builds the real prompts
from the suite's real sessions and probes:

* **reader** — one call per probe of every unit that is not a heuristic. Its prompt is the real
  reader prompt (``reader.reader_messages``) around the evidence the input protocol hands over:
  ``full_context`` and ``oracle_rag`` exactly; ``naive_rag`` / ``time_aware_rag`` the ``session_k``
  shortest to the ``session_k`` longest sessions (expected: ``session_k`` sessions of the mean size);
  a memory system's ``k`` stored items, from its smallest to its largest (expected: the mean).
* **memory_writer** — a memory system's own calls while it ingests the sessions (turn by turn, or one
  transcript per session with ``--ingest session``): a system that declares ``expected_writes``
  (``amem``) gives its calls and stored items exactly from its control flow; any other writing system
  is taken as one to three calls per observation, and its items as 0.3×–1.5× of the observation.
* the rule scorer and the heuristics call no model.

Completion tokens are one structured answer per call (``llm/usage_estimate.py``), capped by the
reply cap. Tokens are characters / 3.8 expected (3.2–5.0 for the range).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from memprobe_engine.llm.usage_estimate import CostEstimate, Triple, answer_tokens
from memprobe_engine.memory.base import SimClock
from memprobe_engine.orchestration.units import select_units
from memprobe_engine.paradigms.baselines import (
    RETRIEVED_HEADING,
    TIME_AWARE_HEADING,
    full_context_evidence,
    oracle_evidence,
    session_text,
)
from memprobe_engine.paradigms.config import ParadigmConfig
from memprobe_engine.paradigms.protocol import ordered_sessions, session_observations
from memprobe_engine.paradigms.reader import MEMORY_HEADING, Evidence, reader_messages
from memprobe_engine.paradigms.runner import ParadigmPlan, ParadigmRun, input_protocol_of
from memprobe_engine.paradigms.suite import Episode

#: Heading of a retrieved-sessions block, as ``baselines._block`` writes it ("--- Retrieved session 1 ---").
_BLOCK_LABEL_CHARS = 30
#: A writing system without ``expected_writes``: calls per observation and their prompt characters
#: around the observation's text (as protocol A's estimate takes them).
_WRITER_CALLS = (1.0, 2.0, 3.0)
_WRITER_PROMPT = (1500.0, 3000.0, 6000.0)
#: Its stored items against the observation's text.
_WRITER_ITEM = (0.3, 1.0, 1.5)


def estimate_paradigms(plan: ParadigmPlan) -> CostEstimate:
    """The calls and tokens per role a run of ``plan`` is expected to need (see the module docstring)."""
    run = ParadigmRun(plan)
    estimate = CostEstimate(roles={})
    generic: set[str] = set()
    for episode, system in select_units(run.units(), plan.shard):
        protocol = input_protocol_of(system)
        if protocol == "heuristic":
            continue
        if protocol == "memory":
            items = _memory_writes(estimate, plan, episode, system, generic)
            evidence = _k_of(items, plan.k)
            heading = MEMORY_HEADING
        else:
            sessions = ordered_sessions(episode)
            if protocol in ("full_context", "oracle_rag"):
                exact = (full_context_evidence(sessions) if protocol == "full_context" else oracle_evidence(sessions))
                evidence = (float(len(exact.text)),) * 3
                heading = exact.heading
            else:
                evidence = _k_of([len(session_text(s)) + _BLOCK_LABEL_CHARS + 2.0 for s in sessions], plan.session_k)
                heading = TIME_AWARE_HEADING if protocol == "time_aware_rag" else RETRIEVED_HEADING
        for probe in episode.probes:
            shell = sum(len(m.content) for m in reader_messages(Evidence(heading=heading, text="x"), probe.question,
                                                                 probe.probe_type)) - 1
            estimate.role("reader").add_calls((1, 1, 1), (shell + evidence[0], shell + evidence[1],
                                                          shell + evidence[2]),
                                              answer_tokens(plan.reader.max_tokens))
    if generic:
        estimate.notes.append(f"{', '.join(sorted(generic))}: no expected_writes of its own, so taken as 1–3 "
                              f"memory_writer calls per observation and items of 0.3×–1.5× the observation")
    return estimate


def _k_of(sizes: Sequence[float], k: int) -> Triple:
    """Characters of ``k`` of these items, one per line: the k smallest, k of the mean size, the k largest."""
    if not sizes or k <= 0:
        return 0.0, 0.0, 0.0
    ordered = sorted(sizes)
    n = min(k, len(ordered))
    mean = sum(ordered) / len(ordered)
    return float(sum(ordered[:n])) + n, n * mean + n, float(sum(ordered[-n:])) + n


def _memory_writes(estimate: CostEstimate, plan: ParadigmPlan, episode: Episode, system: str,
                   generic: set[str]) -> list[float]:
    """Record a memory system's writer calls over the episode's ingestion; its stored items' sizes."""
    from memprobe_engine.memory.registry import load_system_class, system_needs

    clock = SimClock()
    observations = [(o.kind, o.text) for session in ordered_sessions(episode)
                    for o in session_observations(session, clock, plan.ingest)]
    expected_writes = getattr(load_system_class(system), "expected_writes", None)
    if expected_writes is not None:
        calls, items = expected_writes(observations)
        writer = estimate.role("memory_writer")
        for prompt_chars, cap in calls:
            writer.add_calls((1, 1, 1), (prompt_chars,) * 3, answer_tokens(cap))
        return [float(size) for size in items]
    sizes = [float(len(text)) for _, text in observations if text.strip()]
    if "memory_writer" in system_needs(system).model_roles:
        generic.add(system)
        for size in sizes:
            estimate.role("memory_writer").add_calls(_WRITER_CALLS, (_WRITER_PROMPT[0] + size, _WRITER_PROMPT[1] + size,
                                                                     _WRITER_PROMPT[2] + size),
                                                     answer_tokens(None))
        return [size * _WRITER_ITEM[1] for size in sizes]
    return sizes


def plan_from_config(config: ParadigmConfig | Mapping[str, object]) -> ParadigmPlan | None:
    """The plan a protocol-B recording's header config describes (for the report's estimate beside the
    actual tokens); None when it is not a paradigm run's header or its suite is not here."""
    from pathlib import Path

    from memprobe_engine.paradigms.reader import ReaderSettings

    if not isinstance(config, ParadigmConfig):
        config = ParadigmConfig.of(config)
    sessions = config.sessions
    if config.suite != "paradigms" or config.source or sessions is None or not Path(sessions).is_dir():
        return None
    shard = config.shard.split("/")
    return ParadigmPlan(
        sessions_dir=Path(sessions), systems=list(config.systems), episodes=config.episodes,
        paradigms=config.paradigms, ingest=config.ingest, k=config.k, session_k=config.session_k,
        reader=ReaderSettings(max_tokens=config.reader_max_tokens, temperature=config.temperature, seed=config.seed),
        seed=config.seed, shard=(int(shard[0]), int(shard[1])) if len(shard) == 2 else (0, 1),
        embedding_spec=config.embeddings)
