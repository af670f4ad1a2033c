"""The cognee adapter over its own virtual environment, with a scripted model behind the proxy.

No embedded model: cognee itself runs in the worker process (``.venv-cognee``), its requests cross
the loopback proxy as real HTTP and a scripted backend answers them — a knowledge graph for its
extraction prompt, a summary for its summarization prompt. Checked: the calls are recorded with
system ``cognee`` and role ``memory_writer``; the graph's nodes and edges are recorded as memory ops
with cognee's native fields; a search is cognee's triplet search over that graph; the stores and the
worker's log are in the run folder; two runs with one seed give the same store (the simulated clock
reaches cognee's timestamps); a worker that cannot start ends in one error naming its log.
Skipped, with the command that fixes it, where cognee's environment is not installed.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from memprobe_engine.llm.client import ChatClient
from memprobe_engine.llm.config import load_llm_config
from memprobe_engine.llm.proxy import close_shared_proxies
from memprobe_engine.llm.types import ChatRequest
from memprobe_engine.memory.adapters.cognee import Cognee, WorkerError, installed_cognee_version
from memprobe_engine.memory.base import MemoryServices, Observation, SimClock
from tests.doubles import BagOfWordsEmbedder, ScriptedBackend, read_events, temp_recording

# Needs cognee's own venv, which `make test-extras` creates: selected there (-m extras), not by `make test`.
pytestmark = [pytest.mark.extras,
              pytest.mark.skipif(installed_cognee_version() is None, reason=Cognee.unavailable_reason())]

GRAPH = {"summary": "facts about the user", "description": "the user's city", "nodes": [
    {"id": "user", "name": "user", "type": "Person", "description": "the user", "label": "Person"},
    {"id": "oslo", "name": "Oslo", "type": "City", "description": "capital of Norway", "label": "City"}],
    "edges": [{"source_node_id": "user", "target_node_id": "oslo", "relationship_name": "lives_in",
               "description": "the user lives in Oslo"}]}


def answer(request: ChatRequest) -> str:
    system = request.messages[0].content if isinstance(request.messages[0].content, str) else ""
    if "knowledge graph" in system:
        return json.dumps(GRAPH)
    if "Summarize" in system:
        return json.dumps({"summary": "The user lives in Oslo.\n- The user is vegetarian."})
    raise AssertionError(f"unexpected cognee prompt: {system[:200]}")


async def _run(record: Path) -> tuple[list[dict[str, Any]], list[Any]]:
    backend = ScriptedBackend(answer)
    with temp_recording(record) as recorder:
        chat = ChatClient(load_llm_config(None, {}, ["openai:m@http://127.0.0.1:1/v1"]), recorder,
                          backend_factory=lambda spec: backend)
        services = MemoryServices(recorder=recorder, clock=SimClock(), seed=7, chat=chat,
                                  embedder=BagOfWordsEmbedder(dim=384, hashed=True))
        memory = Cognee(services)
        try:
            with recorder.span("u1 × cognee", "unit", user_id="u1", system="cognee"):
                await memory.reset("u1")
                services.clock.advance(days=2)
                for kind, text in (("task", "I'm vegetarian and I live in Oslo."), ("assistant", "Noted!")):
                    await memory.observe(Observation(kind=kind, text=text, task_index=0,  # type: ignore[arg-type]
                                                     timestamp=services.clock.iso()))
                hits = await memory.search("where does the user live", 3)
                dump = memory.dump()
        finally:
            await memory._library(memory._stop)
            await close_shared_proxies()
            await chat.aclose()
    return dump, hits


async def test_cognee_graph_and_calls_are_recorded_reproducibly(tmp_path: Path) -> None:
    dump, hits = await _run(tmp_path / "one")
    edges = {item["content"] for item in dump if item["kind"] == "edge"}
    assert "the user lives in Oslo" in edges  # the extracted fact, as cognee stored it
    names = {item.get("name") for item in dump if item["kind"] == "node"}
    assert {"user", "oslo"} <= {str(name).lower() for name in names}
    assert any(item.get("type") == "DocumentChunk" for item in dump)  # cognee's own chunk node
    ingested = SimClock().now().replace(tzinfo=dt.timezone.utc) + dt.timedelta(days=2)
    stamps = {item["created_at"] for item in dump if item["kind"] == "node"}
    assert stamps == {int(ingested.timestamp() * 1000)}  # cognee's clock is the simulated one, not the wall clock
    assert {str(item["updated_at"])[:10] for item in dump if item["kind"] == "edge"} == {ingested.date().isoformat()}
    assert hits and all(hit.id in {f"{i['source']}|{i['relationship_name']}|{i['target']}"
                                   for i in dump if i["kind"] == "edge"} for hit in hits)
    calls = read_events(tmp_path / "one")
    assert len(calls) == 2 and all(c["system"] == "cognee" and c["role"] == "memory_writer" for c in calls)
    ops = read_events(tmp_path / "one", "memory_op")
    assert ops[0]["op"] == "reset" and {op["op"] for op in ops[1:]} == {"add"} and len(ops) == len(dump) + 1
    store = tmp_path / "one" / "stores" / "cognee" / "u1"
    assert (store / "worker.log").is_file() and (store / "system").is_dir()
    again, _ = await _run(tmp_path / "two")

    def here(items: list[dict[str, Any]], folder: Path) -> str:  # the only difference: where the run folder is
        return json.dumps(items, sort_keys=True).replace(str(folder), "RUN")
    assert here(again, tmp_path / "two") == here(dump, tmp_path / "one")  # same seed and clock: same graph and ids


async def test_a_worker_that_cannot_start_names_its_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMPROBE_COGNEE_NOW", "not a time")  # the worker's own start-up fails on it
    with temp_recording(tmp_path / "rec") as recorder:
        chat = ChatClient(load_llm_config(None, {}, ["openai:m@http://127.0.0.1:1/v1"]), recorder,
                          backend_factory=lambda spec: ScriptedBackend(answer))
        services = MemoryServices(recorder=recorder, clock=SimClock(), seed=7, chat=chat,
                                  embedder=BagOfWordsEmbedder(dim=384, hashed=True))
        memory = Cognee(services)
        monkeypatch.setattr(memory, "_now", lambda: "not a time")
        with pytest.raises(WorkerError, match="worker.log"):
            await memory.reset("u1")
        await close_shared_proxies()
        await chat.aclose()
