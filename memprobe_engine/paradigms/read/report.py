"""``memprobe report`` on protocol-B recordings: read the probes, build the tables, print, export."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rich import box
from rich.console import Console
from rich.table import Table

from memprobe_engine.errors import ConfigError
from memprobe_engine.protocol_spec import OWN_LAYER
from memprobe_engine.paradigms import metrics as M
from memprobe_engine.paradigms.read.frames import (
    ParadigmFrames,
    load_paradigm_frames,
)
from memprobe_engine.paradigms.read.queries import score_layers
from memprobe_engine.paradigms.read.reader_table import reader_ablation, render_reader_table, run_reader
from memprobe_engine.paradigms.read.tables import (
    DEFAULT_TABLES,
    build_paradigm_tables,
    parse_paradigm_tables,
    pct,
    print_paradigm_tables,
)
from memprobe_engine.paradigms.reader_ablation import READER_LAYER_PREFIX
from memprobe_engine.replay.session import ReplaySession
from memprobe_engine.report.output import WIDTH, export, export_to_folders

#: The layer an import of upstream reports writes their own labels into (declared here and used by
#: the import, which imports it).
UPSTREAM_LABELS_LAYER = "upstream-labels"


#: How ``--layer`` names the run's own scores.
OWN_SCORES = OWN_LAYER


def paradigm_report(recordings: Sequence[Path], *, csv: Path | None = None, parquet: Path | None = None,
                    tables: str | None = None, console: Console | None = None,
                    errors: Console | None = None, layers: Sequence[str] = (OWN_SCORES,)) -> None:
    """Print Tables 1, 2, 3, 5, 7 (and Figure 4, paired bootstrap, failures, exclusions) of each
    score layer asked for (``main``: the run's own scores); export frames (one subfolder per extra layer)."""
    names = parse_paradigm_tables(tables or DEFAULT_TABLES)
    console = console or Console(width=WIDTH, highlight=False)
    errors = errors or Console(stderr=True, highlight=False)
    held = recorded_layers(recordings)
    for name in layers:
        if name != OWN_SCORES and name not in held:
            raise ConfigError(f"--layer {name}: these recordings hold no such score layer (they hold: "
                              f"{', '.join([OWN_SCORES, *held])}).")
    for name in layers:
        layer = None if name == OWN_SCORES else name
        frames = load_paradigm_frames(recordings, layer=layer)
        if len(layers) > 1 or layer is not None:
            console.print(f"\n[bold]Scores: {_layer_title(name, frames)}[/]")
        for warning in frames.warnings:
            errors.print(f"[yellow]warning:[/] {warning}", markup=True, soft_wrap=True)
        if frames.probes.empty:
            errors.print("[yellow]warning:[/] these recordings hold no scored protocol-B probes yet.", markup=True)
        built = build_paradigm_tables(frames.probes, names)
        print_paradigm_tables(built, console)
        bundle = {"probes": frames.probes, **built}
        sub = "" if layer is None else layer.replace(":", "-")  # an extra layer's files: a subfolder
        for fmt, folder, count in export_to_folders(bundle, csv and csv / sub, parquet and parquet / sub):
            console.print(f"wrote {count} {fmt} files to {folder}")
    readers = [h for h in held if h.startswith(READER_LAYER_PREFIX)]
    if readers:
        print_reader_ablation(recordings, readers, console, csv=csv)
    others = [h for h in held if h not in layers and h not in readers]
    if others:
        console.print(f"score layers also held: {', '.join(others)} (print one with --layer NAME)")


def print_reader_ablation(recordings: Sequence[Path], readers: Sequence[str], console: Console,
                          csv: Path | None = None) -> None:
    """Table 4 and the readers' rank agreement (ρ, τ); with ``csv``, ``table4_readers.csv`` too."""
    table, agreements = reader_ablation(recordings, readers)
    rendered, lines = render_reader_table(table, agreements, run_reader(recordings))
    console.print(rendered)
    console.print(lines)
    if csv is not None:
        export({"table4_readers": table}, csv, formats={"csv"})


def recorded_layers(recordings: Sequence[Path]) -> list[str]:
    """The named score layers any of ``recordings`` holds, in order of first appearance."""
    found: list[str] = []
    for path in recordings:
        session = ReplaySession.open(Path(path))
        try:
            session.build_index()
            found += score_layers(session)
        finally:
            session.close()
    return list(dict.fromkeys(found))


def _layer_title(name: str, frames: ParadigmFrames) -> str:
    if name == OWN_SCORES:
        versions = sorted({str(v) for v in frames.probes["scorer_version"].dropna()})
        return f"the run's own (scorer {', '.join(versions) or '?'})"
    if name == UPSTREAM_LABELS_LAYER:
        return "upstream's own labels (the report's match field)"
    return f"layer {name}"


#: Headline metrics of the layer comparison (metric column → heading).
_HEADLINE = {"accuracy": "Acc.", "plasticity": "Plast.", "stability": "Stab.", "sp_balance": "SP-Bal",
             "historical": "Hist.", "source_fidelity": "Source", "temporal": "Temp."}


def layer_comparison(recordings: Sequence[Path], layers: Sequence[str], title: str) -> Table:
    """One row per system and score layer with the headline metrics of Tables 1, 2 and 5 (%), so
    the same answers scored different ways sit side by side."""
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for heading in ("System", "Scores", *_HEADLINE.values()):
        table.add_column(heading, justify="left" if heading in ("System", "Scores") else "right")
    per_layer = {name: M.system_metrics(load_paradigm_frames(recordings, None if name == OWN_SCORES else name).probes)
                 for name in layers}
    systems = list(dict.fromkeys(s for metrics in per_layer.values() for s in metrics.get("system", [])))
    for system in systems:
        for name, metrics in per_layer.items():
            row = metrics[metrics["system"] == system]
            if row.empty:
                continue
            values = row.iloc[0]
            table.add_row(str(system), name, *[pct(values.get(c)) for c in _HEADLINE])
    return table


def scoring_layers(scoring: str | None) -> list[str]:
    """The layers ``--scoring`` names: the default mode is the run's own scores."""
    from memprobe_engine.paradigms.scoring import SCORING_MODES, mode_layer

    if scoring is None:
        return []
    modes = list(SCORING_MODES) if scoring == "both" else [scoring]
    if any(m not in SCORING_MODES for m in modes):
        raise ConfigError(f"--scoring {scoring}: give upstream, corrected or both.")
    return [mode_layer(m) or "main" for m in modes]  # type: ignore[arg-type]
