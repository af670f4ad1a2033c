"""``memprobe import release-a``: a protocol-A public release → sessions, recordings, import report."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

import_app = typer.Typer(help="Import published benchmark releases as sessions and recordings.",
                         no_args_is_help=True)
console = Console(width=110, highlight=False)
#: Notices are listed up to this many on screen; all of them are in the report file.
SHOWN_NOTICES = 20


@import_app.callback()
def _group() -> None:
    """Import published benchmark releases as sessions and recordings."""


@import_app.command("release-a")
def release_a(
    path: Annotated[Path, typer.Argument(help="The release folder (Deeppersona/, benchmark_data/, history/, "
                                              "pref_judge/, memory/, output/).")],
    out: Annotated[Path, typer.Option("--out", help="Where to write sessions/, recordings/ and "
                                                    "import-report.json.")] = Path("imported/release-a"),
    workers: Annotated[Optional[int], typer.Option(help="Runs imported in parallel (default: CPU count).")] = None,
) -> None:
    """Convert the release into sessions (to run its benchmark on any system) and one recording per released
    run (for report, replay and rescore). Problems never abort the import: they are listed at the end and
    saved in OUT/import-report.json. Exit status 1 when a file could not be read."""
    from memprobe_engine.recovery.release import REPORT_FILE, import_release_a
    from memprobe_engine.orchestration.progress import CommandProgress

    with CommandProgress("import", unit="steps") as progress:
        result = import_release_a(path, out, workers=workers, progress=progress.phase)
    table = Table("run", "system", "modes", "users", "episodes", "items", "scores", "labels",
                  title=f"imported from {escape(str(path))}")
    for run in result.runs:
        table.add_row(escape(run.run), run.system, "+".join("full" if m == "dump_all" else "top-k" for m in run.modes),
                      str(run.users), str(run.episodes), str(run.memory_items), str(sum(run.scores.values())),
                      str(sum(run.labels.values())))
    console.print(table)
    console.print(f"recordings: {escape(str(result.out / 'recordings'))}/<run>", markup=True)
    console.print(f"sessions: {result.sessions}  ({len(result.report['sessions']['users'])} users)")
    notices = [p for p in result.problems if p.level == "notice"]
    for problem in [p for p in result.problems if p.level != "notice"] + notices[:SHOWN_NOTICES]:
        colour = {"error": "red", "warning": "yellow"}.get(problem.level, "dim")
        where = " ".join(x for x in (problem.run, problem.user_id) if x)
        console.print(f"[{colour}]{problem.level}[/] {escape(problem.file)}: {escape(problem.message)}"
                      + (f" ({escape(where)})" if where else ""), markup=True, soft_wrap=True)
    if len(notices) > SHOWN_NOTICES:
        console.print(f"[dim]… {len(notices) - SHOWN_NOTICES} more notices in the report[/]", markup=True)
    counts = result.report["problem_counts"]
    console.print(f"{counts['error']} errors, {counts['warning']} warnings, {counts['notice']} notices · "
                  f"{result.wall_s:.1f} s · report: {result.out / REPORT_FILE}")
    if counts["error"]:
        raise typer.Exit(1)


@import_app.command("release-b")
def release_b(
    path: Annotated[Path, typer.Argument(help="A checkout of the upstream protocol-B repository (data/<suite>/, "
                                              "results/<suite>/reports/*.json).")],
    out: Annotated[Path, typer.Option("--out", help="Where to write recordings/ and import-report.json.")]
    = Path("imported/release-b"),
    suite: Annotated[str, typer.Option(help="The suite folder name under data/ and results/.")] = "suite56",
) -> None:
    """Write one paradigm recording per report and system with every probe's prediction, score each in both
    scoring modes (upstream, the default, and corrected) beside the report's own labels, print per report
    the agreement of each mode with the upstream match labels and a table of each system's headline
    metrics from upstream's labels and from ours; the disagreements and any problems (missing files or
    episodes, never fatal) go to OUT/import-report.json."""
    from memprobe_engine.paradigms.release.importer import REPORT_FILE as B_REPORT_FILE
    from memprobe_engine.paradigms.release.importer import import_release_b
    from memprobe_engine.orchestration.progress import CommandProgress

    with CommandProgress("import", unit="steps") as progress:
        result = import_release_b(path, out, suite=suite, progress=progress.phase)
    for report in result.reports:
        systems = ", ".join(f"{s} {a}/{c}" for s, (a, c) in report.by_system.items())
        console.print(f"{escape(report.report)}: {report.line}  [dim]({escape(systems)})[/]", markup=True,
                      soft_wrap=True)
    for problem in result.problems.items:
        colour = {"error": "red", "warning": "yellow"}.get(problem.level, "dim")
        where = f" ({escape(problem.run)})" if problem.run else ""
        console.print(f"[{colour}]{problem.level}[/] {escape(problem.file)}: {escape(problem.message)}{where}",
                      markup=True, soft_wrap=True)
    recordings = [Path(r) for report in result.reports for r in report.recordings]
    if recordings:
        from memprobe_engine.paradigms.read.report import OWN_SCORES, UPSTREAM_LABELS_LAYER, layer_comparison
        from memprobe_engine.paradigms.scoring import mode_layer

        layers = [UPSTREAM_LABELS_LAYER, OWN_SCORES, mode_layer("corrected") or OWN_SCORES]
        console.print(layer_comparison(recordings, layers, "upstream's labels beside ours (main = the default, "
                                                           "upstream, scoring mode) %"))
    console.print(f"recordings: {escape(str(result.out / 'recordings'))}/<report>__<system> · "
                  f"{result.wall_s:.1f} s · report: {escape(str(result.out / B_REPORT_FILE))}", markup=True)
