"""``memprobe rescore``: re-run slot-fill, judge (and attribution) on recorded cases."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from memprobe_engine.model_flags import role_specs
from memprobe_engine.run_flags import csv_names as _csv
from memprobe_engine.errors import ConfigError

console = Console(highlight=False)


def rescore(
    recording: Annotated[Path, typer.Argument(help="Recording to re-score (new events are appended).")],
    users: Annotated[Optional[str], typer.Option(help="Comma-separated user ids (default: all).")] = None,
    dims: Annotated[Optional[str], typer.Option(help="Comma-separated dimensions (default: all).")] = None,
    systems: Annotated[Optional[str], typer.Option(help="Comma-separated systems (default: all).")] = None,
    mode: Annotated[Optional[str], typer.Option(help="dump_all or retrieve (default: both).")] = None,
    model: Annotated[Optional[list[str]], typer.Option(help="ROLE=SPEC (slot_filler, recovery_judge, "
                                                       "attribution_judge; default: the embedded model).")] = None,
    config: Annotated[Optional[Path], typer.Option(help="TOML config with \\[models].")] = None,
    no_attribution: Annotated[bool, typer.Option("--no-attribution", help="Skip attribution stages.")] = False,
    context_tokens: Annotated[Optional[int], typer.Option(
        "--context-tokens", min=256, help="Tokens the models' context holds (default: the spec's context_tokens; "
        "the embedded model: 8192 per slot). The embedded server then gives one request that whole context "
        "(up to 32768), so a large store is read instead of recorded as an overflow.")] = None,
    layer: Annotated[Optional[str], typer.Option(
        "--as", help="Keep the new judgments as this named layer beside the current ones (report and replay keep "
                     "showing the run's own; `--layer NAME` reads it, `memprobe compare --layers` sets them side by "
                     "side). Without it a re-score replaces the current score.")] = None,
    read_layer: Annotated[Optional[str], typer.Option(
        "--layer", hidden=True, help="Refused: --layer reads a layer everywhere; rescore writes one with --as.")]
    = None,
    judge_only: Annotated[bool, typer.Option(
        "--judge-only", help="Judge the recorded slot-fill again (no slot-filler call, no attribution): the "
                             "judge's sensitivity alone, e.g. with --model recovery_judge=SPEC --as NAME.")] = False,
    recovery_judge: Annotated[Optional[str], typer.Option(
        "--recovery-judge", help="model (the recovery_judge role's model) or calibrated[:NAME] (trained on the "
                                 "paper's judgments, no model call); default: the judge the recording was scored "
                                 "with.")] = None,
) -> None:
    """Re-score recorded cases without re-running the memory system; originals stay untouched."""
    from memprobe_engine.events.base import EventBase, check_layer_name
    from memprobe_engine.events.integrity import say_damage
    from memprobe_engine.events.reader import open_recording
    from memprobe_engine.events.run import SpanBegin
    from memprobe_engine.events.scoring import JudgeScore
    from memprobe_engine.llm.cache import ResponseCache
    from memprobe_engine.llm.client import ChatClient
    from memprobe_engine.llm.config import load_llm_config, with_context
    from memprobe_engine.orchestration.progress import CommandProgress
    from memprobe_engine.recovery.rescore import recorded_cases
    from memprobe_engine.recovery.rescore import rescore as run_rescore

    if read_layer is not None:
        raise ConfigError(f"--layer {read_layer}: --layer names a judgment layer to read (report, compare, judge "
                          f"check); to keep this re-score as a layer, pass --as {read_layer}.")
    if layer is not None:
        check_layer_name(layer, where="--as")
    from memprobe_engine.recovery.judge_kind import check_judge

    chosen_judge = check_judge(recovery_judge) if recovery_judge is not None else None
    if mode is not None and mode not in ("dump_all", "retrieve"):
        raise ConfigError(f"--mode {mode!r}: use dump_all or retrieve.")
    wanted_users, wanted_dims, wanted_systems = _csv(users, "--users"), _csv(dims, "--dims"), _csv(systems, "--systems")
    with open_recording(recording) as reader:
        say_damage(reader)  # the cases are those of the readable lines; said as every reader says it
        cases = [c for c in recorded_cases(reader)
                 if (wanted_users is None or c.user_id in wanted_users)
                 and (wanted_dims is None or c.dimension in wanted_dims)
                 and (wanted_systems is None or c.system in wanted_systems)
                 and (mode is None or c.mode == mode)]
    if not cases:
        raise ConfigError(f"{recording}: no recorded scores match the filters (users={users}, dims={dims}, "
                          f"systems={systems}, mode={mode}).")
    llm_config = load_llm_config(config, os.environ, role_specs(model))
    if context_tokens is not None:
        llm_config = with_context(llm_config, context_tokens, where="--context-tokens")
    context = llm_config.spec_for("slot_filler").context_budget()
    with CommandProgress("rescore", unit="cases", total=len(cases)) as progress:
        begun = [0]

        def on_event(event: EventBase) -> None:  # a case starts with its span; say where it is
            if isinstance(event, SpanBegin) and event.name.startswith("rescore "):
                begun[0] += 1
                progress.hook(f"{event.name} ({event.user_id} × {event.system})", begun[0] - 1, len(cases))
            elif isinstance(event, JudgeScore):
                progress.phase(f"{event.dimension} {event.mode}: new score {event.score}")

        progress.phase(f"{len(cases)} case(s) of {recording}; models start on their first call")
        results = asyncio.run(run_rescore(
            recording, cases, chat_factory=lambda recorder: ChatClient(llm_config, recorder, ResponseCache()),
            context_tokens=context, attribution=not no_attribution, on_event=on_event,
            layer=layer, judge_only=judge_only, judge_kind=chosen_judge))
        progress.hook("all cases re-scored", len(cases), len(cases))
    table = Table("user", "system", "dimension", "mode", "original", "new", "label", "attribution")
    for r in results:
        table.add_row(r.case.user_id, r.case.system, r.case.dimension, r.case.mode, _fmt(r.original_score),
                      ("overflow: " if r.overflow else "") + (_fmt(r.score) if r.excluded is None else f"excluded: {r.excluded[:30]}"), r.label or "",
                      r.attribution or "")
    console.print(table)
    console.print(f"appended {len(results)} re-score(s) to {recording}"
                  + (f" as layer {layer!r}" if layer is not None else ""))
    overflowed = sum(1 for r in results if r.overflow)
    if overflowed:
        console.print(f"{overflowed} case(s) overflowed the reader's context of {context:,} tokens and were recorded "
                      f"as overflow ({results[0].policy} policy); --context-tokens raises it (the embedded model "
                      f"holds up to 32,768).")


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"
