"""Protocol A (hidden user-state recovery) as every shared command sees it: its run options, plan,
report, comparison, replay index fold, browser headline, store steps, TUI entry, its own commands
(``judge``, ``rescore``, ``generate users``, ``import release-a``) and the check of its sessions tree.

Heavy modules (the runner, pandas frames, the models) are imported inside the methods, so listing the
protocols loads none of them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape

from memprobe_engine.errors import ConfigError
from memprobe_engine.events.header import RecordingHeader
from memprobe_engine.protocol_spec import (OWN_LAYER, CompareRequest, PlannedRun, ProtocolOptions, ProtocolSpec,
                                           ReportRequest, RunCommon, checked_layers)
from memprobe_engine.recovery.config import RecoveryConfig
from memprobe_engine.recovery.options import RecoveryOptions

if TYPE_CHECKING:
    import pandas as pd
    import typer

    from memprobe_engine.report.eee_record import EeeResults
    from memprobe_engine.report.html_parts import HtmlSections

    from memprobe_engine.llm.usage_estimate import CostEstimate
    from memprobe_engine.replay.index import IndexFold
    from memprobe_engine.replay.session import ReplaySession
    from memprobe_engine.replay.store_steps import Labelled
    from memprobe_engine.report.compare_gate import Verdict
    from memprobe_engine.report.compare_inputs import Selection


class RecoverySpec(ProtocolSpec):
    """Protocol A: simulated users, a memory-equipped assistant, slot-fill, judge and attribution."""

    name = "recovery"
    title = "protocol A: hidden user-state recovery"
    options = RecoveryOptions
    config_model = RecoveryConfig
    tui = "memprobe_tui.recovery.entry"
    after_steps = "after rollout"
    final_step = "recovery"

    def plan(self, common: RunCommon, options: ProtocolOptions) -> PlannedRun:
        from memprobe_engine.recovery.protocol_config import recovery_protocol
        from memprobe_engine.recovery.run_options import recovery_plan
        from memprobe_engine.recovery.runner import run_recovery

        plan = recovery_plan(common, RecoveryOptions.model_validate(options.model_dump()))

        def estimate() -> CostEstimate:
            from memprobe_engine.recovery.estimate import estimate_recovery
            from memprobe_engine.recovery.outcome_shares import header_specs, measure_shares

            # Branch shares from earlier runs beside this one (same models), as docs/usage.md says.
            shares = measure_shares([common.record.parent], header_specs({"models": common.llm_config.resolved()}),
                                    fixed_dialogues=plan.dialogues is not None, framing=plan.settings.framing,
                                    exclude=common.record)
            return estimate_recovery(plan, shares)

        from memprobe_engine.recovery.dialogue_source import source_damage

        damage = source_damage(plan.dialogues) if plan.dialogues is not None else None
        return PlannedRun(
            warnings=(f"--dialogues {damage}",) if damage else (),
            resolved=recovery_protocol(plan, common.llm_config), needs_models=True, estimate=estimate,
            start=lambda hook: run_recovery(plan, common.record, llm_config=common.llm_config,
                                            concurrency=common.concurrency, cache=common.cache, progress=hook,
                                            signals=True, ray=common.ray))

    def report(self, recordings: Sequence[Path], request: ReportRequest, console: Console,
               errors: Console) -> None:
        from memprobe_engine.recovery.read.report import recovery_report

        if request.scoring is not None:
            raise ConfigError("--scoring picks protocol B's scoring mode; a protocol-A case is scored by its judge "
                              "(read a re-judgment with --layer NAME).")
        layers = checked_layers(self, recordings, request.layers) or [OWN_LAYER]
        for name in layers:
            own = name == OWN_LAYER
            if len(layers) > 1 or not own:
                console.print(f"\n[bold]Judgments: {'the run’s own' if own else 'layer ' + name}[/]")

            def folder(base: Path | None, own: bool = own, name: str = name) -> Path | None:
                # Each extra layer's files in a subfolder of its own, as protocol B's report writes them.
                return base if base is None or own else base / name.replace(":", "-")

            recovery_report(recordings, csv=folder(request.csv), parquet=folder(request.parquet),
                            tables=request.tables, plots=folder(request.plots), console=console, errors=errors,
                            layer=None if own else name)

    def frames(self, recordings: Sequence[Path]) -> Mapping[str, pd.DataFrame]:
        from memprobe_engine.recovery.read.frames import load_frames
        from memprobe_engine.recovery.read.tables import build_tables

        loaded = load_frames(list(recordings))
        return {**loaded.as_dict(), **build_tables(loaded)}

    def compare(self, base: Selection, other: Selection, request: CompareRequest,
                console: Console) -> dict[str, object]:
        from memprobe_engine.recovery.read import compare_render as R
        from memprobe_engine.recovery.read.compare import compare_recovery
        from memprobe_engine.recovery.read.detectable import paired_line
        from memprobe_engine.report.output import say_written

        layer = checked_layers(self, [base.path, other.path], [request.layer] if request.layer else [])
        result = compare_recovery(base, other, n_resamples=request.resamples, seed=request.seed,
                                  layer=None if not layer or layer[0] == OWN_LAYER else layer[0])
        for warning in result.warnings:
            console.print(f"[yellow]warning:[/] {escape(warning)}", markup=True, soft_wrap=True)
        console.print(f"base {escape(base.name)}  →  other {escape(other.name)}")
        console.print(R.case_table(result, request.changed_only))
        counts = result.cases["change"].value_counts()
        console.print(", ".join(f"{int(counts.get(c, 0))} {c}"
                                for c in ("improved", "regressed", "unchanged", "excluded")))
        console.print(R.category_table(result))
        for (left, right), group in result.cases.dropna(subset=["delta"]).groupby(["base_system", "other_system"]):
            console.print(paired_line(group["delta"].astype(float).tolist(), f"{left} → {right}"), soft_wrap=True)
        if request.plots is not None:
            say_written(console, R.compare_plots(result, request.plots), request.plots)
        return dict(result.as_dict())

    def compare_layers(self, recordings: Sequence[Path], names: Sequence[str] | None,
                       console: Console) -> dict[str, object]:
        from memprobe_engine.recovery.read import compare_render as R
        from memprobe_engine.recovery.read.compare_layers import compare_layers

        wanted = [name for name in checked_layers(self, recordings, names or []) if name != OWN_LAYER]
        result = compare_layers(list(recordings), wanted or None)
        for warning in result.warnings:
            console.print(f"[yellow]warning:[/] {escape(warning)}", markup=True, soft_wrap=True)
        for table in R.layer_tables(result):
            console.print(table)
        return dict(result.as_dict())

    def gate(self, comparison: Mapping[str, object], rule: str) -> Verdict:
        from memprobe_engine.recovery.read.compare_gate import gate

        return gate(comparison, rule)

    def layers(self, recordings: Sequence[Path]) -> list[str]:
        from memprobe_engine.recovery.read.compare_layers import layers_in

        return layers_in(recordings)

    def index_folds(self) -> dict[str, IndexFold]:
        from memprobe_engine.recovery.read.outcome_index import FOLD_NAME, OutcomeIndexFold

        return {FOLD_NAME: OutcomeIndexFold()}

    def headline(self, session: ReplaySession) -> dict[str, float | None]:
        from memprobe_engine.recovery.read.grid import headline_without_baselines
        from memprobe_engine.recovery.read.scores import score_board

        return headline_without_baselines(score_board(session))[0]

    def headline_text(self, values: dict[str, float | None]) -> str:
        return "/".join("—" if values.get(m) is None else f"{values[m]:.3f}" for m in ("dump_all", "retrieve"))

    def store_steps(self, session: ReplaySession, unit: str, system: str, *, short: bool = True) -> Labelled:
        from memprobe_engine.recovery.read.steps import store_steps

        return store_steps(session, unit, system, short=short)

    def estimate_of(self, recording: Path, header: RecordingHeader) -> CostEstimate | None:
        from memprobe_engine.recovery.estimate import estimate_recovery, plan_from_config
        from memprobe_engine.recovery.outcome_shares import OutcomeShares

        config = RecoveryConfig.of(header)
        plan = plan_from_config(config)
        if plan is None:
            return None
        # The release's branch shares alone: a report's text never depends on the recordings beside it.
        return estimate_recovery(plan, OutcomeShares(specs=config.models.specs(), release_only=True))

    def register_commands(self, root: typer.Typer, groups: Mapping[str, typer.Typer]) -> None:
        from memprobe_engine.recovery.commands import generate_users, import_release, judge, rescore

        root.add_typer(judge.judge_app, name="judge")
        root.command("rescore")(rescore.rescore)
        groups["generate"].command("users")(generate_users.users)
        groups["import"].command("release-a")(import_release.release_a)

    def validate_inputs(self, path: Path) -> Sequence[object]:
        from memprobe_engine.recovery.inputs import validate_sessions

        return validate_sessions(path)


    def eee_results(self, recording: Path, header: RecordingHeader) -> EeeResults:
        from memprobe_engine.recovery.read.eee import eee_results

        return eee_results(recording, header)

    def html_sections(self, session: ReplaySession, cases: Sequence[str]) -> HtmlSections:
        from memprobe_engine.recovery.read.html_case import html_sections

        return html_sections(session, cases)


SPEC = RecoverySpec()
