"""``memprobe report`` on protocol-A recordings: the paper's Tables 2, 3, 4, 13 and 14, what the run's
cases can detect, the exports and the figures."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

from memprobe_engine.recovery.config import RecoveryConfig
from memprobe_engine.recovery.read.frames import ReportFrames, load_frames
from memprobe_engine.recovery.read.render import print_tables
from memprobe_engine.recovery.read.tables import build_tables, parse_table_names
from memprobe_engine.report.output import export_to_folders, say_plots


def recovery_report(recordings: Sequence[Path], *, csv: Path | None, parquet: Path | None, tables: str | None,
                    plots: Path | None, console: Console, errors: Console, layer: str | None = None) -> None:
    """Print the tables of ``recordings`` (a later one wins on overlap) under the judgment ``layer`` (None:
    each case's current judgment) and write the asked-for files."""
    names = parse_table_names(tables or "2,3,4,13,14")
    frames = load_frames(list(recordings), layer=layer)
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
    for fmt, folder, count in export_to_folders(bundle, csv, parquet):
        console.print(f"wrote {count} {fmt} files to {folder}")
    if plots is not None:
        from memprobe_engine.recovery.read.plots import recovery_plots

        say_plots(recovery_plots(frames.scores, plots), plots)


def _print_detectable(console: Console, frames: ReportFrames) -> None:
    """What the run's cases can detect, per system (recovery/read/detectable.py)."""
    from memprobe_engine.events.reader import open_recording
    from memprobe_engine.recovery.judge_kind import judge_error_sd, judge_of
    from memprobe_engine.recovery.read.detectable import report_lines
    from memprobe_engine.recovery.read.tables import usable_scores
    from memprobe_engine.recovery.scoring import is_unknown

    usable = usable_scores(frames)
    if usable.empty:
        return
    sds: dict[str, float | None] = {}
    for recording in usable["recording"].unique():
        with open_recording(Path(recording)) as reader:
            sds[recording] = judge_error_sd(judge_of(RecoveryConfig.of(reader.header)))
    console.print("What these cases can detect")
    rows = [(system, recording, float(score), not is_unknown(str(label or "")))
            for system, recording, score, label in usable[["system", "recording", "score", "label"]].itertuples(
                index=False, name=None)]
    for line in report_lines(rows, sds.__getitem__):
        console.print(f"  {line}", soft_wrap=True)


def _policy_footer(recordings: Sequence[Path]) -> str | None:
    """Which exclusion policy the recordings were scored under (from their headers)."""
    from memprobe_engine.errors import MemProbeError
    from memprobe_engine.events.reader import open_recording
    from memprobe_engine.recovery.policy import policy_footer
    from memprobe_engine.recovery.config import policy_of

    policies = {}
    for path in recordings:
        try:
            with open_recording(path) as reader:
                policies[str(path)] = policy_of(RecoveryConfig.of(reader.header))
        except MemProbeError:
            continue  # load_frames has already named the problem
    return policy_footer(policies) if policies else None
