"""``memprobe report``: the paper's result tables from one or more recordings, and their exports."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

from memprobe_engine.protocol_spec import ReportRequest
from memprobe_engine.report.output import WIDTH


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
        "--layer", help="Which judgment layers to read (repeat): main (the run's own), a re-judgment kept with "
                        "`memprobe rescore --as NAME`, and for protocol B scoring:corrected, upstream-labels (an "
                        "import's own labels), reader:SPEC (a reader ablation). An unknown layer is refused.")] = None,
    scoring: Annotated[Optional[str], typer.Option(
        "--scoring", help="Protocol B: upstream (the run's own scores, the default mode), corrected, or both.")] = None,
    price: Annotated[Optional[list[str]], typer.Option(
        "--price", help="ROLE=IN/OUT per million tokens to price each role's tokens (repeatable; "
                        "default=… prices every role).")] = None,
) -> None:
    """Print the paper's tables of a run: Tables 2, 3, 4, 13, 14 for protocol A; Tables 1, 2, 3, 5, 7
    (with bootstrap CIs) for a protocol-B paradigm run. Optionally export them with the raw frames."""
    from memprobe_engine.protocols import one_protocol

    spec = one_protocol(recordings)
    request = ReportRequest(csv=csv, parquet=parquet, tables=tables, plots=plots, layers=tuple(layer or ()),
                            scoring=scoring)
    spec.report(recordings, request, Console(width=WIDTH, highlight=False), Console(stderr=True, highlight=False))
    _print_costs(recordings, price)


def _print_costs(recordings: list[Path], price: list[str] | None) -> None:
    """Tokens and cost per role of each recording, beside the estimate its header describes."""
    from memprobe_engine.cli.estimate_view import print_recording_cost
    from memprobe_engine.llm.pricing import load_prices

    prices = load_prices(None, price)
    console = Console(width=WIDTH, highlight=False)
    for recording in recordings:
        print_recording_cost(recording, prices, console)
