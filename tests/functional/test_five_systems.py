"""Protocol A with all five memory systems in one recording (scripted models, real MiniLM embeddings).

Every system that writes records its operations, and each store can be rebuilt from those patches:
at the end (equal to the system's own final ``dump()`` and to what the dump_all slot-filler read)
and after any observation in between (equal to the ``dump()`` taken at that moment).
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest

from memprobe_engine.events.reader import open_recording
from memprobe_engine.llm.types import ChatRequest
from memprobe_engine.memory import amem, mem0, memt_prompts
from memprobe_engine.memory.base import MemoryServices, MemorySystem, Observation
from memprobe_engine.memory.registry import create_system
from memprobe_engine.memory.timeline import store_at
from memprobe_engine.recovery import unit
from memprobe_engine.recovery.rescore import Case, gather
from memprobe_engine.recovery.runner import run_recovery
from tests.functional.recovery_oracle import RecoveryOracle, plan_for
from tests.functional.test_recovery_run import USER, config, dims, plan

SYSTEMS = ["nomem", "longctx_full", "amem", "mem0", "memt"]
WRITERS = SYSTEMS[1:]


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()


def _call(name: str, arguments: dict[str, Any]) -> str:
    return f"<tool_call>{_json({'name': name, 'arguments': arguments})}</tool_call>"


class FiveSystemOracle(RecoveryOracle):
    """RecoveryOracle plus valid replies to the memory-writer prompts of amem, mem0 and memt and to
    memt's ReAct retrieval; recognised by the modules' own system prompts."""

    def answer(self, request: ChatRequest) -> tuple[str, str]:
        system = request.messages[0].content if request.messages[0].role == "system" else ""
        last = request.messages[-1].content
        if system == amem.NOTE_SYSTEM:
            return "amem_note", _json({"keywords": ["routine", "shift", "checklist"], "context": "A user routine.",
                                       "tags": ["planning", "habits", "preferences"]})
        if system == amem.EVOLVE_SYSTEM:
            return "amem_evolve", _json({"should_evolve": True, "actions": ["strengthen"], "link_to": [0],
                                         "tags": ["planning", "habits", "linked"], "neighbor_updates": []})
        if system == mem0.EXTRACT_SYSTEM:
            message = last.split("NEW USER MESSAGE", 1)[-1].strip()
            return "mem0_extract", _json({"facts": [f"User said: {message[:120]}"]})
        if system == mem0.UPDATE_SYSTEM:
            memories = last.split("NEW FACTS", 1)[0]
            facts = re.findall(r"^(\d+): (.*)$", last.split("NEW FACTS", 1)[-1], flags=re.M)
            return "mem0_update", _json({"events": [
                {"fact": int(n), "event": "NONE" if text in memories else "ADD", "target": "", "text": ""}
                for n, text in facts]})
        if system.startswith(memt_prompts.FORMATION_SYSTEM.split("{", 1)[0]):
            return "memt_formation", self._formation(last)
        if system.startswith(memt_prompts.UPDATE_SYSTEM.split("{", 1)[0]):
            return "memt_update", self._update(last)
        if system.startswith(memt_prompts.REACT_SYSTEM.split("{", 1)[0]):
            return "memt_react", self._react(request)
        return super().answer(request)

    @staticmethod
    def _formation(body: str) -> str:
        turn = body.split("Current Turn: user said: ", 1)[-1].strip()
        assert turn, "a memt formation prompt without its current turn"
        return "\n".join([
            _call("create_fact", {"fact": f"User mentioned: {turn[:100]}", "start_time": "", "end_time": ""}),
            _call("create_experience", {"experience": f"When asked for help with {turn[:60]}, keep it short.",
                                        "start_time": "", "end_time": ""}),
            _call("update_persona", {"name": "User", "profile": "Works night shifts and likes short checklists."}),
            _call("update_summary", {"content": f"Latest request: {turn[:60]}"})])

    @staticmethod
    def _update(body: str) -> str:
        new = orjson.loads(body.split("[New memory]\n", 1)[1].split("\n\n[Existing memories]", 1)[0])
        stored = orjson.loads(body.split("[Existing memories]\n", 1)[1])
        if any(entry["document"] == new["document"] for entry in stored):
            return _call("ignore_item", {"reason": "same"})
        if new["type"] == "experience":
            return _call("update_item", {"id": "0", "document": f"{stored[0]['document'][:200]} Then: {new['document']}"})
        return _call("add_item", {"document": new["document"]})

    @staticmethod
    def _react(request: ChatRequest) -> str:
        step = sum(1 for message in request.messages if message.role == "assistant")
        query = request.messages[1].content.removeprefix("REQUEST:\n")[:80]
        plan = [_call("search_facts", {"query": query, "k": 3}),
                _call("search_turns", {"query": query, "k": 2}) + _call("search_experiences", {"query": query}),
                _call("get_summary", {}), _call("finish", {})]
        return plan[min(step, len(plan) - 1)]


Snapshot = tuple[int, list[dict[str, Any]]]


def test_five_systems_record_rebuildable_stores(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMPROBE_CACHE_DIR", str(tmp_path / "cache"))
    chosen = dims(3)
    plan_for(chosen)
    snapshots: dict[str, list[Snapshot]] = {name: [] for name in SYSTEMS}
    finals: dict[str, MemorySystem] = {}

    def capturing(name: str, services: MemoryServices) -> MemorySystem:
        """The real system, its ``dump()`` noted (with the recording's last seq) after each observation
        and after ``finish()``, the end-of-trajectory flush of batch writers."""
        system = create_system(name, services)
        observe = system.observe
        finish = getattr(system, "finish", None)

        def note() -> None:
            assert services.recorder.writer is not None
            snapshots[name].append((services.recorder.writer.next_seq - 1, system.dump()))

        async def noted(observation: Observation) -> None:
            await observe(observation)
            note()

        async def finished() -> None:
            assert finish is not None
            await finish()
            note()

        system.observe = noted  # type: ignore[method-assign]
        if finish is not None:
            system.finish = finished  # type: ignore[attr-defined]
        finals[name] = system
        return system

    monkeypatch.setattr(unit, "create_system", capturing)
    oracle = FiveSystemOracle()
    record = asyncio.run(run_recovery(plan(chosen, SYSTEMS), tmp_path / "rec", llm_config=config(),
                                      backend_factory=lambda spec: oracle))

    reader = open_recording(record)
    assert [e.status for e in reader.iter_events(kinds=["run_end"])] == ["completed"]
    ops = Counter((e.system, e.op) for e in reader.iter_events(kinds=["memory_op"]))
    assert not any(system == "nomem" for system, _ in ops)
    for name in WRITERS:
        assert sum(n for (system, op), n in ops.items() if system == name and op != "reset") > 0, name
    assert {op for system, op in ops if system == "memt"} >= {"reset", "add", "update", "ignore"}
    assert any(True for _ in reader.iter_events(kinds=["embedding"]))  # the real MiniLM embedder, recorded
    user_turns = sum(1 for e in reader.iter_events(kinds=["message"]) if e.system == "memt" and e.role == "user")
    # memt forms memories once per user-side turn: every raw turn is followed by a writer call before
    # the next one (identical requests are answered from the response cache, so count the recording)
    trail = ["turn" if e.kind == "memory_op" else "call" for e in reader.iter_events(kinds=["memory_op", "llm_call"])
             if e.system == "memt" and (e.kind == "llm_call" and e.role == "memory_writer" or
                                        e.kind == "memory_op" and e.note == "turns: raw turn")]
    assert trail.count("turn") == user_turns and "turn turn" not in " ".join(trail) and trail[-1] == "call"
    assert 0 < oracle.by_role["memt_formation"] <= user_turns
    assert not [e for e in reader.iter_events(kinds=["error"]) if e.where in ("amem", "mem0", "memt", "rollout")]
    footprints = {e.system: e for e in reader.iter_events(kinds=["memory_footprint"])}

    for name in WRITERS:
        final = finals[name].dump()
        assert final == snapshots[name][-1][1], f"{name}: the store changed after the rollout"
        rebuilt = store_at(reader, unit=USER, system=name, upto_seq=10**9)
        assert list(rebuilt) == [item["id"] for item in final] and list(rebuilt.values()) == final, name
        for dimension in chosen:
            assert gather(reader, Case(USER, name, dimension, "dump_all")).memory == final, (name, dimension)
        seq, middle = snapshots[name][len(snapshots[name]) // 2]
        at_middle = store_at(reader, unit=USER, system=name, upto_seq=seq)
        assert at_middle and list(at_middle.values()) == middle, name
        assert set(at_middle) < {item["id"] for item in final}, name
        assert footprints[name].n_items == len(final), name
    assert finals["nomem"].dump() == [] and footprints["nomem"].n_items == 0

    sizes = {name: (footprints[name].n_items, round(footprints[name].mean_chars)) for name in SYSTEMS}
    print("store sizes (items, mean chars):", sizes)
    memt_store = finals["memt"].dump()
    assert Counter(item["category"] for item in memt_store).keys() == {"turns", "facts", "experiences", "personas",
                                                                       "summary"}
    roles = {e.role: e.model for e in reader.iter_events(kinds=["llm_call"]) if e.system == "memt"
             and e.role in ("memory_writer", "reader")}
    assert roles == {"memory_writer": "scripted", "reader": "scripted"}
    retrieved = [e for e in reader.iter_events(kinds=["retrieval"])
                 if e.system == "memt" and e.purpose == "retrieve_mode"]
    assert retrieved and all(0 < len(e.item_ids) <= 5 and len(set(e.item_ids)) == len(e.item_ids) for e in retrieved)
