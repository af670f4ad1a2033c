"""Model spec strings and the file → env → CLI configuration merge."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from memprobe_engine.errors import ConfigError
from memprobe_engine.llm.config import ROLES, load_llm_config
from memprobe_engine.llm.spec import DEFAULT_LOCAL_SLOTS, ModelSpec, parse_spec


@pytest.mark.parametrize(("text", "backend", "model", "base_url", "concurrency"), [
    ("openai:gpt-4o-mini", "openai", "gpt-4o-mini", None, 8),
    ("openai:Qwen/Qwen2.5-7B@http://127.0.0.1:8000/v1", "openai", "Qwen/Qwen2.5-7B", "http://127.0.0.1:8000/v1", 8),
    ("openai:qwen2.5:7b@http://host:11434/v1/", "openai", "qwen2.5:7b", "http://host:11434/v1", 8),
    ("local", "local", "1.5b", None, DEFAULT_LOCAL_SLOTS),
    ("local:1.5b", "local", "1.5b", None, DEFAULT_LOCAL_SLOTS),
    ("local:fast", "local", "fast", None, DEFAULT_LOCAL_SLOTS),
    ("local:0.5b", "local", "fast", None, DEFAULT_LOCAL_SLOTS),
    ("vllm:EdwinYue/Mem-T-4B", "vllm", "EdwinYue/Mem-T-4B", None, 16),
    ("replay:recordings/run1", "replay", "recordings/run1", None, 64),
])
def test_parse_spec_forms(text: str, backend: str, model: str, base_url: str | None, concurrency: int) -> None:
    spec = parse_spec(text)
    assert (spec.backend, spec.model, spec.base_url, spec.concurrency) == (backend, model, base_url, concurrency)
    assert parse_spec(spec.spec_string()).identity_key() == spec.identity_key()


def test_replay_fallback_takes_the_fallback_pace() -> None:
    spec = parse_spec("replay:rec|local:fast")
    assert spec.fallback == "local:fast"
    assert spec.concurrency == DEFAULT_LOCAL_SLOTS
    assert spec.spec_string() == "replay:rec|local:fast"


@pytest.mark.parametrize("text", ["", "gpt-4o", "foo:bar", "openai:", "openai:m@ftp://x", "local:3b",
                                  "replay:x|", "replay:x|replay:y", "vllm", "local:", "local ", "local:fast\n",
                                  "openai:m@http://127.0.0.1:9/v1,ftp://x", "openai:m@http://a:1/v1,"])
def test_bad_specs_name_the_string_and_valid_forms(text: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_spec(text, origin="MEMPROBE_MODEL")
    message = str(caught.value)
    assert repr(text) in message
    assert "MEMPROBE_MODEL" in message
    assert "openai:MODEL@http://HOST:PORT/v1" in message


def test_default_config_is_the_embedded_model() -> None:
    config = load_llm_config(None, {}, [])
    for role in ROLES:
        assert config.spec_for(role).spec_string() == "local:1.5b"


def test_precedence_file_then_env_then_cli(tmp_path: Path) -> None:
    config_file = tmp_path / "memprobe.toml"
    config_file.write_text("""
[models]
default = "local:fast"
slot_filler = "openai:gpt-4o-mini"
critic = "openai:from-file"

[models.agent]
backend = "openai"
model = "Qwen/Qwen2.5-7B"
base_url = "http://127.0.0.1:8000/v1"
api_key_env = "MY_KEY"
concurrency = 3
timeout_s = 30

