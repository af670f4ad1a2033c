"""``memprobe import release-a``: a protocol-A public release → sessions, recordings, import report.

Protocol A adds the command to the shared ``import`` group (:meth:`RecoverySpec.register_commands
<memprobe_engine.recovery.spec.RecoverySpec.register_commands>`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

console = Console(width=110, highlight=False)
#: Notices are listed up to this many on screen; all of them are in the report file.
SHOWN_NOTICES = 20


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
