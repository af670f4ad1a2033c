"""``memprobe report``: the paper's result tables from one or more recordings, and their exports."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

from memprobe_engine.report.frames import ReportFrames, load_frames
from memprobe_engine.report.paradigm_report import paradigm_report, split_by_protocol
from memprobe_engine.exports import write_frame_folders
from memprobe_engine.report.render import WIDTH, print_tables
from memprobe_engine.report.tables import build_tables, parse_table_names


def report(
    recordings: Annotated[list[Path], typer.Argument(
        help="Recording directories (shards or runs of several systems); a later one wins on overlap.")],
    csv: Annotated[Optional[Path], typer.Option(
        "--csv", help="Write the frames and tables as CSV files into this folder.")] = None,
    parquet: Annotated[Optional[Path], typer.Option(
        "--parquet", help="Write the frames and tables as parquet files into this folder.")] = None,
    tables: Annotated[Optional[str], typer.Option(
        "--tables", help="Which tables to show and export, comma-separated: protocol A of 2,3,4,13,14 (default "
                         "all); protocol B of 1,2,3,4,5,7,paired,failures,exclusions (default all).")] = None,
    plots: Annotated[Optional[Path], typer.Option(
        "--plots", help="Write the paper's figures as PNG files into this folder (needs the 'plots' extra: "
                        "matplotlib).")] = None,
    layer: Annotated[Optional[list[str]], typer.Option(
        "--layer", help="Protocol B: which score layers to print (repeat): main (the run's own scores), "
                        "scoring:corrected, upstream-labels (an import's own labels), reader:SPEC (a reader "
                        "ablation).")] = None,
    scoring: Annotated[Optional[str], typer.Option(
        "--scoring", help="Protocol B: upstream (the run's own scores, the default mode), corrected, or both.")] = None,
    price: Annotated[Optional[list[str]], typer.Option(
        "--price", help="ROLE=IN/OUT per million tokens to price each role's tokens (repeatable; "
                        "default=… prices every role).")] = None,
) -> None:
    """Print the paper's tables of a run: Tables 2, 3, 4, 13, 14 for protocol A; Tables 1, 2, 3, 5, 7
    (with bootstrap CIs) for a protocol-B paradigm run. Optionally export them with the raw frames."""
    if split_by_protocol(recordings):
        paradigm_report(recordings, csv=csv, parquet=parquet, tables=tables,
                        layers=list(layer or []) + scoring_layers(scoring) or ["main"])
        if plots is not None:
            from memprobe_engine.report.paradigm_frames import load_paradigm_frames
            from memprobe_engine.report.plots import paradigm_plots

            _say_plots(paradigm_plots(load_paradigm_frames(recordings).probes, plots), plots)
        _print_costs(recordings, price)
        return
    names = parse_table_names(tables or "2,3,4,13,14")
    console = Console(width=WIDTH, highlight=False)
    errors = Console(stderr=True, highlight=False)
    frames = load_frames(recordings)
    for warning in frames.warnings:
        errors.print(f"[yellow]warning:[/] {warning}", markup=True, soft_wrap=True)
    for note in frames.notes:
        errors.print(f"note: {note}", markup=False, soft_wrap=True)
    if frames.scores.empty and frames.episodes.empty:
        errors.print("[yellow]warning:[/] these recordings hold no protocol-A outcomes (no episodes, no scores).",
                      markup=True)
    built = build_tables(frames, names)
    # Every table says when its runs read fixed dialogues instead of a live rollout.
    fixed = [f"{', '.join(sorted(s for s, d in frames.fixed.items() if d == source))}: {source}; metrics A, C, D "
             f"not applicable" for source in sorted(set(frames.fixed.values()))]
    footer = "\n".join(line for line in (_policy_footer(recordings), *fixed) if line) or None
    print_tables(built, console, footer=footer)
    _print_detectable(console, frames)
    bundle = {**frames.as_dict(), **built}
    for line in write_frame_folders(bundle, {"csv": csv, "parquet": parquet}):
        console.print(line)
    if plots is not None:
        from memprobe_engine.report.plots import recovery_plots

        _say_plots(recovery_plots(frames.scores, plots), plots)
    _print_costs(recordings, price)


def _print_detectable(console: Console, frames: ReportFrames) -> None:
    """What the run's cases can detect, per system (report/detectable.py)."""
    from memprobe_engine.events.reader import open_recording
    from memprobe_engine.recovery.judge_kind import judge_error_sd, judge_of
    from memprobe_engine.recovery.scoring import is_unknown
    from memprobe_engine.report.detectable import report_lines
    from memprobe_engine.report.tables import usable_scores

    usable = usable_scores(frames)
    if usable.empty:
        return
    sds: dict[str, float | None] = {}
    for recording in usable["recording"].unique():
        with open_recording(Path(recording)) as reader:
            sds[recording] = judge_error_sd(judge_of(reader.header.config))
    console.print("What these cases can detect")
    rows = [(system, recording, float(score), not is_unknown(str(label or "")))
             for system, recording, score, label in usable[["system", "recording", "score", "label"]].itertuples(
                 index=False, name=None)]
    for line in report_lines(rows, sds.__getitem__):
        console.print(f"  {line}", soft_wrap=True)


def _print_costs(recordings: list[Path], price: list[str] | None) -> None:
    """Tokens and cost per role of each recording, beside the estimate its header describes."""
    from memprobe_engine.cli.estimate_view import print_recording_cost
    from memprobe_engine.llm.pricing import load_prices

    prices = load_prices(None, price)
    console = Console(width=WIDTH, highlight=False)
    for recording in recordings:
        print_recording_cost(recording, prices, console)


def scoring_layers(scoring: str | None) -> list[str]:
    """The layers ``--scoring`` names: the default mode is the run's own scores."""
    from memprobe_engine.errors import ConfigError
    from memprobe_engine.paradigms.scoring import SCORING_MODES, mode_layer

    if scoring is None:
        return []
    modes = list(SCORING_MODES) if scoring == "both" else [scoring]
    if any(m not in SCORING_MODES for m in modes):
        raise ConfigError(f"--scoring {scoring}: give upstream, corrected or both.")
    return [mode_layer(m) or "main" for m in modes]  # type: ignore[arg-type]


def _say_plots(written: list[Path], folder: Path) -> None:
    console = Console(highlight=False)
    if written:
        console.print(f"wrote {len(written)} PNG figures to {folder}: {', '.join(p.name for p in written)}")
    else:
        console.print(f"no figures written to {folder}: these recordings hold no scores yet")


def _policy_footer(recordings: list[Path]) -> str | None:
    """Which exclusion policy the recordings were scored under (from their headers)."""
    from memprobe_engine.errors import MemProbeError
    from memprobe_engine.events.reader import open_recording
    from memprobe_engine.recovery.policy import policy_footer, policy_of

    policies = {}
    for path in recordings:
        try:
            with open_recording(path) as reader:
                policies[str(path)] = policy_of(reader.header.config)
        except MemProbeError:
            continue  # load_frames has already named the problem
    return policy_footer(policies) if policies else None
