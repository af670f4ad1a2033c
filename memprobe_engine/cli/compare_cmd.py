"""``memprobe compare``: two runs side by side, or the judgment layers of runs against each other."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape

from memprobe_engine.errors import ConfigError
from memprobe_engine.report.render import WIDTH

#: Differences listed in the warning before the rest are summarized as a count.
_SHOWN_DIFFERENCES = 25


def compare(
    recordings: Annotated[list[str], typer.Argument(
        help="BASE OTHER: two recordings, or REC:SYSTEM to pick one system of a recording. With --layers: "
             "one or more recordings whose judgment layers to compare.")],
    layers: Annotated[bool, typer.Option(
        "--layers", help="Compare the judgment layers (`memprobe rescore --layer NAME`) of the recordings with "
                         "their own judgments: agreement, weighted kappa, scores per layer, ranking change.")] = False,
    layer: Annotated[Optional[list[str]], typer.Option(
        "--layer", help="With --layers: only these layers (repeatable; default every layer found).")] = None,
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
    from memprobe_engine.exports import write_frame_folders

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
        if layer:
            raise ConfigError("--layer picks layers for --layers; pass --layers too.")
        bundle = _runs(console, recordings[0], recordings[1], changed_only, plots, resamples, seed)
    for line in write_frame_folders(bundle, {"csv": csv, "parquet": parquet}):
        console.print(line)
    if gate is not None:
        _gate(console, bundle, gate)


def _gate(console: Console, bundle: dict[str, object], gate: str) -> None:
    """Print the gate's one line last (what a CI log shows) and exit 1 when it failed."""
    import pandas as pd

    from memprobe_engine.report.compare_gate import gate_a, gate_b

    frames = {k: v for k, v in bundle.items() if isinstance(v, pd.DataFrame)}
    if "compare_metrics" in frames:
        verdict = gate_b(frames["compare_metrics"], frames["compare_probes"], gate)
    else:
        verdict = gate_a(frames["compare_categories"], frames["compare_cases"], gate)
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
          resamples: int, seed: int | None) -> dict[str, object]:
    from memprobe_engine.events.header import read_header
    from memprobe_engine.report import compare_render as R
    from memprobe_engine.report.compare_inputs import parse_selection, run_differences

    base, other = parse_selection(base_text), parse_selection(other_text)
    suites = {read_header(base.path).suite, read_header(other.path).suite}
    if len(suites) > 1:
        raise ConfigError(f"{base.name} is a {read_header(base.path).suite} run and {other.name} a "
                          f"{read_header(other.path).suite} run; compare runs of one protocol.")
    _warn_differences(console, run_differences(base, other))
    if suites == {"paradigms"}:
        from memprobe_engine.report.compare_b import compare_paradigms

        result_b = compare_paradigms(base, other)
        for warning in result_b.warnings:
            console.print(f"[yellow]warning:[/] {escape(warning)}", markup=True, soft_wrap=True)
        console.print(R.probe_table(result_b, changed_only))
        console.print(R.flip_summary_b(result_b))
        console.print(R.metric_table(result_b))
        if plots is not None:
            _said(console, R.compare_plots(result_b, plots), plots)
        return dict(result_b.as_dict())
    from memprobe_engine.report.compare_a import compare_recovery

    result = compare_recovery(base, other, n_resamples=resamples, seed=seed)
    for warning in result.warnings:
        console.print(f"[yellow]warning:[/] {escape(warning)}", markup=True, soft_wrap=True)
    console.print(f"base {escape(base.name)}  →  other {escape(other.name)}")
    console.print(R.case_table(result, changed_only))
    counts = result.cases["change"].value_counts()
    console.print(", ".join(f"{int(counts.get(c, 0))} {c}" for c in ("improved", "regressed", "unchanged", "excluded")))
    console.print(R.category_table(result))
    from memprobe_engine.report.detectable import paired_line

    for (left, right), group in result.cases.dropna(subset=["delta"]).groupby(["base_system", "other_system"]):
        console.print(paired_line(group["delta"].astype(float).tolist(), f"{left} → {right}"), soft_wrap=True)
    if plots is not None:
        _said(console, R.compare_plots(result, plots), plots)
    return dict(result.as_dict())


def _layers(console: Console, recordings: list[Path], names: list[str] | None) -> dict[str, object]:
    from memprobe_engine.report import compare_render as R
    from memprobe_engine.report.compare_layers import compare_layers

    result = compare_layers(recordings, names)
    for warning in result.warnings:
        console.print(f"[yellow]warning:[/] {escape(warning)}", markup=True, soft_wrap=True)
    for table in R.layer_tables(result):
        console.print(table)
    return dict(result.as_dict())


def _said(console: Console, written: list[Path], folder: Path) -> None:
    console.print(f"wrote {len(written)} figure(s) to {folder}: {', '.join(p.name for p in written)}")
