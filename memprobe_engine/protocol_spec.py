"""The one interface a benchmark protocol implements to be run, reported, compared and replayed.

A protocol (A's recovery, B's paradigms, a third one tomorrow) is one package whose ``spec`` module
defines a :class:`ProtocolSpec`, and one line in :mod:`memprobe_engine.protocols` (or an entry point
in the ``memprobe.protocols`` group) that names it. Everything protocol-specific a shared command
needs is asked of the spec: its run options (``memprobe run`` flags and ``-P key=value``), its plan,
its report, its comparison, the folds its replay index keeps, the headline a recordings browser
shows, the steps its memory stores are walked by, where its TUI screens live, its own commands (added
to the ``memprobe`` command tree, and to the shared ``generate`` and ``import`` groups) and the check of
its benchmark inputs (``memprobe sessions validate``). The CLI, report, compare, replay and TUI dispatch
through the spec instead of branching on a protocol's name.

The spec is deliberately small and synchronous; a protocol imports its heavy modules inside its
methods, so listing the protocols (``memprobe run --help``) loads none of them.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError
from rich.console import Console

from memprobe_engine.errors import ConfigError
from memprobe_engine.events.header import RecordingHeader
from memprobe_engine.events.header_config import HeaderConfig

if TYPE_CHECKING:  # heavy or optional: only for the types
    import pandas as pd
    import typer

    from memprobe_engine.report.eee_record import EeeResults
    from memprobe_engine.report.html_parts import HtmlSections
    from memprobe_engine.llm.cache import ResponseStore
    from memprobe_engine.llm.config import LLMConfig
    from memprobe_engine.llm.resolved import ResolvedProtocol
    from memprobe_engine.llm.usage_estimate import CostEstimate
    from memprobe_engine.orchestration.progress import ProgressHook
    from memprobe_engine.orchestration.ray_executor import RayOptions
    from memprobe_engine.replay.index import IndexFold
    from memprobe_engine.replay.session import ReplaySession
    from memprobe_engine.replay.store_steps import Labelled
    from memprobe_engine.report.compare_gate import Verdict
    from memprobe_engine.report.compare_inputs import Selection


#: How ``--layer`` names a run's own judgments (the scores it recorded; re-scores kept as named layers
#: sit beside them).
OWN_LAYER = "main"


class ProtocolOptions(BaseModel):
    """A protocol's own run options. Field names are the ``memprobe run`` flags' (``max_turns`` is
    ``--max-turns``) or ``-P`` keys; an unknown ``-P`` key is refused, not ignored."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True)
class RunCommon:
    """What every run has, whatever its protocol: where it records, what it runs on, how."""

    record: Path
    sessions: Path
    #: The ``--systems`` value as given (each protocol checks the names it accepts).
    systems: str
    config: Path | None
    shard: tuple[int, int]
    seed: int
    concurrency: int
    embeddings: str | None
    llm_config: LLMConfig
    cache: ResponseStore | None
    ray: RayOptions | None


@dataclass(frozen=True)
class PlannedRun:
    """A checked plan: what ``--dry-run`` prints, and how to start the run."""

    #: The resolved protocol (models per role, parameters) ``--dry-run`` prints.
    resolved: ResolvedProtocol
    #: Whether any unit calls a model (the model specs are checked before the recording pins them).
    needs_models: bool
    #: The expected calls, tokens and wall time per role (``--dry-run``), or None when it cannot be told.
    estimate: Callable[[], CostEstimate] | None
    #: Runs (or resumes) the recording; returns its folder.
    start: Callable[[ProgressHook], Coroutine[Any, Any, Path]]
    #: One line each, printed before the run (and by ``--dry-run``): an input read with a caveat, such
    #: as a damaged recording whose dialogues a fixed-dialogue run replays.
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class ReportRequest:
    """``memprobe report``'s flags, as every protocol's report reads them."""

    csv: Path | None = None
    parquet: Path | None = None
    tables: str | None = None
    plots: Path | None = None
    #: Judgment layers to read (``--layer``, checked by :func:`checked_layers`); empty: the run's own.
    layers: tuple[str, ...] = ()
    scoring: str | None = None


@dataclass(frozen=True)
class CompareRequest:
    """``memprobe compare``'s flags for two runs of one protocol."""

    changed_only: bool = False
    #: The judgment layer both runs are read under (``--layer``, checked); None: their own.
    layer: str | None = None
    plots: Path | None = None
    resamples: int = 2000
    seed: int | None = None


