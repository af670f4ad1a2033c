"""``memprobe judge check`` and ``memprobe judge train``: protocol A's judge against the paper's."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.console import Console

from memprobe_engine.errors import ConfigError
from memprobe_engine.protocol_spec import OWN_LAYER

if TYPE_CHECKING:
    from memprobe_engine.llm.client import ChatClient
    from memprobe_engine.recovery.calibration.cases import JudgedCase
    from memprobe_engine.recovery.calibration.check import FillOutcome

judge_app = typer.Typer(help="Measure protocol A's judges against the paper's judgments, and train the calibrated "
                             "one.", no_args_is_help=True)
console = Console(highlight=False)


def _csv(value: Optional[str]) -> Optional[list[str]]:
    if value is None:
        return None
    items = [part.strip() for part in value.split(",") if part.strip()]
    if not items:
        raise ConfigError("--users is empty; name user ids (user_003,user_004) or leave the flag out for all.")
    return items


def _source_cases(source: Path, users: Optional[list[str]], layer: Optional[str]) -> list[JudgedCase]:
    """The reference: a release folder's judgments, or a recording's (its own, or ``layer``)."""
    from memprobe_engine.recovery.calibration.cases import recording_cases, release_cases

    if not source.is_dir():
        raise ConfigError(f"{source}: not a folder; give a protocol-A release folder or a recording.")
    if (source / "output").is_dir():
        if layer is not None:
            raise ConfigError("--layer reads a judgment layer of a recording; a release folder has only the "
                              "paper's judgments.")
        return release_cases(source, users)
    if layer is not None and layer != OWN_LAYER:
        from memprobe_engine.recovery.read.compare_layers import layers_in

        held = layers_in([source])
        if layer not in held:
            raise ConfigError(f"--layer {layer}: {source} holds no such judgment layer (it holds: "
                              f"{', '.join([OWN_LAYER, *held])}). A re-score kept with `memprobe rescore --as NAME` "
                              f"adds one.")
    cases = recording_cases(source, layer=None if layer == OWN_LAYER else layer)
    return [c for c in cases if users is None or c.user_id in users]


def _candidate(judge: str, model: Optional[list[str]]) -> tuple[str, list[str]]:
    """(judge kind for the run's judge path, role overrides): ``calibrated[:NAME]``, ``model``
    (the recovery_judge role as configured) or a model spec (that spec as the recovery_judge)."""
    from memprobe_engine.model_flags import role_specs
    from memprobe_engine.recovery.judge_kind import MODEL_JUDGE, check_judge

    overrides = role_specs(model)
    if judge.startswith("calibrated") or judge == MODEL_JUDGE:
        return check_judge(judge, where="--judge"), overrides
    return MODEL_JUDGE, overrides + [f"recovery_judge={judge}"]


@judge_app.command("check")
def check(
    source: Annotated[Path, typer.Argument(help="The reference: a protocol-A release folder (the paper's judge) or "
                                                "a recording (its own judgments, or --layer).")],
    judge: Annotated[str, typer.Option(help="The candidate: calibrated[:NAME] (default), model (the recovery_judge "
                                            "role as configured) or a model spec such as local:1.5b.")] = "calibrated",
    layer: Annotated[Optional[str], typer.Option(help="Reference layer of a recording (default: its own "
                                                      "judgments).")] = None,
    framing: Annotated[str, typer.Option(help="Framing of a model judge's prompt: embedded (default) or "
                                              "release.")] = "embedded",
    users: Annotated[Optional[str], typer.Option(help="Comma-separated user ids (default: all).")] = None,
    limit: Annotated[Optional[int], typer.Option(min=1, help="At most N cases, spread evenly over the reference's "
                                                             "five levels.")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the --limit draw.")] = 0,
    passes: Annotated[int, typer.Option(min=1, max=2, help="2 (default): judge twice, the second time without "
                                                           "the response cache, and report self-consistency.")] = 2,
    model: Annotated[Optional[list[str]], typer.Option(help="ROLE=SPEC for a model judge (recovery_judge=…).")] = None,
    config: Annotated[Optional[Path], typer.Option(help="TOML config with \\[models].")] = None,
    judge_max_tokens: Annotated[int, typer.Option(help="Cap on a model judge's tokens.")] = 150,
    json_out: Annotated[Optional[Path], typer.Option("--json", help="Also write the figures to this JSON "
                                                                    "file.")] = None,
    stage: Annotated[str, typer.Option(help="judge (default): the judge against the reference; fill: the "
                                            "slot-filler (--model slot_filler=…, default the embedded model) on "
                                            "what the release's slot-filler read, its fill and the release's "
                                            "judged by --judge.")] = "judge",
    recovered_only: Annotated[bool, typer.Option("--recovered-only", help="Only cases the reference scored 0.75 "
                                                                          "or more.")] = False,
) -> None:
    """How far a judge agrees with the reference: exact, within one level, linear-weighted kappa, the
    confusion table, the bias per system, and self-consistency over two passes; with --stage fill, how
    the slot-filler's fills score beside the release's."""
    from memprobe_engine.llm.cache import ResponseCache
    from memprobe_engine.llm.client import ChatClient
    from memprobe_engine.llm.config import load_llm_config
    from memprobe_engine.orchestration.progress import CommandProgress
    from memprobe_engine.recovery.calibration.agreement import render
    from memprobe_engine.recovery.calibration.cases import stratified
    from memprobe_engine.recovery.calibration.check import run_check
    from memprobe_engine.recovery.framing import check_framing
    from memprobe_engine.recovery.judge_kind import MODEL_JUDGE
    from memprobe_engine.recovery.scoring import is_unknown

    chosen_framing = check_framing(framing)
    if json_out is not None and (json_out.is_dir() or not json_out.parent.is_dir()):
        # Checked before any case is judged: a fill check takes minutes, and its figures go here.
        raise ConfigError(f"--json {json_out}: {'a folder' if json_out.is_dir() else 'its folder does not exist'}; "
                          f"name a file in an existing folder, e.g. --json judge-check.json.")
    if stage not in ("judge", "fill"):
        raise ConfigError(f"--stage {stage!r}: use judge (the judge against the reference) or fill (the "
                          f"slot-filler on the release's reading material).")
    kind, overrides = _candidate(judge, model)
    everything = [c for c in _source_cases(source, _csv(users), layer) if not is_unknown(c.predicted)
                  and (not recovered_only or c.reference >= 0.75)]
    if not everything:
        raise ConfigError(f"{source}: no judged fill other than 'unknown' for these users"
                          f"{' scored 0.75 or more' if recovered_only else ''}.")
    cases = stratified(everything, limit, seed)
    if stage == "fill":
        _fill_stage(source, cases, kind, overrides, config, chosen_framing, judge_max_tokens, json_out)
        return
    llm_config = load_llm_config(config, os.environ, overrides) if kind == MODEL_JUDGE else None

    def make_chat(cached: bool) -> ChatClient | None:
        if llm_config is None:
            return None
        from memprobe_engine.events.recorder import Recorder

        return ChatClient(llm_config, Recorder(None), cache=ResponseCache() if cached else None)

    candidate = kind if llm_config is None else f"model judge {llm_config.spec_for('recovery_judge').spec_string()}"
    started = time.monotonic()
    with CommandProgress("judge check", unit="judgments", total=passes * len(cases)) as progress:
        progress.phase(f"{len(cases)} case(s) of {source} ({len(everything)} non-unknown), {passes} pass(es)")
        result = run_check(cases, make_chat, judge_kind=kind, framing=chosen_framing, max_tokens=judge_max_tokens,
                           passes=passes, progress=lambda done, total: progress.advance(1))
    took = time.monotonic() - started
    reference = f"layer {layer!r} of {source}" if layer else f"{source} ({'paper' if (source / 'output').is_dir() else 'recorded'} judgments)"
    console.print(render(result.vs_reference, title=f"candidate: {candidate}   reference: {reference}"))
    if result.self_consistency is not None:
        console.print(f"  self-consistency: {result.self_consistency:.1%} of cases got the same level on both passes")
    console.print(f"  {took / max(1, passes * len(cases)):.2f} s per judgment ({took:.0f} s in all)")
    if json_out is not None:
        figures = result.vs_reference
        json_out.write_text(json.dumps({
            "candidate": candidate, "reference": reference, "cases": figures.n, "exact": figures.exact,
            "within_one": figures.within_one, "kappa_linear": figures.kappa_linear, "spearman": figures.spearman,
            "confusion": figures.confusion, "error_sd": figures.error_sd,
            "bias_by_system": {s: b for s, (b, _) in figures.bias_by_system.items()},
            "self_consistency": result.self_consistency, "seconds": round(took, 1)}, indent=1) + "\n")


def _fill_stage(source: Path, cases: list[JudgedCase], kind: str, overrides: list[str], config: Optional[Path],
                framing: str, max_tokens: int, json_out: Optional[Path]) -> None:
    """``--stage fill``: the slot-filler on the release's reading material, judged beside the release."""
    import asyncio

    from memprobe_engine.events.recorder import Recorder
    from memprobe_engine.llm.cache import ResponseCache
    from memprobe_engine.llm.client import ChatClient
    from memprobe_engine.llm.config import load_llm_config
    from memprobe_engine.orchestration.progress import CommandProgress
    from memprobe_engine.recovery.calibration.check import fill_cases, render_fills
    from memprobe_engine.recovery.framing import check_framing

    if not (source / "output").is_dir():
        raise ConfigError("--stage fill reads what the release's slot-filler read: give a release folder.")
    llm_config = load_llm_config(config, os.environ, overrides)

    async def go() -> list[FillOutcome]:
        chat = ChatClient(llm_config, Recorder(None), cache=ResponseCache())
        try:
            return await fill_cases(cases, chat, judge_kind=kind, framing=check_framing(framing),
                                    max_tokens=max_tokens, context_tokens=llm_config.spec_for("slot_filler").context_budget(),
                                    progress=lambda done: progress.advance(1))
        finally:
            await chat.aclose()

    started = time.monotonic()
    with CommandProgress("judge check --stage fill", unit="fills", total=len(cases)) as progress:
        outcomes = asyncio.run(go())
    console.print(f"slot-filler {llm_config.spec_for('slot_filler').spec_string()} on {source}, judged by {kind}")
    console.print(render_fills(outcomes))
    took = time.monotonic() - started
    console.print(f"  {took / max(1, len(cases)):.1f} s per case")
    if json_out is not None:
        json_out.write_text(json.dumps({
            "slot_filler": llm_config.spec_for("slot_filler").spec_string(), "judge": kind, "source": str(source),
            "cases": [{"user_id": o.case.user_id, "system": o.case.system, "mode": o.case.mode,
                       "dimension": o.case.dimension, "truth": o.case.truth, "release_fill": o.case.predicted,
                       "release_reference_score": o.case.reference, "release_fill_score": o.release_fill_score,
                       "fill": o.fill, "fill_score": o.fill_score, "excluded": o.excluded} for o in outcomes],
            "seconds": round(took, 1)}, indent=1) + "\n")


@judge_app.command("train")
def train(
    sources: Annotated[list[Path], typer.Argument(help="Protocol-A release folders whose judgments to train on.")],
    hold_out: Annotated[Optional[str], typer.Option(help="Comma-separated user ids kept out of training and "
                                                         "measured afterwards.")] = None,
    name: Annotated[str, typer.Option(help="Name of the weights (NAME.npz and NAME.json in --out).")] = "minilm-judge",
    out: Annotated[Optional[Path], typer.Option(help="Folder to write to (default: the package's weights "
                                                     "folder).")] = None,
    epochs: Annotated[int, typer.Option(min=1)] = 4,
    learning_rate: Annotated[float, typer.Option()] = 5e-4,
    seed: Annotated[int, typer.Option()] = 0,
    rank: Annotated[int, typer.Option(min=1, help="The adapters' rank (their scale stays 2: alpha is twice "
                                                  "the rank).")] = 8,
) -> None:
    """Fit the calibrated judge's adapters on the paper's judgments (minutes on two cores)."""
    from memprobe_engine.orchestration.progress import CommandProgress
    from memprobe_engine.recovery.calibration.cases import release_cases
    from memprobe_engine.recovery.calibration.train import TrainSettings, trainable
    from memprobe_engine.recovery.calibration.train import train as fit
    from memprobe_engine.recovery.cross_judge import WEIGHTS_DIR

    held = set(_csv(hold_out) or [])
    cases = trainable([c for source in sources for c in release_cases(source)])
    train_cases = [c for c in cases if c.user_id not in held]
    held_cases = [c for c in cases if c.user_id in held]
    if not train_cases:
        raise ConfigError("--hold-out leaves no user to train on.")
    settings = TrainSettings(epochs=epochs, learning_rate=learning_rate, seed=seed, rank=rank, alpha=2.0 * rank)
    with CommandProgress("judge train", unit="epochs", total=epochs) as progress:
        progress.phase(f"{len(train_cases)} training case(s), {len(held_cases)} held out")
        card = fit(train_cases, held_cases, out or WEIGHTS_DIR, name, settings,
                   sources=[s.name for s in sources], progress=lambda line: progress.advance(1, line))
    console.print(json.dumps(card["held_out"] or {"held_out": "none"}, indent=1))
    console.print(f"wrote {(out or WEIGHTS_DIR) / name}.npz and .json")
