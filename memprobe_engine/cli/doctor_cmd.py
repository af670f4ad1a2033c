"""``memprobe doctor``: what is installed, whether the embedded model is intact and how fast it runs."""

from __future__ import annotations

from typing import Annotated, Optional

import typer
from rich.console import Console


def doctor(
    tier: Annotated[str, typer.Option(help="Embedded model tier to verify and time: 1.5b (default) or fast.")] = "1.5b",
    endpoint: Annotated[Optional[list[str]], typer.Option(
        help="OpenAI-compatible base URL to check, as NAME=URL or URL (repeatable).")] = None,
) -> None:
    """Check the installation, verify the model hash, measure local tokens/s, probe endpoints."""
    from memprobe_engine.doctor import render_doctor, run_doctor

    endpoints = []
    for item in endpoint or []:
        name, _, url = item.partition("=") if "=" in item else ("endpoint", "", item)
        endpoints.append((name, url))
    report = run_doctor(check_endpoints=endpoints or None, tier=tier)
    Console(highlight=False).print(render_doctor(report))
    raise typer.Exit(0 if all(check.ok for check in report.checks) else 1)
