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
from tests.doubles import BagOfWordsEmbedder, ScriptedBackend, read_events
from memprobe_engine.protocols import open_session

MEMPROBE = str(Path(sys.executable).with_name("memprobe"))

CLIENT_SCRIPT = """
import sys, openai
client = openai.OpenAI(base_url=sys.argv[1], api_key="mp-my-harness")
reply = client.chat.completions.create(model="agent", messages=[{"role": "user", "content": "Say hello."}])
print("chat:", reply.choices[0].message.content)
stream = client.chat.completions.create(model="agent", stream=True,
                                        messages=[{"role": "user", "content": "Count to three."}])
print("stream:", "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices))
"""


async def _start_proxy(record: Path, upstream: str, *, cache: Path | None = None) -> tuple[asyncio.subprocess.Process, str]:
    caching = ["--no-cache"] if cache is None else []
    process = await asyncio.create_subprocess_exec(
        MEMPROBE, "proxy", "--record", str(record), "--model", f"agent=openai:upstream-model@{upstream}",
        *caching, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "NO_COLOR": "1", **({"MEMPROBE_CACHE_DIR": str(cache)} if cache else {})})
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

    session = open_session(record)
    app = MemProbeApp(session=session, live={"rescore": None})
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()
        assert app.screen is not None and not app.return_code


#: Keys of the shapes public providers hand out (made up, of the right form and length).
PUBLIC_SHAPES = {
    "openai": "sk-proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z" * 2, "anthropic": "sk-ant-api03-" + "Zx9-Cv8_Bn7mAs6d" * 5,
    "huggingface": "hf_" + "QwErTyUiOpAsDfGhJkLzXcVbNm12345678"[:34], "groq": "gsk_" + "a1b2C3d4E5f6G7h8" * 3 + "i9J0",
    "google": "AIzaSy" + "B0c1D2e3F4g5H6i7J8k9L0m1N2o3P4q5"[:33], "github": "ghp_" + "R5s6T7u8V9w0X1y2Z3a4B5c6D7e8F9g0H1i2",
    "xai": "xai-" + "K3l4M5n6O7p8Q9r0" * 5, "hex64": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "github-fine": "github_pat_11ABCDEFG0" + "hIjKlMnOpQrStUvWxYz01234" * 3, "plain": "my-own-key-7d1e4b",
}
SHAPES_SCRIPT = """
import json, sys, openai
for name, key in json.loads(sys.argv[2]).items():
    client = openai.OpenAI(base_url=sys.argv[1], api_key=key, max_retries=0)
    reply = client.chat.completions.create(model="agent", messages=[{"role": "user", "content": f"{name}: my key is {key}"}])
    print(name, "->", reply.choices[0].message.content)
    client.close()
"""


@pytest.mark.skipif(not Path(MEMPROBE).exists(), reason="the memprobe console script is not installed in this venv")
async def test_keys_of_every_public_shape_sent_through_the_proxy_are_in_no_file_and_no_output(tmp_path: Path) -> None:
    import json
    import subprocess

    script = tmp_path / "client.py"
    script.write_text(SHAPES_SCRIPT)
    backend = ScriptedBackend(lambda request: "you said: " + request.messages[-1].content)  # echoes the key
    chat = ChatClient(load_llm_config(None, {}, ["openai:m@http://127.0.0.1:1/v1"]), backend_factory=lambda spec: backend)
    record, cache = tmp_path / "rec", tmp_path / "cache"
    async with RecordingProxy(chat, BagOfWordsEmbedder(), open_keys=True) as upstream:
        process, url = await _start_proxy(record, upstream.base_url, cache=cache)
        client = await asyncio.create_subprocess_exec(sys.executable, str(script), url, json.dumps(PUBLIC_SHAPES),
                                                      stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        client_out, _ = await asyncio.wait_for(client.communicate(), 120)
        process.send_signal(signal.SIGTERM)
        proxy_out, proxy_err = await asyncio.wait_for(process.communicate(), 30)
    assert client.returncode == 0, client_out.decode()
    assert len(backend.requests) == len(PUBLIC_SHAPES)  # every key's request reached the model ...
    assert all(key in request.messages[-1].content for key, request in zip(PUBLIC_SHAPES.values(), backend.requests))
    replies = dict(line.split(" -> ", 1) for line in client_out.decode().splitlines())
    assert replies["hex64"] == "you said: hex64: my key is ***"  # ... and came back scrubbed
    assert all(reply.startswith(f"you said: {name}: my key is ") and reply.endswith("***")
               for name, reply in replies.items()), replies
    info = subprocess.run([MEMPROBE, "recording", "info", str(record)], capture_output=True, env={**os.environ,
                          "NO_COLOR": "1", "COLUMNS": "200"}, timeout=60)
    assert info.returncode == 0, info.stderr.decode()
    systems = {call["system"] for call in read_events(record)}
    assert len(systems) == len(PUBLIC_SHAPES) and all(s.startswith("client-") for s in systems), systems
    shown = b"".join([client_out, proxy_out, proxy_err, info.stdout, info.stderr])
    written = [path for folder in (record, cache) for path in folder.rglob("*") if path.is_file()]
    assert any(path.name.endswith(".sqlite") for path in written)
    for name, key in PUBLIC_SHAPES.items():
        assert key.encode() not in shown, name
        for path in written:
            assert key.encode() not in path.read_bytes(), (name, path)
