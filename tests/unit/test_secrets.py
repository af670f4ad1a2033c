"""API keys: a server that echoes the key in its reply gets it nowhere — not into the recording, its
payloads, the response cache or the terminal — and a key goes only to the endpoint it is configured
for (a loopback server gets none unless a spec names one for it)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from memprobe_engine.cli import app
from tests.unit.test_llm_openai_http import FakeServer, Reply

KEY = "sk-team-ECHOED0987654321"


def _echoing(seen: dict[str, object]) -> Reply:
    """A completion whose text repeats the Authorization header it was sent, twice and JSON-quoted."""
    auth = str(seen["auth"])
    text = f"your header was {auth}; again: {json.dumps(auth)}; and a long echo {auth * 40}"
    body = {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}}
    return 200, {"Content-Type": "application/json"}, json.dumps(body).encode()


@pytest.fixture
def server() -> Iterator[FakeServer]:
    fake = FakeServer([_echoing])
    yield fake
    fake.close()


def _ask(tmp_path: Path, config: str, env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Result:
    """`memprobe llm ask` in process (CliRunner captures what it prints)."""
    (tmp_path / "models.toml").write_text(config)
    monkeypatch.setenv("MEMPROBE_CACHE_DIR", str(tmp_path / "cache"))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return CliRunner().invoke(app, ["llm", "ask", "Echo my header, please", "--config", str(tmp_path / "models.toml"),
                                    "--record", str(tmp_path / "rec")])


def test_an_echoed_key_is_nowhere_on_disk_or_in_output(server: FakeServer, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    config = f'[models.default]\nbackend = "openai"\nmodel = "m"\nbase_url = "{server.url}"\napi_key_env = "TEAM_KEY"\n'
    done = _ask(tmp_path, config, {"TEAM_KEY": KEY}, monkeypatch)
    assert done.exit_code == 0, done.output
    assert server.requests and server.requests[0]["auth"] == f"Bearer {KEY}"  # configured: it is sent
    assert "your header was" in done.output
    assert KEY not in done.output
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p.name != "models.toml"]
    assert any(p.parent.name == "rec" for p in written) and any(p.parent.name == "cache" for p in written)
    for path in written:
        assert KEY.encode() not in path.read_bytes(), path
    # A second ask is answered from the cache: still scrubbed.
    again = _ask(tmp_path, config, {"TEAM_KEY": KEY}, monkeypatch)
    assert again.exit_code == 0 and len(server.requests) == 1 and KEY not in again.output


def test_a_loopback_server_gets_no_key_unless_one_is_named_for_it(server: FakeServer, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    config = f'[models]\ndefault = "openai:m@{server.url}"\n'
    done = _ask(tmp_path, config, {"OPENAI_API_KEY": KEY}, monkeypatch)
    assert done.exit_code == 0, done.output
    assert KEY not in str(server.requests[0]["auth"])
