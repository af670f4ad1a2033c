"""``memprobe llm ask``: one recorded question to any configured model."""

from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import orjson
import typer
from rich.console import Console

from memprobe_engine.errors import ConfigError

if TYPE_CHECKING:
    from memprobe_engine.llm.call import ChatOutcome

llm_app = typer.Typer(help="Talk to the configured models directly.", no_args_is_help=True)
console = Console(highlight=False)


@llm_app.command("ask")
def ask(
    question: Annotated[str, typer.Argument(help="The user message to send.")],
    role: Annotated[str, typer.Option(help="Role whose model spec to use (see docs/llm-config.md).")] = "default",
    model: Annotated[Optional[str], typer.Option(help="Model spec for the role, e.g. local:fast, "
                                                      "openai:gpt-4o-mini, openai:NAME@http://host:8000/v1.")] = None,
    json_schema: Annotated[Optional[Path], typer.Option("--json-schema", help="JSON Schema file the answer "
                                                        "must satisfy (constrained decoding where supported).")] = None,
    system: Annotated[Optional[str], typer.Option(help="Optional system prompt.")] = None,
    max_tokens: Annotated[int, typer.Option(help="Cap on generated tokens.")] = 256,
    record: Annotated[Optional[Path], typer.Option(help="Record the call into this recording directory.")] = None,
    config: Annotated[Optional[Path], typer.Option(help="TOML config file with \\[models].")] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Bypass the response cache.")] = False,
) -> None:
    """Send one question; print the answer (and where the recording went)."""
    schema = _load_schema(json_schema) if json_schema else None
    overrides = [f"{role}={model}"] if model else []
    asyncio.run(_ask(question, role, overrides, config, schema, system, max_tokens, record, no_cache))


def _load_schema(path: Path) -> dict[str, Any]:
    if path.exists() and not path.is_file():  # a FIFO or device would block the read for ever
        raise ConfigError(f"--json-schema {path} is not a regular file (a folder, pipe or device): pass a JSON "
                          f"Schema file.")
    try:
        schema = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        raise ConfigError(f"--json-schema {path}: no such file.") from None
    except orjson.JSONDecodeError as err:
        raise ConfigError(f"--json-schema {path} is not valid JSON ({err}). Pass a JSON Schema object.") from None
    if not isinstance(schema, dict) or not ({"type", "properties", "$ref", "anyOf", "oneOf"} & schema.keys()):
        raise ConfigError(f"--json-schema {path} does not look like a JSON Schema object "
                          f"(expected keys such as \"type\" and \"properties\").")
    return schema


async def _ask(question: str, role: str, overrides: list[str], config_file: Path | None,
               schema: dict[str, Any] | None, system: str | None, max_tokens: int,
               record: Path | None, no_cache: bool) -> None:
    import os

    from memprobe_engine.events.header import new_header
    from memprobe_engine.events.recorder import NULL_RECORDER, Recorder
    from memprobe_engine.llm.cache import ResponseCache
    from memprobe_engine.llm.client import ChatClient
    from memprobe_engine.llm.config import load_llm_config
    from memprobe_engine.llm.types import ChatMessage, SamplingParams
    from memprobe_engine.orchestration.lifecycle import recorded_run

    llm_config = load_llm_config(config_file, os.environ, overrides)
    messages = ([ChatMessage(role="system", content=system)] if system else []) + \
        [ChatMessage(role="user", content=question)]
    params = SamplingParams(temperature=0.0, max_tokens=max_tokens)

    async def ask_once(recorder: Recorder) -> ChatOutcome:
        client = ChatClient(llm_config, recorder=recorder, cache=None if no_cache else ResponseCache())
        try:
            with recorder.span("ask", "call"):
                return await client.chat(role, messages, params=params, json_schema=schema)
        finally:
            await client.aclose()

    if record is None:
        outcome = await ask_once(NULL_RECORDER)
    else:
        run_id = "ask-" + dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        from memprobe_engine.provenance import collect_provenance

        ask_config = {"models": llm_config.resolved()}
        header = new_header(run_id, "ask", ask_config, collect_provenance(ask_config))
        async with recorded_run(record, header=header, suite="ask", signals=True) as run:
            run.scrub = ChatClient(llm_config, recorder=NULL_RECORDER).scrub
            outcome = await ask_once(run.recorder)
    if outcome.excluded:
        console.print(f"[yellow]the answer did not satisfy the schema after repair:[/] {outcome.excluded}")
    console.print(outcome.text if outcome.parsed is None else orjson.dumps(
        outcome.parsed, option=orjson.OPT_INDENT_2).decode(), markup=False)
    tokens_s = outcome.usage.completion_tokens / outcome.latency_s if outcome.latency_s else 0.0
    console.print(f"[dim]{outcome.backend}:{outcome.model}  {outcome.usage.prompt_tokens} prompt + "
                  f"{outcome.usage.completion_tokens} generated tokens in {outcome.latency_s:.1f} s"
                  f"{f' ({tokens_s:.1f} tok/s)' if tokens_s else ''}{'  (cache hit)' if outcome.cache_hit else ''}[/]")
    if record is not None:
        console.print(f"recorded to [bold]{record}[/]  (inspect: memprobe recording info {record})")
