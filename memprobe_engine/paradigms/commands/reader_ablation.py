"""``memprobe reader-ablation``: every probe of a protocol-B recording answered again by another reader."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

from memprobe_engine.model_flags import role_specs
from memprobe_engine.run_flags import csv_names as _csv
from memprobe_engine.errors import ConfigError

console = Console(highlight=False)


def reader_ablation(
    recording: Annotated[Path, typer.Argument(help="Protocol-B recording (the new layer is appended).")],
    reader: Annotated[str, typer.Option(help="The other reader's model spec, e.g. local:fast.")],
    systems: Annotated[Optional[str], typer.Option(help="Comma-separated systems (default: every system with a "
                                                        "reader).")] = None,
    concurrency: Annotated[int, typer.Option(help="Probes answered at once.")] = 4,
    config: Annotated[Optional[Path], typer.Option(help="TOML config with \\[models].")] = None,
) -> None:
    """Answer every probe again with another reader from the recorded retrieval (no memory system runs
    again), as the layer reader:SPEC; then print Table 4 and the readers' rank agreement."""
    from memprobe_engine.llm.config import load_llm_config
    from memprobe_engine.orchestration.progress import CommandProgress
    from memprobe_engine.paradigms.read.frames import recording_is_paradigm
    from memprobe_engine.paradigms.read.report import print_reader_ablation
    from memprobe_engine.paradigms.reader_ablation import ablate_reader

    if not (recording / "header.json").exists() or not recording_is_paradigm(recording):
        raise ConfigError(f"{recording}: not a protocol-B recording (no paradigm header.json there); pass the "
                          f"folder of a `memprobe run --suite paradigms` recording.")
    if concurrency < 1:
        raise ConfigError(f"--concurrency {concurrency}: give 1 or more.")
    llm_config = load_llm_config(config, os.environ, role_specs([]))
    wanted = _csv(systems, "--systems")
    with CommandProgress("reader-ablation", unit="probes") as progress:
        summary = asyncio.run(ablate_reader(recording, reader, llm_config, systems=set(wanted) if wanted else None,
                                            concurrency=concurrency, progress=progress.phase))
    skipped = f"; no reader call (left out): {', '.join(summary.no_reader)}" if summary.no_reader else ""
    console.print(f"{summary.layer}: {summary.answered} probe(s) answered ({summary.errors} unusable), "
                  f"{summary.already} already in the layer{skipped}; scored in the {summary.mode} mode, as the run's own; "
                  f"{summary.wall_s:.0f} s", markup=False)
    print_reader_ablation([recording], [summary.layer], console)