class ProtocolSpec:
    """One benchmark protocol as every shared command sees it (see the module docstring)."""

    #: The header's ``suite`` and ``memprobe run --suite`` value, e.g. ``recovery``.
    name: ClassVar[str]
    #: A few words for help texts, e.g. ``protocol A: hidden user-state recovery``.
    title: ClassVar[str]
    #: The protocol's own run options (their fields are the flags only this protocol reads).
    options: ClassVar[type[ProtocolOptions]] = ProtocolOptions
    #: What the protocol's runs (and imports) write into the header's ``config``, typed: readers get it
    #: from :meth:`config_of` (``memprobe_engine.protocols.typed_config``), never by raw key.
    config_model: ClassVar[type[HeaderConfig]] = HeaderConfig
    #: The module of the protocol's TUI entry (``memprobe_tui.<protocol>.entry``), or None: the TUI
    #: opens the recording in its generic overview.
    tui: ClassVar[str | None] = None
    #: How the memory view names a write after the protocol's last step.
    after_steps: ClassVar[str] = "after the run"
    #: How the memory view's title names the point after the last step.
    final_step: ClassVar[str] = "after the run"

    def owns(self, header: RecordingHeader) -> bool:
        """Whether a recording with this header is one of this protocol's runs."""
        return header.suite == self.name

    def config_of(self, header: RecordingHeader) -> HeaderConfig:
        """The header's config as :attr:`config_model` (older headers upgraded; unknown keys kept)."""
        return self.config_model.of(header)

    def plan(self, common: RunCommon, options: ProtocolOptions) -> PlannedRun:
        """Check the options and build the run; a bad value is one ConfigError naming its flag. (A
        protocol that is only read, e.g. an import's, need not run.)"""
        raise ConfigError(f"--suite {self.name}: {self.title} recordings can be read but not run by this MemProbe.")

    def report(self, recordings: Sequence[Path], request: ReportRequest, console: Console,
               errors: Console) -> None:
        """Print (and export) the protocol's tables of ``recordings`` (all of this protocol)."""
        raise ConfigError(f"memprobe report has no tables for {self.name} runs ({self.title}); open them with "
                          f"memprobe replay.")

    def frames(self, recordings: Sequence[Path]) -> Mapping[str, pd.DataFrame]:
        """The frames and tables ``memprobe report --csv`` writes for ``recordings`` (name → frame)."""
        raise ConfigError(f"{self.name} runs ({self.title}) have no report frames to export.")

    def compare(self, base: Selection, other: Selection, request: CompareRequest,
                console: Console) -> dict[str, object]:
        """Print two runs side by side; returns the comparison as plain data (``--json``)."""
        raise ConfigError(f"memprobe compare does not compare {self.name} runs yet ({self.title}); "
                          f"compare their reports instead: memprobe report {base.path} and {other.path}.")

    def compare_layers(self, recordings: Sequence[Path], names: Sequence[str] | None,
                       console: Console) -> dict[str, object]:
        """Print the judgment layers of ``recordings`` against their own judgments (``--layers``)."""
        raise ConfigError(f"memprobe compare --layers compares judgment layers, which {self.name} runs "
                          f"({self.title}) do not keep; memprobe report --layer NAME prints a layer of them.")

    def gate(self, comparison: Mapping[str, object], rule: str) -> Verdict:
        """``memprobe compare --fail-on RULE``: the verdict on what :meth:`compare` returned (``rule``
        is one of ``report.compare_gate.GATES``, already checked)."""
        raise ConfigError(f"--fail-on {rule}: {self.name} runs ({self.title}) have no CI gate; memprobe compare "
                          f"without --fail-on shows their differences.")

    def layers(self, recordings: Sequence[Path]) -> list[str]:
        """The judgment layers ``recordings`` hold besides the run's own (``--layer`` may name them)."""
        return []

    def index_folds(self) -> dict[str, IndexFold]:
        """The running summaries the replay index keeps for this protocol's recordings."""
        return {}

    def headline(self, session: ReplaySession) -> dict[str, float | None]:
        """The numbers a recordings browser shows for an indexed recording (name → value)."""
        return {}

    def headline_text(self, values: dict[str, float | None]) -> str:
        """:meth:`headline`'s numbers as a browser cell: three decimals each, ``—`` for none, ``/`` between."""
        return "/".join("—" if value is None else f"{value:.3f}" for value in values.values()) or "—"

    def store_steps(self, session: ReplaySession, unit: str, system: str, *, short: bool = True) -> Labelled:
        """The labelled steps the memory store of (unit, system) is walked by, in recording order."""
        return []

    def empty_store_note(self, header: RecordingHeader, system: str) -> str | None:
        """Why ``system`` recorded no memory operation in this run, when the protocol knows (None: the
        memory view's generic sentence)."""
        return None

    def estimate_of(self, recording: Path, header: RecordingHeader) -> CostEstimate | None:
        """The dry run's estimate of the job a finished recording describes (for its cost table)."""
        return None

    def register_commands(self, root: typer.Typer, groups: Mapping[str, typer.Typer]) -> None:
        """Add the protocol's own commands to the ``memprobe`` command tree: to ``root`` (a command, or a
        group of its own) and to the shared groups in ``groups`` by name (``generate``, ``import``,
        ``sessions``), which the CLI creates once. Import the command modules here, not at the top of the
        spec; a command's heavy modules are imported when it runs. The default adds none."""

    def reads_inputs(self, path: Path) -> bool:
        """Whether ``path`` (a folder or file of benchmark inputs) is recognisably this protocol's, by its own
        files; ``memprobe sessions validate`` checks a path no protocol recognises as the default
        protocol's (:data:`memprobe_engine.protocols.DEFAULT_SUITE`)."""
        return False

    def validate_inputs(self, path: Path) -> Sequence[object]:
        """Every problem of the benchmark inputs at ``path``, each printed as one line naming its file and
        field (``memprobe sessions validate``); empty when they load cleanly."""
        raise ConfigError(f"memprobe sessions validate has no checks for {self.name} inputs ({self.title}); "
                          f"memprobe run --suite {self.name} --dry-run reads them.")

    def eee_results(self, recording: Path, header: RecordingHeader) -> EeeResults:
        """``memprobe export eee``: the recording's results in the terms of the Every Eval Ever format —
        the benchmark's name and, per memory system, its aggregate scores and scored instances."""
        raise ConfigError(f"memprobe export eee: {self.name} runs ({self.title}) have no Every Eval Ever "
                          f"results; memprobe report {recording} prints what they measured.")

    def html_sections(self, session: ReplaySession, cases: Sequence[str]) -> HtmlSections:
        """``memprobe export html``: the protocol's part of the page for the recording open in ``session``
        (its index built) — the report's tables, an index of every case, the why-chain of each ``--case``
        as the protocol names its cases (one that names none is a ConfigError giving the form)."""
        raise ConfigError(f"memprobe export html: {self.name} runs ({self.title}) have no HTML page; "
                          f"memprobe export otel writes their traces.")


