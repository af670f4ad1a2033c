"""Protocol B (stability–plasticity paradigms) as every shared command sees it: its run options, plan,
report, comparison, browser headline, store steps, TUI entry, its own commands (``reader-ablation``,
``generate episodes``, ``import release-b``) and the check of its suite folders.

Heavy modules (the runner, pandas frames, the reader) are imported inside the methods, so listing the
protocols loads none of them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape

from memprobe_engine.events.header import RecordingHeader
from memprobe_engine.events.header_config import HeaderConfig
from memprobe_engine.paradigms.config import ParadigmConfig
from memprobe_engine.paradigms.options import ParadigmOptions
from memprobe_engine.protocol_spec import (OWN_LAYER, CompareRequest, PlannedRun, ProtocolOptions, ProtocolSpec,
                                           ReportRequest, RunCommon, checked_layers)

if TYPE_CHECKING:
    import pandas as pd
    import typer

    from memprobe_engine.report.eee_record import EeeResults
    from memprobe_engine.report.html_parts import HtmlSections

    from memprobe_engine.llm.usage_estimate import CostEstimate
    from memprobe_engine.replay.session import ReplaySession
    from memprobe_engine.replay.store_steps import Labelled
    from memprobe_engine.report.compare_gate import Verdict
    from memprobe_engine.report.compare_inputs import Selection


class ParadigmSpec(ProtocolSpec):
    """Protocol B: scripted episodes fed session by session, probes read back, rule scoring."""

    name = "paradigms"
    title = "protocol B: stability–plasticity paradigms"
    options = ParadigmOptions
    config_model = ParadigmConfig
    tui = "memprobe_tui.paradigms.entry"
    after_steps = "after the probes"
    final_step = "after the probes"

    def owns(self, header: RecordingHeader) -> bool:
        # An import of the upstream reports may name the suite in its config only.
        return header.suite == self.name or HeaderConfig.of(header).suite == self.name

    def plan(self, common: RunCommon, options: ProtocolOptions) -> PlannedRun:
        from memprobe_engine.paradigms.run_options import paradigm_plan, paradigm_protocol
        from memprobe_engine.paradigms.runner import needs_models, run_paradigms

        plan = paradigm_plan(common, ParadigmOptions.model_validate(options.model_dump()))

        def estimate() -> CostEstimate:
            from memprobe_engine.paradigms.estimate import estimate_paradigms

            return estimate_paradigms(plan)

        models = needs_models(plan.systems)
        return PlannedRun(
            resolved=paradigm_protocol(plan, common.llm_config, common.record), needs_models=models,
            estimate=estimate if models else None,
            start=lambda hook: run_paradigms(plan, common.record, llm_config=common.llm_config,
                                             concurrency=common.concurrency, cache=common.cache, progress=hook,
                                             signals=True, ray=common.ray))

    def report(self, recordings: Sequence[Path], request: ReportRequest, console: Console,
               errors: Console) -> None:
        from memprobe_engine.paradigms.read.report import paradigm_report, scoring_layers
        from memprobe_engine.report.output import say_plots

        checked_layers(self, recordings, request.layers)
        paradigm_report(recordings, csv=request.csv, parquet=request.parquet, tables=request.tables,
                        layers=list(request.layers) + scoring_layers(request.scoring) or ["main"],
                        console=console, errors=errors)
        if request.plots is not None:
            from memprobe_engine.paradigms.read.frames import load_paradigm_frames
            from memprobe_engine.paradigms.read.plots import paradigm_plots

            say_plots(paradigm_plots(load_paradigm_frames(recordings).probes, request.plots), request.plots)

    def frames(self, recordings: Sequence[Path]) -> Mapping[str, pd.DataFrame]:
        from memprobe_engine.paradigms.read.frames import load_paradigm_frames
        from memprobe_engine.paradigms.read.tables import DEFAULT_TABLES, build_paradigm_tables, parse_paradigm_tables

        probes = load_paradigm_frames(recordings).probes
        return {"probes": probes, **build_paradigm_tables(probes, parse_paradigm_tables(DEFAULT_TABLES))}

    def compare(self, base: Selection, other: Selection, request: CompareRequest,
                console: Console) -> dict[str, object]:
        from memprobe_engine.paradigms.read import compare_render as R
        from memprobe_engine.paradigms.read.compare import compare_paradigms
        from memprobe_engine.report.output import say_written

        layer = checked_layers(self, [base.path, other.path], [request.layer] if request.layer else [])
        result = compare_paradigms(base, other, layer=None if not layer or layer[0] == OWN_LAYER else layer[0])
        for warning in result.warnings:
            console.print(f"[yellow]warning:[/] {escape(warning)}", markup=True, soft_wrap=True)
        console.print(R.probe_table(result, request.changed_only))
        console.print(R.flip_summary_b(result))
        console.print(R.metric_table(result))
        if request.plots is not None:
            say_written(console, R.compare_plots(result, request.plots), request.plots)
        return dict(result.as_dict())

    def gate(self, comparison: Mapping[str, object], rule: str) -> Verdict:
        from memprobe_engine.paradigms.read.compare_gate import gate

        return gate(comparison, rule)

    def layers(self, recordings: Sequence[Path]) -> list[str]:
        from memprobe_engine.paradigms.read.report import recorded_layers

        return recorded_layers(recordings)

    def headline(self, session: ReplaySession) -> dict[str, float | None]:
        from memprobe_engine.paradigms.baselines import HEURISTICS, INPUT_PROTOCOLS
        from memprobe_engine.paradigms.read.queries import episode_rows, system_accuracy

        # Probe accuracy per memory system (input protocol ``memory``): the reference protocols and
        # heuristics are baselines, not pooled in (a run of baselines only shows each of them). An
        # older header names no protocols: a system named after a reference or heuristic is one.
        rows = episode_rows(session)
        systems = list(dict.fromkeys(r.system for r in rows))
        protocols = ParadigmConfig.of(session.header).input_protocols
        baselines = {*INPUT_PROTOCOLS, *HEURISTICS}
        tested = [s for s in systems if protocols.get(s, "baseline" if s in baselines else "memory") == "memory"] \
            or systems
        return {s: system_accuracy([r for r in rows if r.system == s]).accuracy for s in tested}

    def headline_text(self, values: dict[str, float | None]) -> str:
        shown = ", ".join(f"{system} {'—' if acc is None else f'{acc:.3f}'}" for system, acc in values.items())
        return f"acc {shown or '—'}"

    def store_steps(self, session: ReplaySession, unit: str, system: str, *, short: bool = True) -> Labelled:
        from memprobe_engine.paradigms.read.steps import store_steps

        return store_steps(session, unit, system, short=short)

    def empty_store_note(self, header: RecordingHeader, system: str) -> str | None:
        if ParadigmConfig.of(header).input_protocols.get(system) == "full_context":
            return (f"{system} keeps no memory store: its input protocol is full_context, so the reader is "
                    "given the whole dialogue at each probe instead of retrieved items.")
        return None

    def estimate_of(self, recording: Path, header: RecordingHeader) -> CostEstimate | None:
        from memprobe_engine.paradigms.estimate import estimate_paradigms, plan_from_config

        plan = plan_from_config(ParadigmConfig.of(header))
        return estimate_paradigms(plan) if plan is not None else None

    def register_commands(self, root: typer.Typer, groups: Mapping[str, typer.Typer]) -> None:
        from memprobe_engine.paradigms.commands import generate_episodes, import_release, reader_ablation

        root.command("reader-ablation")(reader_ablation.reader_ablation)
        groups["generate"].command("episodes")(generate_episodes.episodes)
        groups["import"].command("release-b")(import_release.release_b)

    def reads_inputs(self, path: Path) -> bool:
        from memprobe_engine.paradigms.validate import is_paradigm_suite

        return is_paradigm_suite(path)

    def validate_inputs(self, path: Path) -> Sequence[object]:
        from memprobe_engine.paradigms.validate import validate_suite

        return validate_suite(path)


    def eee_results(self, recording: Path, header: RecordingHeader) -> EeeResults:
        from memprobe_engine.paradigms.read.eee import eee_results

        return eee_results(recording, header)

    def html_sections(self, session: ReplaySession, cases: Sequence[str]) -> HtmlSections:
        from memprobe_engine.paradigms.read.html_case import html_sections

        return html_sections(session, cases)


SPEC = ParadigmSpec()
