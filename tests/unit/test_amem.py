"""amem against scripted memory_writer replies: note construction, linking, evolution, search, replay."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from memprobe_engine.events.reader import open_recording
from memprobe_engine.events.recorder import Recorder
from memprobe_engine.llm.client import ChatClient
from memprobe_engine.llm.config import load_llm_config
from memprobe_engine.llm.types import ChatRequest
from memprobe_engine.memory.amem import EVOLVE_SYSTEM, NOTE_SYSTEM, AMem
from memprobe_engine.memory.base import MemoryServices, MemorySystem, Observation, SimClock
from memprobe_engine.memory.timeline import store_at
from tests.doubles import BagOfWordsEmbedder, ScriptedBackend, read_events, temp_recording

VocabEmbedder = BagOfWordsEmbedder


DINNER = "Plan a vegetarian dinner menu for Friday."
PEANUTS = "I am allergic to peanuts, so no peanut sauce."
SHOES = "I also need running shoes for my marathon."
GARBLED = "Something the writer cannot parse."
STRETCH = "Remind me to stretch after each run."

#: Unit text -> the note-construction reply (a plain string is returned as is: not JSON).
NOTES: dict[str, dict[str, Any] | str] = {
    DINNER: {"keywords": ["vegetarian", "dinner", "menu"], "context": "User plans a vegetarian dinner for Friday.",
             "tags": ["cooking", "food", "planning"]},
    PEANUTS: {"keywords": ["allergic", "peanuts", "sauce"], "context": "User has a peanut allergy.",
              "tags": ["health", "allergy", "food"]},
    SHOES: {"keywords": ["running", "shoes", "marathon"], "context": "User needs running shoes for a marathon.",
            "tags": ["sport", "shopping", "running"]},
    GARBLED: "no JSON here",
    STRETCH: {"keywords": ["stretch", "run", "reminder"], "context": "User wants stretching reminders.",
              "tags": ["sport", "health", "habit"]},
}

#: New note's content -> the evolution reply.
EVOLUTIONS: dict[str, dict[str, Any] | str] = {
    PEANUTS: {"should_evolve": True, "actions": ["strengthen", "update_neighbor"], "link_to": [0, 7],
              "tags": ["allergy", "diet", "safety"],
              "neighbor_updates": [{"index": 0, "context": "Dinner planning for a user with a dietary restriction.",
                                    "tags": ["cooking", "diet", "restriction"]},
                                   {"index": 3, "context": "Out of range.", "tags": ["invented"]}]},
    SHOES: {"should_evolve": False, "actions": [], "link_to": [], "tags": [], "neighbor_updates": []},
    GARBLED: {"should_evolve": False, "actions": [], "link_to": [], "tags": [], "neighbor_updates": []},
    STRETCH: "still no JSON",
}


def reply(request: ChatRequest) -> str:
    system, body = request.messages[0].content, request.messages[1].content
    if system == NOTE_SYSTEM:
        answer = NOTES[body.removeprefix("TEXT\n")]
    else:
        assert system == EVOLVE_SYSTEM
        answer = EVOLUTIONS[body.split("content: ", 1)[1].split("\n", 1)[0]]
    return answer if isinstance(answer, str) else json.dumps(answer)


def obs(kind: str, text: str, turn: int = 0) -> Observation:
    return Observation(kind=kind, text=text, task_index=1, turn=turn,  # type: ignore[arg-type]
                       timestamp="2026-01-05T09:00:00")


DIALOGUE = [obs("task", DINNER), obs("assistant", "Here is a menu with satay.", 1), obs("user", PEANUTS, 1),
            obs("user", SHOES, 2), obs("user", GARBLED, 3), obs("user", STRETCH, 4)]


def make_services(recorder: Recorder, backend: ScriptedBackend) -> MemoryServices:
    config = load_llm_config(None, {}, ["openai:test-model@http://127.0.0.1:1/v1"])
    return MemoryServices(recorder=recorder, clock=SimClock(), seed=3, embedder=VocabEmbedder(),
                          chat=ChatClient(config, recorder, backend_factory=lambda spec: backend))


async def run_dialogue(directory: Path) -> tuple[AMem, ScriptedBackend]:
    backend = ScriptedBackend(reply)
    with temp_recording(directory) as recorder:
        services = make_services(recorder, backend)
        system = AMem(services)
        with recorder.scope(user_id="u1", system="amem"):
            await system.reset("u1")
            for observation in DIALOGUE:
                services.clock.advance(minutes=2)
                await system.observe(observation)
    return system, backend


def by_content(system: AMem) -> dict[str, dict[str, Any]]:
    return {item["content"]: item for item in system.dump()}


async def test_amem_builds_notes_with_the_native_fields(tmp_path: Path) -> None:
    system, backend = await run_dialogue(tmp_path / "rec")
    assert isinstance(system, MemorySystem)
    notes = by_content(system)
    assert list(notes) == [DINNER, PEANUTS, SHOES, GARBLED, STRETCH]  # assistant turn skipped
    # A failed construction is stored with the library's empty defaults, not dropped (the release's A-MEM).
    assert (notes[GARBLED]["keywords"], notes[GARBLED]["context"], notes[GARBLED]["tags"]) == ([], "General", [])
    shoes = notes[SHOES]
    assert list(shoes) == ["id", "content", "keywords", "links", "context", "tags", "category", "timestamp",
                           "evolution_history"]
    assert shoes["keywords"] == ["running", "shoes", "marathon"] and shoes["tags"] == ["sport", "shopping", "running"]
    assert shoes["context"] == "User needs running shoes for a marathon." and shoes["category"] == "user"
    assert shoes["timestamp"] == "2026-01-05T09:08:00" and shoes["links"] == [] and shoes["evolution_history"] == []
    assert notes[DINNER]["category"] == "task" and len({note["id"] for note in notes.values()}) == 5
    assert not any("satay" in message.content for request in backend.requests for message in request.messages)
    evolve_calls = [request for request in backend.requests if request.messages[0].content == EVOLVE_SYSTEM]
    assert len(evolve_calls) == 1 + 1 + 1 + 3  # none for the first note; the last one needed 2 repair rounds
    assert "NUMBERED NOTES (0 to 1)" in evolve_calls[1].messages[1].content


async def test_amem_evolution_links_and_rewrites_the_chosen_neighbours(tmp_path: Path) -> None:
    system, _ = await run_dialogue(tmp_path / "rec")
    notes = by_content(system)
    dinner, peanuts = notes[DINNER], notes[PEANUTS]
    assert peanuts["links"] == [dinner["id"]] and peanuts["tags"] == ["allergy", "diet", "safety"]
    assert [entry["change"] for entry in peanuts["evolution_history"]] == [
        f"strengthen: linked to {dinner['id']}", "strengthen: tags replaced; were health, allergy, food"]
    assert dinner["context"] == "Dinner planning for a user with a dietary restriction."
    assert dinner["tags"] == ["cooking", "diet", "restriction"] and dinner["links"] == []
    (entry,) = dinner["evolution_history"]
    assert entry["timestamp"] == "2026-01-05T09:06:00"
    assert entry["change"].startswith(f"update_neighbor after note {peanuts['id']}; context was: User plans")
    assert notes[STRETCH]["links"] == [] and notes[STRETCH]["evolution_history"] == []

    ops = read_events(tmp_path / "rec", "memory_op")
    assert [op["op"] for op in ops] == ["reset", "add", "add", "link", "evolve", "update_neighbor", "add", "add",
                                        "add"]
    add_note = ops[2]["note"]
    assert "rejected link_to index 7 (valid 0..0)" in add_note and "rejected neighbor_updates index 3" in add_note
    assert ops[5]["item_ids"] == [dinner["id"]] and ops[8]["note"] == "evolution excluded"
    errors = read_events(tmp_path / "rec", "error")
    assert [(error["where"], error["error_type"], error["recoverable"]) for error in errors] == [
        ("amem", "WriteExcluded", True)] * 2
    assert "stored with empty fields" in errors[0]["message"] and "without links" in errors[1]["message"]


async def test_amem_search_is_plain_cosine_top_k(tmp_path: Path) -> None:
    """The release never calls the linked-neighbour search: a link does not pull a note into the hits."""
    system, _ = await run_dialogue(tmp_path / "rec")
    ids = {content: item["id"] for content, item in by_content(system).items()}
    query = "peanuts peanuts allergic shoes"
    query_row = (await system.index.embed([query]))[0]
    cosine = [item_id for item_id, _ in system.index.top_k(query_row, 3)]
    assert cosine[:2] == [ids[PEANUTS], ids[SHOES]] and by_content(system)[PEANUTS]["links"] == [ids[DINNER]]
    hits = await system.search(query, 2)
    assert [hit.id for hit in hits] == [ids[PEANUTS], ids[SHOES]]  # the linked dinner note is not added
    assert [hit.id for hit in await system.search(query, 3)] == cosine
    assert hits[0].item == by_content(system)[PEANUTS] and hits[0].score is not None
    assert await system.search(query, 0) == []


async def test_amem_recorded_patches_rebuild_the_dump_and_reset_empties(tmp_path: Path) -> None:
    system, _ = await run_dialogue(tmp_path / "rec")
    last = read_events(tmp_path / "rec", "memory_op")[-1]["seq"]
    with open_recording(tmp_path / "rec") as reader:
        rebuilt = store_at(reader, unit="u1", system="amem", upto_seq=last)
    assert rebuilt == {item["id"]: item for item in system.dump()}
    assert system.footprint().n_items == 5
    with temp_recording(tmp_path / "rec2") as recorder:
        fresh = AMem(make_services(recorder, ScriptedBackend(reply)))
        await fresh.observe(obs("task", DINNER))
        assert len(fresh.dump()) == 1
        await fresh.reset("u2")
    assert fresh.dump() == [] and await fresh.search("dinner", 5) == []
    assert [op["op"] for op in read_events(tmp_path / "rec2", "memory_op")] == ["add", "reset"]
