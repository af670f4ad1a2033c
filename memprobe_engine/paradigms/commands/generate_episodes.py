"""``memprobe generate episodes``: latent specs realized into a paradigm suite by any model.

Protocol B adds the command to the shared ``generate`` group (:meth:`ParadigmSpec.register_commands
<memprobe_engine.paradigms.spec.ParadigmSpec.register_commands>`).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.console import Console

from memprobe_engine.errors import ConfigError
from memprobe_engine.model_flags import role_specs

if TYPE_CHECKING:
    from memprobe_engine.orchestration.progress import CommandProgress

console = Console(highlight=False)


def episodes(
    specs: Annotated[Path, typer.Option(help="latent_specs.json to realize (value_pairs.json beside it names the "
                                              "fact types).")],
    out: Annotated[Path, typer.Option(help="Suite folder to write (episodes.jsonl, latent_specs.json, "
                                            "value_pairs.json; the recording in OUT/_generation/).")],
    episode: Annotated[Optional[list[str]], typer.Option("--episodes", help="Episode ids to realize (repeat or "
                                                          "comma-separate); default: every spec.")] = None,
    model: Annotated[Optional[list[str]], typer.Option(help="ROLE=SPEC (realizer, realizer_strong).")] = None,
    config: Annotated[Optional[Path], typer.Option(help="TOML config with \\[models].")] = None,
    seed: Annotated[int, typer.Option(help="Generation seed.")] = 0,
    attempts: Annotated[int, typer.Option(help="Attempts per session on the realizer role.")] = 3,
    strong_attempts: Annotated[int, typer.Option(help="Further attempts on realizer_strong before a "
                                                      "recorded exclusion.")] = 1,
    max_tokens: Annotated[int, typer.Option(help="Token cap per generated session.")] = 150,
    concurrency: Annotated[int, typer.Option(help="Episodes realized at once.")] = 2,
    filler_cap: Annotated[Optional[int], typer.Option(help="Scale the filler plan down: at most N fillers per "
                                                      "type (see docs/paradigm-realizer.md).", min=1)] = None,
    recheck: Annotated[bool, typer.Option(help="First take written episodes that break the current rules out of "
                                               "episodes.jsonl, so this run redoes their failing sessions.")] = False,
    retry_excluded: Annotated[Optional[list[str]], typer.Option(help="Excluded episode ids to try again (repeat or "
                                                               "comma-separate): taken out of excluded.jsonl first; "
                                                               "their exclusion events stay recorded.")] = None,
) -> None:
    """Realize latent specs into a paradigm suite; every call is recorded, re-running resumes."""
    from memprobe_engine.orchestration.progress import CommandProgress

    if concurrency < 1:
        raise ConfigError(f"--concurrency {concurrency}: give how many episodes to realize at once, 1 or more.")

    ids = [part.strip() for item in (episode or []) for part in item.split(",") if part.strip()] or None
    retry = tuple(part.strip() for item in (retry_excluded or []) for part in item.split(",") if part.strip())
    with CommandProgress("generate", unit="sessions") as progress:
        asyncio.run(_episodes(specs, out, ids, list(model or []), config, seed, attempts, strong_attempts,
                              max_tokens, concurrency, filler_cap, (recheck, retry), progress))


async def _episodes(specs: Path, out: Path, ids: list[str] | None, overrides: list[str], config: Path | None,
                    seed: int, attempts: int, strong_attempts: int, max_tokens: int, concurrency: int,
                    filler_cap: int | None, redo: tuple[bool, tuple[str, ...]], progress: CommandProgress) -> None:
    from memprobe_engine.llm.cache import ResponseCache
    from memprobe_engine.llm.config import load_llm_config
    from memprobe_engine.paradigms.realize.run import RealizeRequest, realize_suite
    from memprobe_engine.paradigms.realize.writer import RealizeSettings

    llm_config = load_llm_config(config, os.environ, role_specs(overrides))
    settings = RealizeSettings(seed=seed, attempts=attempts, strong_attempts=strong_attempts, max_tokens=max_tokens,
                               filler_cap=filler_cap)
    summary = await realize_suite(RealizeRequest(specs, out, ids, settings, concurrency, *redo), llm_config,
                                  cache=ResponseCache(), progress=progress.phase, signals=True)
    s = summary.stats
    console.print(f"{s.episodes} episode(s) written, {s.excluded_episodes} excluded, {s.skipped} already done; "
                  f"{s.sessions} sessions, {s.calls} calls ({s.live_calls} live), {s.regenerations} regenerations, "
                  f"{s.strong_sessions} sessions escalated to realizer_strong, {s.dropped_sessions} filler sessions "
                  f"dropped; {summary.wall_s:.0f} s. Recording {summary.recording}", markup=False)
