"""``memprobe proxy``: a plain ``openai`` client script recorded into a recording the TUI opens.

The proxy runs as its own process, exactly as a user starts it. Its model is an OpenAI-compatible
upstream played, in this test, by an in-process recording proxy over a scripted backend (so the
test is fast and counts every request that reaches "the model"). The script is a separate Python
process using only the ``openai`` package.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest

from memprobe_engine.events.header import HEADER_FILE
from memprobe_engine.llm.client import ChatClient
from memprobe_engine.llm.config import load_llm_config
from memprobe_engine.llm.proxy import RecordingProxy
from memprobe_engine.replay import ReplaySession
from tests.doubles import BagOfWordsEmbedder, ScriptedBackend, read_events

MEMPROBE = str(Path(sys.executable).with_name("memprobe"))

CLIENT_SCRIPT = """
import sys, openai
client = openai.OpenAI(base_url=sys.argv[1], api_key="my-harness")
reply = client.chat.completions.create(model="agent", messages=[{"role": "user", "content": "Say hello."}])
print("chat:", reply.choices[0].message.content)
stream = client.chat.completions.create(model="agent", stream=True,
                                        messages=[{"role": "user", "content": "Count to three."}])
print("stream:", "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices))
"""


async def _start_proxy(record: Path, upstream: str) -> tuple[asyncio.subprocess.Process, str]:
    process = await asyncio.create_subprocess_exec(
        MEMPROBE, "proxy", "--record", str(record), "--model", f"agent=openai:upstream-model@{upstream}",
        "--no-cache", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "NO_COLOR": "1"})
    assert process.stdout is not None
    line = (await asyncio.wait_for(process.stdout.readline(), 60)).decode()
    assert "listening on" in line, line + (await process.stderr.read()).decode() if process.stderr else line
    return process, line.rsplit(" ", 1)[1].strip()


async def _run_client(script: Path, url: str) -> str:
    client = await asyncio.create_subprocess_exec(sys.executable, str(script), url, stdout=asyncio.subprocess.PIPE,
                                                  stderr=asyncio.subprocess.STDOUT)
    out, _ = await asyncio.wait_for(client.communicate(), 120)
    assert client.returncode == 0, out.decode()
    return out.decode()


@pytest.mark.skipif(not Path(MEMPROBE).exists(), reason="the memprobe console script is not installed in this venv")
async def test_proxy_records_a_plain_openai_script_resumes_after_sigkill_and_replays(tmp_path: Path) -> None:
    script = tmp_path / "client.py"
    script.write_text(CLIENT_SCRIPT)
    answers = {"Say hello.": "Hello there!", "Count to three.": "one two three"}
    backend = ScriptedBackend(lambda request: answers[request.messages[-1].content])
    chat = ChatClient(load_llm_config(None, {}, ["openai:m@http://127.0.0.1:1/v1"]),
                      backend_factory=lambda spec: backend)
    record = tmp_path / "rec"
    async with RecordingProxy(chat, BagOfWordsEmbedder(), open_keys=True) as upstream:
        process, url = await _start_proxy(record, upstream.base_url)
        out = await _run_client(script, url)
        assert "chat: Hello there!" in out and "stream: one two three" in out
        assert len(backend.requests) == 2
        process.send_signal(signal.SIGKILL)  # no clean shutdown: the recording must still resume
        await process.wait()

        process, url = await _start_proxy(record, upstream.base_url)
        out = await _run_client(script, url)
        process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(process.wait(), 30)
    assert "chat: Hello there!" in out and "stream: one two three" in out
    assert len(backend.requests) == 2  # the resumed proxy answered both from the recording
    calls = read_events(record)
    assert [(c["system"], c["role"], c["cache_hit"]) for c in calls] == [
        ("my-harness", "agent", False), ("my-harness", "agent", False),
        ("my-harness", "agent", True), ("my-harness", "agent", True)]
    assert (record / HEADER_FILE).exists() and read_events(record, "run_end")[-1]["status"] == "completed"

    from memprobe_tui.app import MemProbeApp

    session = ReplaySession.open(record)
    app = MemProbeApp(session=session, rescore=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()
        assert app.screen is not None and not app.return_code
