"""The small interface every benchmark protocol implements, and the services a run hands its units.

A protocol (protocol A's recovery, protocol B's paradigms, a third one tomorrow) says only what is
its own: the configuration its fingerprint covers, how it reads an older recording's settings, what the
run needs (models, an embedder), its units in order, how a unit's span names it, and how to run
one unit. Everything else — shard folder, header check, resume state, the recording's lifecycle,
the chat client over recorded responses, the embedder, scheduling, progress, closing — is
:func:`memprobe_engine.orchestration.run.run_protocol`'s, written once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from memprobe_engine.events.recorder import Recorder
from memprobe_engine.events.run import SpanBegin
from memprobe_engine.events.union import AnyEvent
from memprobe_engine.orchestration.resume import UnitKey

if TYPE_CHECKING:  # the clients' modules are heavy; a protocol module is imported by the CLI
    from memprobe_engine.llm.client import ChatClient
    from memprobe_engine.llm.config import LLMConfig
    from memprobe_engine.llm.embeddings import TextEmbedder

UnitT = TypeVar("UnitT")


@dataclass(frozen=True)
class RunNeeds:
    """What a run must set up before its first unit."""

    #: Whether any unit calls a model (the header's ``models`` is empty otherwise).
    models: bool = True
    #: The embedding spec when some unit embeds text (a memory system or a retrieval baseline), else None.
    embedding_spec: str | None = None


#: A value units share across processes: JSON-shaped (it travels between them).
SharedValue = dict[str, Any] | list[Any] | str | int | float | bool | None


class SharedValues(Protocol):
    """Values the units of one run share across processes (a Ray run's relay at the driver), by key:
    the first unit to :meth:`acquire` a key works it out and :meth:`put` s it (or :meth:`release` s it
    when it could not); every other unit that asks meanwhile waits for that value instead of working
    it out again. Values are JSON-shaped (they travel between processes)."""

    async def acquire(self, key: str) -> SharedValue:
        """The value held for ``key``, waiting while another unit works it out; None: the caller
        works it out and must then ``put`` or ``release`` it."""
        ...

    def put(self, key: str, value: SharedValue) -> SharedValue:
        """Hold ``value`` unless a value was held first; returns the one held."""
        ...

    def release(self, key: str) -> None:
        """Give up working out ``key`` (it failed): the next unit that waits for it works it out."""
        ...


@dataclass
class RunServices:
    """Run-wide services every unit shares, typed: the recorder, the chat client (answering from the
    recording being resumed first), the embedder when the run needs one."""

    recorder: Recorder
    chat: ChatClient
    embedder: TextEmbedder | None
    llm_config: LLMConfig
    #: How many units run at once (a unit may use it to bound its own concurrency).
    concurrency: int = 1
    #: One line of what a unit is doing now (the run's progress display shows it).
    progress: Callable[[str], None] | None = None
    #: Values shared with units in other processes (a Ray run), None where every unit runs in this
    #: process: a protocol's own run-wide memo (protocol A's stage-0 verdicts) goes through it.
    shared: SharedValues | None = None


class BenchmarkProtocol(Protocol[UnitT]):
    """One benchmark protocol as the orchestrator runs it; ``UnitT`` is its unit (user × system, ...).
    It may also offer ``unit_cost(unit) -> float``, its estimate of a unit's length: the orchestrator
    starts the costliest units first (:func:`~memprobe_engine.orchestration.units.unit_cost`)."""

    #: The header's ``suite`` and the run id's prefix, e.g. ``recovery``.
    suite: str
    #: The shard this run records: (index, count).
    shard: tuple[int, int]

    def config(self, llm_config: LLMConfig) -> dict[str, Any]:
        """Everything that decides the run's results; its fingerprint goes in the header."""
        ...

    def resume_config(self, record: Path, previous: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
        """``previous`` (the header's config of ``record``) as this protocol compares it with ``config``:
        upgraded where an older recording lacks a setting it can be shown to have had. Raise
        :class:`~memprobe_engine.errors.RecordingError` to refuse a resume for the protocol's own reason."""
        ...

    def needs(self) -> RunNeeds:
        ...

    def units(self) -> Sequence[UnitT]:
        """Every unit of the whole run in order (the orchestrator takes the shard's share)."""
        ...

    def unit_key(self, unit: UnitT) -> UnitKey:
        ...

    def unit_label(self, unit: UnitT) -> str:
        ...

    def unit_of_span(self, span: SpanBegin) -> UnitKey | None:
        """The unit a recorded ``span_begin`` opens, or None for any other span."""
        ...

    #: The protocol's prompt modules (paths under ``memprobe_engine/``), hashed into the header's provenance.
    prompt_modules: tuple[str, ...]

    def input_hashes(self, config: dict[str, Any]) -> dict[str, str]:
        """Content hashes of the inputs ``config`` names, for the header's provenance."""
        ...

    #: Event kinds besides spans and model calls that carry protocol state across a resume.
    resume_kinds: tuple[str, ...]

    def resume_event(self, event: AnyEvent) -> None:
        """Take in one ``resume_kinds`` event of the recording being resumed."""
        ...

    async def run_unit(self, services: RunServices, unit: UnitT) -> None:
        """One unit, end to end, inside its own span (the span ``unit_of_span`` recognizes)."""
        ...


__all__ = ["BenchmarkProtocol", "RunNeeds", "RunServices", "SharedValue", "SharedValues"]
