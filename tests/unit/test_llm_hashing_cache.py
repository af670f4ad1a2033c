"""The canonical request hash and the persistent response cache."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from memprobe_engine.errors import ConfigError
from memprobe_engine.llm.cache import CACHE_FILE, ResponseCache
from memprobe_engine.llm.hashing import hash_document, request_hash
from memprobe_engine.llm.types import ChatMessage, ChatRequest, ChatResult, SamplingParams, Usage

BASE = ChatRequest(
    model="gpt-4o-mini",
    messages=(ChatMessage(role="system", content="You are terse."), ChatMessage(role="user", content="Hi")),
    params=SamplingParams(temperature=0.0, max_tokens=64),
    response_schema={"type": "object", "properties": {"b": {"type": "string"}, "a": {"type": "integer"}}},
)
#: Pinned: if this changes, every cache and every recording's replay keys change with it.
BASE_HASH = "f8c9109b7e1df80ce4a7176dad76511ab252d1f86a0457137dcf847df79bfbd5"


def test_hash_is_pinned_and_stable_across_processes() -> None:
    here = request_hash(BASE, backend="openai")
    code = ("from tests.unit.test_llm_hashing_cache import BASE; from memprobe_engine.llm.hashing import "
            "request_hash; print(request_hash(BASE, backend='openai'))")
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           cwd=Path(__file__).resolve().parents[2], env={"PYTHONHASHSEED": "123"})
    assert other.stdout.strip() == here
    assert here == BASE_HASH


def test_hash_ignores_key_order_of_the_schema() -> None:
    reordered = BASE.model_copy(update={"response_schema": {
        "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}, "type": "object"}})
    assert request_hash(reordered, backend="openai") == request_hash(BASE, backend="openai")


@pytest.mark.parametrize("change", [
    {"model": "gpt-4o"},
    {"messages": (ChatMessage(role="system", content="You are terse."), ChatMessage(role="user", content="Hi!"))},
    {"messages": (ChatMessage(role="user", content="You are terse."), ChatMessage(role="user", content="Hi"))},
    {"params": SamplingParams(temperature=0.7, max_tokens=64)},
    {"params": SamplingParams(temperature=0.0, max_tokens=64, seed=1)},
    {"params": SamplingParams(temperature=0.0, max_tokens=64, stop=("\n",))},
    {"response_schema": None},
    {"replica": 1},
])
def test_hash_changes_with_every_input_that_changes_the_answer(change: dict[str, object]) -> None:
    assert request_hash(BASE.model_copy(update=change), backend="openai") != request_hash(BASE, backend="openai")


def test_hash_depends_on_backend_identity() -> None:
    assert request_hash(BASE, backend="vllm") != request_hash(BASE, backend="openai")
    assert set(hash_document(BASE, backend="openai")) == {
        "v", "backend", "model", "messages", "params", "response_schema", "replica"}


def test_cache_round_trip_across_instances(tmp_path: Path) -> None:
    result = ChatResult(text="hello", usage=Usage(prompt_tokens=3, completion_tokens=1), model="m",
                        finish_reason="stop")
    first = ResponseCache(tmp_path)
    assert first.get("k") is None
    first.put("k", result)
    second = ResponseCache(tmp_path)
    assert second.get("k") == result
    assert len(second) == 1
    assert (tmp_path / CACHE_FILE).exists()
    first.close()
    second.close()


def test_the_first_answer_stored_for_a_request_stays(tmp_path: Path) -> None:
    first, other = ResponseCache(tmp_path), ResponseCache(tmp_path)
    assert first.put("k", ChatResult(text="first")).text == "first"
    assert other.put("k", ChatResult(text="second")).text == "first"
    assert first.get("k") == other.get("k") == ChatResult(text="first")
    first._db.execute("UPDATE responses SET result = 'not json' WHERE hash = 'k'")
    assert first.get("k") is None  # a damaged row is a miss, and the next answer replaces it
    assert other.put("k", ChatResult(text="third")).text == "third" and first.get("k") == ChatResult(text="third")
    first.close()
    other.close()


def test_cache_dir_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMPROBE_CACHE_DIR", str(tmp_path / "c"))
    cache = ResponseCache()
    assert cache.path == tmp_path / "c" / CACHE_FILE
    cache.close()


def test_cache_concurrent_threads_and_processes(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path)
    code = ("import sys; from pathlib import Path; from memprobe_engine.llm.cache import ResponseCache;"
            "from memprobe_engine.llm.types import ChatResult; c = ResponseCache(Path(sys.argv[1]));"
            "[c.put(f'p{i}', ChatResult(text=str(i))) for i in range(200)]")
    process = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)],
                               cwd=Path(__file__).resolve().parents[2])

    def writer(offset: int) -> None:
        for i in range(100):
            cache.put(f"t{offset}-{i}", ChatResult(text=str(i)))
            assert cache.get(f"t{offset}-{i}") is not None

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert process.wait(timeout=60) == 0
    assert len(cache) == 600
    assert cache.get("p199") == ChatResult(text="199")
    cache.close()


def test_damaged_cache_file_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / CACHE_FILE).write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(ConfigError, match="Delete the file"):
        ResponseCache(tmp_path)


def test_the_same_model_name_at_two_endpoints_is_asked_at_both(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The shared cache never serves one server's answer for another's: `llm ask` against two servers
    that both call their model `m` sends one request to each; asking the first again is a cache hit."""
    from typer.testing import CliRunner

    from memprobe_engine.cli import app
    from tests.unit.test_llm_openai_http import FakeServer, completion

    first, second = FakeServer([completion("from the first server")]), FakeServer([completion("from the second")])
    monkeypatch.setenv("MEMPROBE_CACHE_DIR", str(tmp_path / "cache"))
    try:
        outputs = [CliRunner().invoke(app, ["llm", "ask", "Which server are you?", "--model", f"openai:m@{server.url}"])
                   for server in (first, second, first)]
    finally:
        first.close()
        second.close()
    assert [result.exit_code for result in outputs] == [0, 0, 0], [result.output for result in outputs]
    assert (len(first.requests), len(second.requests)) == (1, 1)
    assert "from the first server" in outputs[0].output and "from the second" in outputs[1].output
    assert "from the first server" in outputs[2].output
