"""``memprobe compare``: two runs side by side, or the judgment layers of runs against each other."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape

from memprobe_engine.errors import ConfigError
from memprobe_engine.protocol_spec import CompareRequest
from memprobe_engine.report.output import WIDTH

#: Differences listed in the warning before the rest are summarized as a count.
_SHOWN_DIFFERENCES = 25


def compare(
    recordings: Annotated[list[str], typer.Argument(
        help="BASE OTHER: two recordings, or REC:SYSTEM to pick one system of a recording. With --layers: "
             "one or more recordings whose judgment layers to compare.")],
    layers: Annotated[bool, typer.Option(
        "--layers", help="Compare the judgment layers (`memprobe rescore --as NAME`) of the recordings with "
                         "their own judgments: agreement, weighted kappa, scores per layer, ranking change.")] = False,
    layer: Annotated[Optional[list[str]], typer.Option(
        "--layer", help="The judgment layer to read (`memprobe rescore --as NAME` adds one; main: the run's own): "
                        "both runs under it; with --layers, only these layers (repeatable; default every one).")]
    = None,
    changed_only: Annotated[bool, typer.Option(
        "--changed-only", help="List only the cases whose score changed (the paired statistics cover all).")] = False,
    csv: Annotated[Optional[Path], typer.Option("--csv", help="Write the comparison as CSV files into this folder.")] = None,
    parquet: Annotated[Optional[Path], typer.Option(
        "--parquet", help="Write the comparison as parquet files into this folder.")] = None,
    plots: Annotated[Optional[Path], typer.Option(
        "--plots", help="Write Δ per category with intervals and the before/after scatter as PNG files into this "
                        "folder (needs matplotlib, the 'plots' extra).")] = None,
    resamples: Annotated[int, typer.Option(min=100, help="Bootstrap resamples.")] = 2000,
    seed: Annotated[Optional[int], typer.Option(help="Bootstrap seed (default: protocol B's report seed).")] = None,
    fail_on: Annotated[Optional[str], typer.Option(
        "--fail-on", help="A CI gate: exit 1 on regression (the paired 95% interval of ΔB, protocol A, or "
                          "Δaccuracy, protocol B, lies below 0) or any-regressed (any case or probe got worse); "
                          "the last line says why.")] = None,
) -> None:
    """Did a change help, on which cases, and is it more than noise? Per-case changes, paired
    bootstrap intervals, exact McNemar flips (protocol A); probe flips and Δ metrics with episode
    bootstrap intervals (protocol B). A warning comes first when the runs differ in anything but the
    systems compared."""
    from memprobe_engine.report.output import export_to_folders

    from memprobe_engine.report.compare_gate import check_gate

    gate = check_gate(fail_on) if fail_on is not None else None
    if gate is not None and layers:
        raise ConfigError("--fail-on gates a comparison of two runs; it does not apply to --layers.")
    console = Console(width=WIDTH, highlight=False)
    if layers:
        bundle = _layers(console, [Path(r) for r in recordings], layer)
    else:
        if len(recordings) != 2:
            raise ConfigError(f"compare takes two selections, BASE and OTHER (got {len(recordings)}); "
                              f"or pass --layers to compare the judgment layers of recordings.")
        if layer and len(layer) > 1:
            raise ConfigError(f"--layer {', '.join(layer)}: two runs are compared under one layer; give one, or "
                              f"pass --layers to set several layers of recordings side by side.")
        bundle = _runs(console, recordings[0], recordings[1], changed_only, plots, resamples, seed,
                       layer[0] if layer else None)
    for fmt, folder, count in export_to_folders(bundle, csv, parquet):
        console.print(f"wrote {count} {fmt} file(s) to {folder}")
    if gate is not None:
        _gate(console, recordings, bundle, gate)


def _gate(console: Console, recordings: list[str], bundle: dict[str, object], gate: str) -> None:
    """Print the gate's one line last (what a CI log shows) and exit 1 when it failed; the runs'
    protocol judges its own comparison."""
    from memprobe_engine.protocols import one_protocol
    from memprobe_engine.report.compare_inputs import parse_selection

    verdict = one_protocol([parse_selection(r).path for r in recordings]).gate(bundle, gate)
    console.print(escape(verdict.line), soft_wrap=True)
    if verdict.failed:
        raise typer.Exit(1)


def _warn_differences(console: Console, lines: list[str]) -> None:
    if not lines:
        return
    console.print("[bold yellow]warning:[/] the runs differ in more than the systems compared; differences below "
                  "may come from these:", markup=True)
    for line in lines[:_SHOWN_DIFFERENCES]:
        console.print(f"  - {escape(line)}", soft_wrap=True)
    if len(lines) > _SHOWN_DIFFERENCES:
        console.print(f"  … and {len(lines) - _SHOWN_DIFFERENCES} more (see `memprobe recording info` of each)")


def _runs(console: Console, base_text: str, other_text: str, changed_only: bool, plots: Path | None,
          resamples: int, seed: int | None, layer: str | None) -> dict[str, object]:
    from memprobe_engine.protocols import one_protocol
    from memprobe_engine.report.compare_inputs import parse_selection, run_differences

    base, other = parse_selection(base_text), parse_selection(other_text)
    spec = one_protocol([base.path, other.path])
    _warn_differences(console, run_differences(base, other))
    return spec.compare(base, other, CompareRequest(changed_only=changed_only, plots=plots, resamples=resamples,
                                                    seed=seed, layer=layer), console)


def _layers(console: Console, recordings: list[Path], names: list[str] | None) -> dict[str, object]:
    from memprobe_engine.protocols import one_protocol

    return one_protocol(recordings).compare_layers(recordings, names, console)
