"""The embedded server's serving settings and the prefix-affinity slot router (no model needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from memprobe_engine.errors import ConfigError
from memprobe_engine.llm.backends.local import Serving, serving_for
from memprobe_engine.llm.backends.slots import DEFAULT_WAIT_CHARS, SlotRouter, prompt_text
from memprobe_engine.llm.config import load_llm_config
from memprobe_engine.llm.spec import DEFAULT_LOCAL_SLOTS, ModelSpec, parse_spec
from memprobe_engine.llm.types import ChatMessage
from memprobe_engine.orchestration.resume import can_resume, fingerprint

PERSONA = "persona and bank " * 400  # a long prefix shared by every turn of one simulated user


def _prompt(prefix: str, tail: str) -> str:
    return prompt_text([ChatMessage(role="system", content="rules"), ChatMessage(role="user", content=prefix + tail)])


def test_a_request_goes_to_the_idle_slot_that_holds_its_prefix() -> None:
    router = SlotRouter(3)
    first = router.acquire(_prompt(PERSONA, "turn 1"))
    router.release(first)
    other = router.acquire(_prompt("store " * 600, "slot-fill a"))
    router.release(other)
    assert other.index != first.index  # an unrelated prompt takes the least recently used slot
    assert router.acquire(_prompt(PERSONA, "turn 2")).index == first.index


def test_waiting_for_a_busy_slot_beats_recomputing_a_long_prefix() -> None:
    router = SlotRouter(2)
    busy = router.acquire(_prompt(PERSONA, "dimension a"))  # still in flight
    queued = router.acquire(_prompt(PERSONA, "dimension b"))
    assert queued.index == busy.index and busy.in_flight == 2


def test_concurrent_slot_fills_over_one_store_queue_behind_the_first() -> None:
    """The quick run's three dump_all slot-fills share ~2,000 characters of store and differ only in
    the dimension: the second and third wait for the slot evaluating it instead of redoing it."""
    router = SlotRouter(4)
    store = "MEMORY NOTES " + "{'id': 't0001', 'content': 'User: ...'} " * 45  # about 1,960 characters
    first = router.acquire(_prompt(store, "CATEGORY: episodic_memory"))
    later = [router.acquire(_prompt(store, f"CATEGORY: {name}")) for name in ("assistance_preference", "knowledge")]
    assert [slot.index for slot in later] == [first.index, first.index]


def test_a_short_shared_prefix_is_not_worth_waiting_for() -> None:
    router = SlotRouter(2)
    short = "x" * (DEFAULT_WAIT_CHARS // 4)
    busy = router.acquire(_prompt(short, "one"))
    assert router.acquire(_prompt(short, "two")).index != busy.index


def test_every_slot_busy_queues_on_the_best_match() -> None:
    router = SlotRouter(2)
    a = router.acquire(_prompt(PERSONA, "a"))
    b = router.acquire(_prompt("other " * 500, "b"))
    assert a.index != b.index
    assert router.acquire(_prompt("other " * 500, "c")).index == b.index
    router.release(b)
    router.release(b)
    assert b.in_flight == 0


def test_serving_comes_from_the_spec_then_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("MEMPROBE_LOCAL_SLOTS", "MEMPROBE_LOCAL_PROMPT_CACHE", "MEMPROBE_LOCAL_DRAFT"):
        monkeypatch.delenv(name, raising=False)
    assert serving_for(parse_spec("local"), "1.5b") == Serving(DEFAULT_LOCAL_SLOTS, True, None)
    monkeypatch.setenv("MEMPROBE_LOCAL_SLOTS", "1")
    monkeypatch.setenv("MEMPROBE_LOCAL_PROMPT_CACHE", "0")
    monkeypatch.setenv("MEMPROBE_LOCAL_DRAFT", "fast")
    spec = parse_spec("local")
    assert spec.concurrency == 1  # one request per slot
    assert serving_for(spec, "1.5b") == Serving(1, False, "fast")
    own = ModelSpec(backend="local", model="1.5b", slots=2, prompt_cache=True, draft="none")
    assert serving_for(own, "1.5b") == Serving(2, True, None)
    assert own.concurrency == 2


def test_bad_serving_settings_are_refused_with_the_setting_named(monkeypatch: pytest.MonkeyPatch,
                                                                 tmp_path: Path) -> None:
    monkeypatch.setenv("MEMPROBE_LOCAL_SLOTS", "many")
    with pytest.raises(ConfigError, match="MEMPROBE_LOCAL_SLOTS"):
        parse_spec("local")
    monkeypatch.delenv("MEMPROBE_LOCAL_SLOTS")
    monkeypatch.setenv("MEMPROBE_LOCAL_PROMPT_CACHE", "maybe")
    with pytest.raises(ConfigError, match="MEMPROBE_LOCAL_PROMPT_CACHE"):
        serving_for(parse_spec("local"), "1.5b")
    monkeypatch.delenv("MEMPROBE_LOCAL_PROMPT_CACHE")
    with pytest.raises(ConfigError, match="cannot draft for itself"):
        serving_for(ModelSpec(backend="local", model="fast", draft="0.5b"), "fast")
    config = tmp_path / "models.toml"
    config.write_text('[models.slot_filler]\nbackend = "openai"\nmodel = "gpt-4o-mini"\nslots = 2\n')
    with pytest.raises(ConfigError, match=r"embedded model \(local specs\) only"):
        load_llm_config(config, {}, [])


def test_a_resume_may_change_pacing_but_not_what_is_asked() -> None:
    def config(**spec: object) -> dict[str, object]:
        made: dict[str, object] = {"suite": "recovery", "max_turns": 3, "models": {"models": {
            "default": {"backend": "local", "model": "1.5b", "concurrency": 1, **spec}}}}
        made["fingerprint"] = fingerprint(made)
        return made
    before = config()
    assert can_resume(before, config(concurrency=4, slots=4, draft="fast", timeout_s=60.0))
    assert not can_resume(before, config(model="fast"))
    assert not can_resume(before, {**config(), "max_turns": 5, "fingerprint": "other"})


def test_a_bad_draft_setting_stops_at_the_spec_before_any_run_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMPROBE_LOCAL_DRAFT", "huge")
    with pytest.raises(ConfigError, match=r"\$MEMPROBE_LOCAL_DRAFT = 'huge' is not an embedded model tier"):
        parse_spec("local", origin="test")
    monkeypatch.setenv("MEMPROBE_LOCAL_DRAFT", "none")
    assert serving_for(parse_spec("local"), "1.5b").draft is None


def test_the_server_never_moves_kv_states_between_slots(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """llama.cpp's host-memory prompt cache (on by default upstream) stays off, with or without the
    per-slot prompt cache: under concurrent load it handed the recovery judge another request's KV
    state in a make demo run (local_params.py, HOST_PROMPT_CACHE_MIB). Per-slot reuse follows the spec."""
    import sys
    import types

    from memprobe_engine.errors import LLMError
    from memprobe_engine.llm.backends import local
    from memprobe_engine.llm.model_assets import ModelFile

    seen: list[object] = []

    class Params:
        def __init__(self) -> None:
            self.model = types.SimpleNamespace(path="")
            self.cpuparams = types.SimpleNamespace(n_threads=0)
            self.cpuparams_batch = types.SimpleNamespace(n_threads=0)
            self.n_ubatch = 512
            self.cache_ram_mib = 8192        # upstream's defaults
            self.cache_idle_slots = True

    def server(params: Params) -> None:
        seen.append(params)
        raise RuntimeError("captured")      # stop before a real server would start

    monkeypatch.setitem(sys.modules, "xllamacpp", types.SimpleNamespace(CommonParams=Params, Server=server))
    model = ModelFile(tier="fast", path=tmp_path / "m.gguf", size=1, sha256="0", assembled=False, fully_hashed=False,
                      seconds=0.0)
    monkeypatch.setattr(local, "ensure_model", lambda tier: model)
    for prompt_cache in (True, False):
        with pytest.raises(LLMError):
            local._start_server("fast", 4096, 1.0, Serving(slots=4, prompt_cache=prompt_cache, draft=None))
        params = seen[-1]
        assert isinstance(params, Params)
        assert params.cache_ram_mib == 0 and params.cache_idle_slots is False
        assert getattr(params, "cache_prompt") is prompt_cache