def checked_layers(spec: ProtocolSpec, recordings: Sequence[Path], names: Sequence[str]) -> list[str]:
    """``names`` (``--layer``, repeatable: judgment layers to read; ``main`` is the run's own) when
    ``recordings`` hold each; an unknown one is refused, naming the layers they hold."""
    if not names:
        return []
    held = spec.layers(recordings)
    unknown = [name for name in names if name != OWN_LAYER and name not in held]
    if unknown:
        raise ConfigError(f"--layer {', '.join(unknown)}: these recordings hold no such judgment layer (they hold: "
                          f"{', '.join([OWN_LAYER, *held])}). A re-score kept with `memprobe rescore --as NAME` "
                          f"adds one.")
    return list(dict.fromkeys(names))


def option_values(spec: ProtocolSpec, values: dict[str, object], params: Sequence[str]) -> ProtocolOptions:
    """``spec``'s options from flag values and ``-P key=value`` pairs (``params``; they win)."""
    fields = spec.options.model_fields
    merged = {name: value for name, value in values.items() if name in fields}
    for pair in params:
        key, sep, value = pair.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            raise ConfigError(f"-P {pair!r}: give KEY=VALUE, e.g. -P {next(iter(fields), 'key')}=VALUE.")
        if key not in fields:
            known = ", ".join(fields) or "none"
            raise ConfigError(f"-P {pair!r}: --suite {spec.name} has no option {key!r} (its options: {known}).")
        merged[key] = value
    try:
        return spec.options.model_validate(merged)
    except ValidationError as err:  # one line naming the option
        first = err.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise ConfigError(f"--suite {spec.name}: option {where!r}: {first['msg']} (got {first.get('input')!r})") \
            from None
