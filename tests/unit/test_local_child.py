"""The embedded server in a child process, as the replay UI runs it (issue 36): the UI's process never
waits on llama.cpp's load or stop, which hold the GIL for seconds in the process that runs them.

The child here loads a stand-in runtime (``tests/fake_runtime``) whose destructor would take 30 s: a
stop that returns at once proves the child exits without running it, as it must not wait for
llama.cpp's step in progress. The real model's start and stop are timed in
``tests/functional/test_embedded_model.py``.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from dataclasses import replace as dataclasses_replace
from pathlib import Path

import pytest

from memprobe_engine.errors import LLMError
from memprobe_engine.llm.backends import local, local_child
from memprobe_engine.llm.backends.local import Serving
from memprobe_engine.llm.backends.local_child import ChildServer
from memprobe_engine.llm.backends.local_params import ServerSettings
from memprobe_engine.llm.model_assets import ModelFile
from memprobe_engine.llm.spec import parse_spec

FAKE_RUNTIME = Path(__file__).resolve().parents[1] / "fake_runtime"


@pytest.fixture(autouse=True)
def fake_runtime(monkeypatch: pytest.MonkeyPatch) -> None:
    """The child imports the stand-in ``xllamacpp`` (first on its path)."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(FAKE_RUNTIME), os.environ.get("PYTHONPATH", "")]))


def settings(model: str = "/models/qwen.gguf") -> ServerSettings:
    return ServerSettings(model=model, alias="qwen", n_ctx=4096, slots=1, prompt_cache=True, draft=None,
                          n_threads=1, batch_tokens=512, api_key="k3y-for-this-process")


def test_a_child_server_serves_and_stops_at_once() -> None:
    server = ChildServer.start(settings(), 30, "fast")
    try:
        assert server.address.startswith("http://127.0.0.1:")
        assert "llamacpp:prompt_tokens_total 1710" in server.handle_metrics()  # over HTTP, with the key
    finally:
        started = time.monotonic()
        server.stop()
        stopped = time.monotonic() - started
    assert server.process.returncode == 0  # it ended by itself when its stdin closed, not killed
    assert stopped < 15, f"the stop took {stopped:.1f} s: the child ran the runtime's destructor (it sleeps 30 s)"


def test_a_child_that_fails_to_start_is_one_message_quoting_its_error() -> None:
    with pytest.raises(LLMError) as caught:
        ChildServer.start(settings("/models/broken.gguf"), 30, "fast")
    message = str(caught.value)
    assert "'fast' failed to start in its server process (its process ended with status 1)" in message
    assert "tensor data is not within the file bounds" in message and "RuntimeError" in message


def test_a_ui_keeps_its_server_in_a_child_until_exit(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    model = ModelFile(tier="fast", path=tmp_path / "qwen.gguf", size=1, sha256="0", assembled=False,
                      fully_hashed=False, seconds=0.0)
    monkeypatch.setattr(local, "ensure_model", lambda tier: model)
    monkeypatch.setattr(local_child, "_FOR_UI", True)
    serving = Serving(slots=1, prompt_cache=True, draft=None)
    server = local.acquire_server("fast", 4096, startup_timeout_s=30, requested_by="the test", serving=serving)
    try:
        assert isinstance(server.handle, ChildServer) and server.handle.process.poll() is None
        local.release_server(server)
        assert local.running_servers() == [server]  # kept up: the next re-run starts at once
        again = local.acquire_server("fast", 4096, startup_timeout_s=30, requested_by="the test", serving=serving)
        assert again is server
        local.release_server(again)
        # Idle and asked for other settings: replaced, not refused as a busy server would be.
        other = local.acquire_server("fast", 8192, startup_timeout_s=30, requested_by="the test", serving=serving)
        assert other is not server and server.handle is None
        local.release_server(other)
    finally:
        child = next((s.handle for s in local.running_servers() if isinstance(s.handle, ChildServer)), None)
        started = time.monotonic()
        local.shutdown_all()
        assert time.monotonic() - started < 15  # a hang check: the stand-in's destructor sleeps 30 s
    assert local.running_servers() == []
    assert child is not None and child.process.poll() is not None


async def test_a_start_cancelled_while_the_child_loads_ends_the_child_and_the_next_starts_afresh(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Esc during a re-run's first embedded-model load (the stand-in's ``slow.gguf`` loads for 60 s)
    cancels the backend's start: the child loading the model is ended at once, instead of loading on
    for nobody, and the next start runs a fresh child. Before, the child went on loading (and was then
    kept up with a user that never came)."""
    slow = ModelFile(tier="fast", path=tmp_path / "slow.gguf", size=1, sha256="0", assembled=False,
                     fully_hashed=False, seconds=0.0)
    model = slow
    monkeypatch.setattr(local, "ensure_model", lambda tier: model)
    monkeypatch.setattr(local_child, "_FOR_UI", True)
    children: list[subprocess.Popen[bytes]] = []
    popen = subprocess.Popen

    def recorded(*args: object, **kwargs: object) -> subprocess.Popen[bytes]:
        children.append(popen(*args, **kwargs))  # type: ignore[call-overload]
        return children[-1]

    monkeypatch.setattr(local_child.subprocess, "Popen", recorded)
    backend = local.LocalBackend(parse_spec("local:fast"))
    try:
        starting = asyncio.create_task(backend.start())
        deadline = time.monotonic() + 15
        while not children:  # the child is loading the model
            assert time.monotonic() < deadline, "no child was started"
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)
        assert children[0].poll() is None
        starting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await starting
        ended = time.monotonic() + 5
        while children[0].poll() is None and time.monotonic() < ended:
            await asyncio.sleep(0.05)
        assert children[0].poll() is not None, "the child went on loading after the start was cancelled"
        assert local.running_servers() == []
        model = dataclasses_replace(slow, path=tmp_path / "qwen.gguf")  # the next start: a fresh child
        await asyncio.wait_for(backend.start(), 30)
        assert len(children) == 2 and backend.server is not None and backend.server.handle is not None
        assert backend.server.handle.process is children[1]  # type: ignore[union-attr]
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
        await backend.aclose()
        local.shutdown_all()
