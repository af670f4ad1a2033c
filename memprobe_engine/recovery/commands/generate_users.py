"""``memprobe generate users``: new simulated users (persona, hidden bank, leak-controlled tasks).

Protocol A adds the command to the shared ``generate`` group (:meth:`RecoverySpec.register_commands
<memprobe_engine.recovery.spec.RecoverySpec.register_commands>`).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.console import Console

from memprobe_engine.model_flags import role_specs
from memprobe_engine.recovery.provenance_inputs import PROMPT_MODULES, input_hashes

if TYPE_CHECKING:
    from memprobe_engine.orchestration.progress import CommandProgress

console = Console(highlight=False)


def users(
    out: Annotated[Path, typer.Option(help="Output sessions folder (pool.json + users/).")],
    n: Annotated[int, typer.Option("--n", help="How many users to generate.")] = 1,
    pool: Annotated[Path, typer.Option(help="Taxonomy pool to draw dimensions from.")] = Path("sessions/pool.json"),
    prefix: Annotated[str, typer.Option(help="User id prefix.")] = "gen",
    model: Annotated[Optional[list[str]], typer.Option(help="ROLE=SPEC (task_generator, critic, editor).")] = None,
    config: Annotated[Optional[Path], typer.Option(help="TOML config with \\[models].")] = None,
    seed: Annotated[int, typer.Option(help="Generation seed.")] = 0,
    retries: Annotated[int, typer.Option(help="Retry budget for bank entries and flagged tasks.")] = 3,
) -> None:
    """Generate N users; every model call is recorded under OUT/_generation/."""
    from memprobe_engine.orchestration.progress import CommandProgress

    with CommandProgress("generate", unit="users", total=n) as progress:
        asyncio.run(_generate(out, n, pool, prefix, list(model or []), config, seed, retries, progress))


async def _generate(out: Path, n: int, pool_path: Path, prefix: str, overrides: list[str], config: Path | None,
                    seed: int, retries: int, progress: CommandProgress) -> None:
    from memprobe_engine.events.header import new_header
    from memprobe_engine.llm.cache import ResponseCache
    from memprobe_engine.llm.client import ChatClient
    from memprobe_engine.llm.config import load_llm_config
    from memprobe_engine.orchestration.lifecycle import recorded_run
    from memprobe_engine.recovery.generate import GenerationSettings, generate_user, write_user
    from memprobe_engine.recovery.inputs import load_pool, validate_sessions

    pool = load_pool(pool_path)
    llm_config = load_llm_config(config, os.environ, role_specs(overrides))
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(pool_path, out / "pool.json")
    run_id = "generate-" + dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    from memprobe_engine.provenance import collect_provenance

    generate_config = {"n": n, "seed": seed, "retries": retries, "pool": str(pool_path), "models": llm_config.resolved()}
    header = new_header(run_id, "generate", generate_config, collect_provenance(
        generate_config, inputs=input_hashes(generate_config), prompt_modules=PROMPT_MODULES))
    settings = GenerationSettings(bank_retries=retries, task_retries=retries, seed=seed)
    async with recorded_run(out / "_generation" / run_id, header=header, suite="generate", signals=True) as run:
        chat = ChatClient(llm_config, recorder=run.recorder, cache=ResponseCache())
        run.scrub = chat.scrub
        try:
            for index in range(n):
                user_id = f"{prefix}_{index + 1:03d}"
                profile, bank, tasks = await generate_user(chat, run.recorder, pool, user_id, settings)
                folder = write_user(out, user_id, profile, bank, tasks)
                progress.advance(note=f"wrote {folder}")
        finally:
            await chat.aclose()
    writer = run.writer
    problems = validate_sessions(out)
    for problem in problems:
        console.print(str(problem), markup=False)
    console.print(f"{n} user(s) in {out}; {len(problems)} validation problem(s); recording {writer.directory}")
