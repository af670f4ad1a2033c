"""``memprobe import release-b``: the upstream protocol-B results → recordings re-scored by our rules.

Protocol B adds the command to the shared ``import`` group (:meth:`ParadigmSpec.register_commands
<memprobe_engine.paradigms.spec.ParadigmSpec.register_commands>`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

console = Console(width=110, highlight=False)


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
