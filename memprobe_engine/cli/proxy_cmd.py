"""``memprobe proxy --record DIR``: record any OpenAI-speaking harness into a MemProbe recording.

Starts the loopback recording proxy (:mod:`memprobe_engine.llm.proxy`) with open keys: point a
harness at the printed base URL and let it run. A client names the "system" its calls are recorded
under with the API key ``mp-NAME`` (or the header ``X-MemProbe-Client: NAME``); any other API key
is never written or printed — its calls are recorded as ``client-`` and a short salted hash of it.
The request's ``model`` picks the role when it names one (``agent``, ``reader``, …), so
``--model agent=local:fast`` decides who answers. Every call becomes an ``llm_call`` /
``embedding`` event inside one span per client; Ctrl-C or SIGTERM ends the recording cleanly.
Started again on the same folder, it resumes: every answer already recorded is served back by
request hash, so a re-run harness repeats no model call.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import datetime as dt
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal, Optional

import typer

from memprobe_engine.errors import ConfigError
from memprobe_engine.run_flags import check_record_folder

if TYPE_CHECKING:
    from memprobe_engine.llm.config import LLMConfig


def proxy(
    record: Annotated[Path, typer.Option(help="Recording folder to write (resumed if it exists).")],
    model: Annotated[Optional[list[str]], typer.Option(help="ROLE=SPEC (or a bare SPEC for the default role); "
                                                            "repeatable, e.g. --model agent=local:fast.")] = None,
    config: Annotated[Optional[Path], typer.Option(help="TOML config file with \\[models].")] = None,
    embeddings: Annotated[str, typer.Option(help="Embedding spec for /v1/embeddings (st:minilm or "
                                                 "openai:MODEL@URL).")] = "st:minilm",
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1 (0 picks a free one).")] = 0,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Bypass the persistent response cache.")] = False,
) -> None:
    """Serve /v1/chat/completions, /v1/embeddings and /v1/models on 127.0.0.1, recording every call."""
    from memprobe_engine.llm.config import load_llm_config
    from memprobe_engine.llm.embeddings import parse_embedding_spec

    check_record_folder(record)
    _check_own_recording(record)
    llm_config = load_llm_config(config, os.environ, list(model or []))
    parse_embedding_spec(embeddings, origin="--embeddings")  # a bad spec fails now, not on the first request
    if not 0 <= port < 65536:
        raise ConfigError(f"--port {port}: choose 0 (any free port) or a port number below 65536.")
    asyncio.run(_serve(record, llm_config, embeddings, port, no_cache))


def _check_own_recording(record: Path) -> None:
    """A proxy resumes only a proxy recording: its calls appended to a protocol run's recording would
    read there as damage (a second run inside a finished one)."""
    from memprobe_engine.events.header import HEADER_FILE, read_header

    if not (record / HEADER_FILE).is_file():
        return
    suite = read_header(record).suite
    if suite != "proxy":
        raise ConfigError(f"--record {record}: a {suite} recording, not one the proxy wrote; the proxy resumes only "
                          f"its own recordings. Name a new folder, e.g. --record recordings/proxy-1.")


async def _serve(record: Path, llm_config: LLMConfig, embedding_spec: str, port: int, no_cache: bool) -> None:
    from memprobe_engine.events.header import HEADER_FILE, new_header
    from memprobe_engine.events.recorder import Recorder
    from memprobe_engine.events.run import RunEnd, RunStart
    from memprobe_engine.events.writer import open_writer
    from memprobe_engine.llm.cache import ResponseCache
    from memprobe_engine.llm.client import ChatClient
    from memprobe_engine.llm.embeddings import Embedder
    from memprobe_engine.llm.proxy import RecordingProxy
    from memprobe_engine.orchestration.resume import RecordedResponses, read_resume

    resumed = (record / HEADER_FILE).exists()
    responses = read_resume(record).responses
    run_id = "proxy-" + dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    from memprobe_engine.provenance import collect_provenance

    proxy_config = {"suite": "proxy", "models": llm_config.resolved(), "embeddings": embedding_spec}
    writer = open_writer(record, None if resumed else new_header(run_id, "proxy", proxy_config,
                                                                 collect_provenance(proxy_config)))
    recorder = Recorder(writer)
    if resumed:
        recorder.close_spans_of_a_crash()  # a killed earlier session's client spans
    recorder.emit(RunStart(run_id=writer.header.run_id, suite="proxy", resumed=resumed))
    chat = ChatClient(llm_config, recorder=recorder,
                      cache=RecordedResponses(responses, None if no_cache else ResponseCache()))
    embedder: list[Embedder] = []

    def make_embedder() -> Embedder:
        embedder.append(Embedder.from_spec(embedding_spec, recorder=recorder))
        return embedder[0]

    sessions: list[tuple[contextvars.Context, contextlib.ExitStack]] = []

    def open_session(system: str) -> contextvars.Context:
        """A span per client key, opened in its own context so its requests nest inside it."""
        context = contextvars.copy_context()
        stack = contextlib.ExitStack()
        context.run(stack.enter_context, recorder.span(f"client {system}", "proxy_session", system=system))
        sessions.append((context, stack))
        return context

    status: Literal["completed", "interrupted"] = "interrupted"
    run_context, run_stack = contextvars.copy_context(), contextlib.ExitStack()
    run_context.run(run_stack.enter_context, recorder.span("proxy", "run"))
    server = RecordingProxy(chat, make_embedder, open_keys=True, default_role="default", port=port,
                            on_new_key=lambda system: run_context.run(open_session, system),
                            key_salt=writer.header.run_id)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        try:
            await server.start()
        except OSError as err:
            raise ConfigError(f"--port {port}: cannot listen on 127.0.0.1 ({err.strerror}); pick another "
                              f"port or 0 for a free one.") from None
        print(f"memprobe proxy listening on {server.base_url}", flush=True)
        print(f"  recording to {record}; point OPENAI_BASE_URL there; an API key mp-NAME records the "
              f"client as NAME; Ctrl-C stops", file=sys.stderr, flush=True)
        await stop.wait()
        status = "completed"
    finally:
        await server.aclose()
        for context, stack in reversed(sessions):
            context.run(stack.close)
        run_context.run(run_stack.close)
        await chat.aclose()
        for item in embedder:
            await item.aclose()
        recorder.emit(RunEnd(status=status))
        writer.close()
    print(f"recorded to {record}  (replay: memprobe replay {record})", file=sys.stderr, flush=True)
