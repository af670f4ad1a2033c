"""keyrecall's :class:`~memprobe_engine.protocol_spec.ProtocolSpec`: options, plan, report, compare, and a
command of its own in the shared ``generate`` group (``memprobe generate lockers``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated

import typer

from rich.console import Console
from rich.table import Table

from memprobe_engine.events.reader import open_recording
from memprobe_engine.events.run import Metric
from memprobe_engine.llm.resolved import ResolvedProtocol
from memprobe_engine.orchestration.run import run_protocol
from memprobe_engine.protocol_spec import (CompareRequest, PlannedRun, ProtocolOptions, ProtocolSpec,
                                           ReportRequest, RunCommon)
from memprobe_engine.report.compare_inputs import Selection
from memprobe_engine.run_flags import system_names
from tests.protocol_c.run import SUITE, KeyRecallRun, codes


class KeyRecallOptions(ProtocolOptions):
    facts: int = 4
    k: int = 2


def recall(recording: Path) -> dict[str, float]:
    """system → recall@k, the latest metric of each system."""
    with open_recording(recording) as reader:
        return {m.scope["system"]: float(m.value or 0.0) for m in reader.iter_of(Metric) if m.name == "recall_at_k"}


class KeyRecallSpec(ProtocolSpec):
    name = SUITE
    title = "keyrecall: locker codes told, then searched for"
    options = KeyRecallOptions

    def plan(self, common: RunCommon, options: ProtocolOptions) -> PlannedRun:
        own = KeyRecallOptions.model_validate(options.model_dump())
        run = KeyRecallRun(system_names(common.systems), own.facts, own.k, common.seed,
                           common.embeddings or "st:minilm")
        return PlannedRun(
            resolved=ResolvedProtocol(suite=SUITE, roles=(), parameters={"facts": own.facts, "k": own.k}),
            needs_models=False, estimate=None,
            start=lambda hook: run_protocol(run, common.record, llm_config=common.llm_config,
                                            concurrency=common.concurrency, progress=hook, signals=True))

    def report(self, recordings: Sequence[Path], request: ReportRequest, console: Console,
               errors: Console) -> None:
        table = Table("system", "recall@k", title="keyrecall")
        for recording in recordings:
            for system, value in sorted(recall(recording).items()):
                table.add_row(system, f"{value:.3f}")
        console.print(table)

    def compare(self, base: Selection, other: Selection, request: CompareRequest,
                console: Console) -> dict[str, object]:
        left, right = recall(base.path), recall(other.path)
        for system in sorted(set(left) & set(right)):
            console.print(f"{system}: recall@k {left[system]:.3f} → {right[system]:.3f} "
                          f"(Δ {right[system] - left[system]:+.3f})")
        return {}

    def register_commands(self, root: typer.Typer, groups: Mapping[str, typer.Typer]) -> None:
        groups["generate"].command("lockers")(lockers)


def lockers(facts: Annotated[int, typer.Option(help="How many lockers.")] = 4,
            seed: Annotated[int, typer.Option(help="The run's seed.")] = 0) -> None:
    """Print the locker codes a keyrecall run with these options tells every system."""
    for box, code in codes(facts, seed):
        print(f"locker {box}: {code}")


SPEC = KeyRecallSpec()
