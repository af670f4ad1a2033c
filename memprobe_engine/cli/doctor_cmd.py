"""``memprobe doctor``: what is installed, whether the embedded model is intact and how fast it runs,
and whether every configured OpenAI-compatible endpoint answers."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

from memprobe_engine.model_flags import role_specs

OPENAI_DEFAULT_URL = "https://api.openai.com/v1"


def doctor(
    tier: Annotated[str, typer.Option(help="Embedded model tier to verify and time: 1.5b (default) or fast.")] = "1.5b",
    endpoint: Annotated[Optional[list[str]], typer.Option(
        help="Another OpenAI-compatible base URL to check, as NAME=URL or URL (repeatable).")] = None,
    config: Annotated[Optional[Path], typer.Option(help="TOML config with \\[models]: its endpoints are checked.")]
    = None,
    model: Annotated[Optional[list[str]], typer.Option(help="ROLE=SPEC, as for run: its endpoint is checked.")]
    = None,
) -> None:
    """Check the installation, verify the model hash, measure local tokens/s, probe endpoints."""
    from memprobe_engine.doctor import render_doctor, run_doctor
    from memprobe_engine.errors import ConfigError
    from memprobe_engine.llm.config import load_llm_config
    from memprobe_engine.llm.model_assets import TIER_ALIASES, TIERS, resolve_tier

    try:  # at once, not after a minute of other checks ending in advice to reinstall
        resolve_tier(tier)
    except ConfigError:
        raise ConfigError(f"--tier {tier!r} is not an embedded model tier: use one of "
                          f"{', '.join(sorted([*TIERS, *TIER_ALIASES]))}.") from None

    endpoints: dict[str, str] = {}
    # Every endpoint the configuration (file, MEMPROBE_MODEL* variables, --model) points a role at.
    for role, spec in load_llm_config(config, os.environ, role_specs(model)).models.items():
        if spec.backend == "openai":
            url = spec.base_url or os.environ.get("OPENAI_BASE_URL") or OPENAI_DEFAULT_URL
            endpoints.setdefault(url, f"role {role}")
    for item in endpoint or []:
        name, _, url = item.partition("=") if "=" in item else ("endpoint", "", item)
        endpoints.setdefault(url, name)
    report = run_doctor(check_endpoints=[(label, url) for url, label in endpoints.items()] or None, tier=tier)
    Console(highlight=False).print(render_doctor(report))
    raise typer.Exit(0 if all(check.ok for check in report.checks) else 1)
