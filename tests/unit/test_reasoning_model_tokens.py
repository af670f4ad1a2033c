"""Reply caps for OpenAI reasoning models (issue #10 point 12).

gpt-5* and o-series models reject ``max_tokens`` with HTTP 400 and want ``max_completion_tokens``.
A fake OpenAI server on 127.0.0.1 rejects ``max_tokens`` the way the real API does; the backend
must pick the right field by model name, or as the spec's ``token_param`` says, and
``memprobe llm ask`` must succeed against it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from memprobe_engine.events.recorder import NULL_RECORDER
from memprobe_engine.llm.backends.openai_compat import token_parameter
from memprobe_engine.llm.client import ChatClient
from memprobe_engine.llm.config import load_llm_config
from memprobe_engine.llm.spec import spec_from_table
from memprobe_engine.llm.types import SamplingParams
from tests.unit.test_llm_openai_http import Reply, ask, completion, error, serve  # noqa: F401


def strict_reasoning_api(seen: dict[str, Any]) -> Reply:
    """Answers like the OpenAI API does for a reasoning model: ``max_tokens`` is a 400."""
    if "max_tokens" in seen["body"]:
        return error(400, "Unsupported parameter: 'max_tokens' is not supported with this model. "
                          "Use 'max_completion_tokens' instead.")
    return completion("fine")


@pytest.mark.parametrize(("model", "field"), [
    ("gpt-5.4-mini", "max_completion_tokens"), ("gpt-5", "max_completion_tokens"),
    ("o3-mini", "max_completion_tokens"), ("o1", "max_completion_tokens"), ("o4-mini", "max_completion_tokens"),
    ("gpt-4o-mini", "max_tokens"), ("Qwen/Qwen2.5-7B-Instruct", "max_tokens"), ("Mem-T-4B", "max_tokens")])
def test_field_is_chosen_by_model_name(model: str, field: str) -> None:
    assert token_parameter(model) == field


def test_spec_setting_overrides_the_name_rule() -> None:
    spec = spec_from_table({"spec": "openai:my-proxy-alias@http://127.0.0.1:9/v1",
                            "token_param": "max_completion_tokens"}, origin="test")
    assert spec.token_param == "max_completion_tokens"
    assert token_parameter("my-proxy-alias", spec.token_param) == "max_completion_tokens"
    assert token_parameter("gpt-5.4-mini", "max_tokens") == "max_tokens"


async def test_reasoning_model_request_carries_max_completion_tokens(serve: Any) -> None:  # noqa: F811
    server = serve([strict_reasoning_api])
    config = load_llm_config(None, {}, [f"openai:gpt-5.4-mini@{server.url}"])
    client = ChatClient(config, NULL_RECORDER, backoff_base_s=0.01, backoff_max_s=0.05, env={})
    outcome = await client.chat("agent", ask(), params=SamplingParams(temperature=0.0, max_tokens=64))
    await client.aclose()
    assert outcome.text == "fine"
    body = server.requests[-1]["body"]
    assert body["max_completion_tokens"] == 64 and "max_tokens" not in body


def test_llm_ask_succeeds_against_a_server_that_rejects_max_tokens(serve: Any,  # noqa: F811
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from memprobe_engine.cli import app

    server = serve([strict_reasoning_api])
    result = CliRunner().invoke(app, ["llm", "ask", "hello", "--no-cache",
                                      "--model", f"openai:gpt-5.4-mini@{server.url}"])
    assert result.exit_code == 0, result.output
    assert "fine" in result.output
    assert all("max_tokens" not in r["body"] for r in server.requests)
    assert json.dumps(server.requests[-1]["body"]).count("max_completion_tokens") == 1