[models.reader]
spec = "vllm:EdwinYue/Mem-T-4B"
extra_args = ["--gpu-memory-utilization", "0.8"]
context_tokens = 8192
""")
    env = {"MEMPROBE_MODEL_CRITIC": "openai:from-env", "MEMPROBE_MODEL_EDITOR": "openai:editor-env",
           "MEMPROBE_MODEL_DIR": "/not/a/role/and/ignored"}
    config = load_llm_config(config_file, env, ["editor=openai:editor-cli", "simulator=local"])
    assert config.spec_for("default").model == "fast"
    assert config.spec_for("slot_filler").spec_string() == "openai:gpt-4o-mini"
    assert config.spec_for("critic").model == "from-env"
    assert config.spec_for("editor").model == "editor-cli"
    assert config.spec_for("simulator").spec_string() == "local:1.5b"
    agent = config.spec_for("agent")
    assert (agent.base_url, agent.api_key_env, agent.concurrency, agent.timeout_s) == \
        ("http://127.0.0.1:8000/v1", "MY_KEY", 3, 30.0)
    reader = config.spec_for("reader")
    assert reader.extra_args == ("--gpu-memory-utilization", "0.8") and reader.context_tokens == 8192
    assert config.spec_for("recovery_judge").model == "fast"  # unmapped -> default
    assert config.spec_for("Slot-Filler").model == "gpt-4o-mini"
    assert "MEMPROBE_MODEL_CRITIC" in (config.spec_for("critic").origin or "")


def test_env_default_and_bare_cli_spec() -> None:
    config = load_llm_config(None, {"MEMPROBE_MODEL": "openai:env-default"}, [])
    assert config.spec_for("agent").model == "env-default"
    config = load_llm_config(None, {"MEMPROBE_MODEL": "openai:env-default"},
                             ["openai:cli@http://127.0.0.1:1/v1?a=b"])
    assert config.spec_for("agent").model == "cli"


def test_resolved_is_json_and_holds_no_secret(tmp_path: Path) -> None:
    config = load_llm_config(None, {"MY_KEY": "sk-test-SECRET123"}, ["agent=openai:gpt-4o"])
    config = config.model_copy(update={"models": {**config.models, "critic": ModelSpec(
        backend="openai", model="m", api_key_env="MY_KEY")}})
    blob = orjson.dumps(config.resolved())
    assert b"SECRET123" not in blob
    resolved = config.resolved()["models"]
    assert resolved["agent"]["spec"] == "openai:gpt-4o"
    assert resolved["critic"]["api_key_env"] == "MY_KEY"
    assert set(resolved) >= {"default", *ROLES}


@pytest.mark.parametrize(("content", "expected"), [
    ("[models\n", "not valid TOML"),
    ("[models]\nslot-filer = \"local\"\n", "unknown role"),
    ("[models]\nagent = 3\n", "expected a spec string"),
    ("[models.agent]\nbackend = \"openai\"\nmodel = \"m\"\nconcurrency = -1\n", "concurrency"),
    ("[models.agent]\nbackend = \"openai\"\nmodel = \"m\"\ncolour = \"red\"\n", "colour"),
    ("[models]\nagent = \"nope:x\"\n", "unknown backend"),
])
def test_bad_config_file_names_the_file(tmp_path: Path, content: str, expected: str) -> None:
    config_file = tmp_path / "bad.toml"
    config_file.write_text(content)
    with pytest.raises(ConfigError) as caught:
        load_llm_config(config_file, {}, [])
    assert str(config_file) in str(caught.value)
    assert expected in str(caught.value)


def test_missing_config_file_and_unknown_cli_role(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_llm_config(tmp_path / "absent.toml", {}, [])
    with pytest.raises(ConfigError, match="unknown role 'judge'"):
        load_llm_config(None, {}, ["judge=local"])


def test_context_budget_of_a_local_spec_is_what_its_server_gives_a_slot() -> None:
    """Issue #22 (9): the store-size check used 128,000 tokens for the embedded model, whose server
    holds 8,192 per slot, so a 15,822-token store was sent and the server's refusal ended the rescore."""
    from memprobe_engine.llm.backends.local import LocalBackend

    local = parse_spec("local:1.5b")
    assert local.context_budget() == LocalBackend(local).context_tokens == 8192
    assert parse_spec("openai:gpt-4o-mini").context_budget() == 128_000
    assert local.model_copy(update={"context_tokens": 16384}).context_budget() == 16384


def test_with_context_gives_the_embedded_model_one_slot_of_that_context() -> None:
    from memprobe_engine.errors import ConfigError
    from memprobe_engine.llm.config import LLMConfig, with_context

    config = with_context(LLMConfig(models={"default": parse_spec("local:1.5b")}), 20000, where="--context-tokens")
    spec = config.spec_for("slot_filler")
    assert (spec.context_tokens, spec.slots, spec.concurrency) == (20000, 1, 1)
    with pytest.raises(ConfigError, match="--context-tokens 40000.*32,768"):
        with_context(config, 40000, where="--context-tokens")
