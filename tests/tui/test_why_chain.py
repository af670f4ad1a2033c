"""The why block answers the whole chain (issue 36, item 2): disclosed (the user's turn, quoted) →
written (which items, by which turn) → reachable (retrieve: the relevant items' ranks, or "none in
the top k; best relevant item ranked N") → what the slot-filler said → what the judge said, with each
mode's stage-1 evidence, and a mark where a recorded label contradicts the chain — on the shipped
recordings, relevance found by the run's embedder (st:minilm) or the trait's own words, never id order."""

from __future__ import annotations

import asyncio
import json

from textual.pilot import Pilot

from memprobe_engine.protocols import open_session
from memprobe_tui.app import MemProbeApp
from memprobe_tui.recovery.dimension import DimensionScreen
from memprobe_tui.recovery.transcript import TranscriptScreen
from memprobe_tui.widgets.detail_log import DetailLog
from tests.tui.conftest import REPO
from tests.tui.helpers import settle


def _app(name: str) -> MemProbeApp:
    return MemProbeApp(session=open_session(REPO / "recordings" / name), live={"rescore": None}, keymap_path=None)


async def _chain(pilot: Pilot[None]) -> tuple[DimensionScreen, str]:
    """The inspector once its why-chain holds the embedder's ranks (loading the model may take a while)."""
    for _ in range(1200):
        await settle(pilot, 1)
        screen = pilot.app.screen
        if isinstance(screen, DimensionScreen) and screen.why is not None and not screen.why.pending:
            return screen, screen.query_one(DetailLog).text()
        await asyncio.sleep(0.1)
    raise AssertionError("the why-chain never finished")


async def _open(pilot: Pilot[None], dimension: str, system: str = "") -> tuple[DimensionScreen, str]:
    await settle(pilot)
    await pilot.press("ctrl+p", *f"{system} {dimension}".strip())
    await settle(pilot)
    await pilot.press("enter")
    return await _chain(pilot)


async def test_geographic_knowledge_under_retrieve_is_answered_in_five_keys() -> None:
    app = _app("release-a-user_001-mem0")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("ctrl+p", "g", "e", "o", "enter")  # 5 keys from opening the recording
        screen, text = await _chain(pilot)
        assert screen.dimension == "geographic_knowledge"
        why = text[:text.index("\ntarget")]
        assert "disclosed  T11.1 user: “Yeah, but make it more specific. Near Ponte Vedra" in why
        assert "9 of 110 items" in why  # the 9 items that name Ponte Vedra Beach, by their name
        assert "reach: the trait is in 9 items, none in the top 5; best relevant item ranked" in why
        assert "(st:minilm)" in why
        assert "filled “unknown” — The memories mention school planning" in why
        assert "judged 0 — The predicted description is unkn" in why and "memory_failure" in why
        assert "s1 disclosed “near the beach”" in why  # retrieve's stage-1 evidence
        # on screen at 80×24, not below the fold: the chain is the first thing the pane shows
        log = screen.query_one(DetailLog)
        visible = "\n".join(str(line.text) for line in log.lines[:log.size.height])
        assert "none in the top 5" in visible and "memory_failure" in visible
        # dump_all's read list: the nine relevant items first, not the store's id order
        read = text[text.index("read: the whole store"):]
        assert "the 9 that hold the trait first" in read
        first_nine = [line for line in read.splitlines()[1:10]]
        assert all(line.lstrip().startswith("★") for line in first_nine), first_nine
        assert screen.why is not None and screen.detail is not None and screen.detail.fill_seq is not None
        assert {line.split()[0].lstrip("★") for line in first_nine} == set(screen.why.relevant)
        store = app.session.store_at("user_001", "mem0", screen.detail.fill_seq)  # type: ignore[union-attr]
        assert all("ponte vedra" in str(store[i]).lower() for i in screen.why.relevant)


async def test_stage_one_evidence_is_shown_for_each_mode() -> None:
    app = _app("release-a-user_001-mem0")
    async with app.run_test(size=(80, 24)) as pilot:
        screen, text = await _open(pilot, "childhood_defining_event")
        assert screen.why is not None
        stages = {m.mode: m.stages for m in screen.why.modes}
        assert "s1 disclosed “" in stages["dump_all"] and "s1 disclosed “" in stages["retrieve"]
        assert stages["dump_all"] != stages["retrieve"]  # retrieve's own evidence, not dump_all's
        why = text[:text.index("\ntarget")]
        for line in stages.values():
            assert line[:40] in why


async def test_fixed_run_evidence_prefers_the_users_turns_and_flags_a_contradicted_label() -> None:
    app = _app("sample-quick-fixed-user_001")
    async with app.run_test(size=(80, 24)) as pilot:
        screen, text = await _open(pilot, "longctx_full geographic_knowledge")
        assert screen.detail is not None and screen.system == "longctx_full"
        turns = screen.detail.evidence_turns
        assert turns[0].role == "user" and "Ponte Vedra Beach" in turns[0].text  # not the assistant's echo
        assert "disclosed  T2.1 user: “Pretty good, but make it more specific for near" in text
        assert "⚠ recorded task_design_failure, yet dump_all recovered it (0.75)" in text
        assert "relevant item at rank 1 of the top 5" in text
        assert "task_design_failure" in text  # the recorded label is kept
        await pilot.press("e")  # the first evidence turn: the user's
        await settle(pilot)
        transcript = app.screen
        assert isinstance(transcript, TranscriptScreen)
        assert "Ponte Vedra Beach" in transcript.query_one(DetailLog).text() or any(
            "Ponte Vedra Beach" in str(getattr(e, "content", "")) for e in transcript.events)


async def test_a_memory_failure_whose_relevant_item_was_retrieved_first_is_marked() -> None:
    app = _app("sample-quick-live-sim_01")
    async with app.run_test(size=(80, 24)) as pilot:
        screen, text = await _open(pilot, "longctx_full regional_geography")
        assert screen.system == "longctx_full"
        assert "⚠ recorded memory_failure, yet the slot-filler read a relevant item (rank 1)" in text
        assert "quoting the stage-1 evidence" in text
        assert "disclosed  T1.1 user: “I know the area well" in text


async def test_evidence_turns_name_the_places_and_number_turns_as_the_steps() -> None:
    """geographic_knowledge on the fixed run (issue 36, item 3): the user turns naming Ponte Vedra Beach
    and Mickler's Landing (a place the turn that names Ponte Vedra Beach also names) are evidence
    turns, before the assistant's; each evidence line names its turn as the step list does, the
    message's own turn in events.jsonl (T2.1 said, T2.2 the next), and the why chain says the item
    written in T2.2 holds T2.1's turn."""
    app = _app("sample-quick-fixed-user_001")
    async with app.run_test(size=(80, 24)) as pilot:
        screen, text = await _open(pilot, "longctx_full geographic_knowledge")
        assert screen.detail is not None
        turns = screen.detail.evidence_turns
        users = [t for t in turns if t.role == "user"]
        assert [t.role for t in turns][:len(users)] == ["user"] * len(users)  # the user's turns first
        assert "Ponte Vedra Beach" in users[0].text and "Mickler’s Landing" in users[1].text
        said = {}
        with open(REPO / "recordings" / "sample-quick-fixed-user_001" / "events.jsonl", encoding="utf-8") as lines:
            for line in lines:
                event = json.loads(line)
                if event["kind"] == "message" and event.get("system") == "longctx_full" and event.get("content"):
                    said[event["content"]] = (event["task_index"], event["turn"])
        assert [said[t.text] for t in users] == [(1, 1), (1, 2)]
        evidence = text[text.index("evidence turns"):text.index("\ndump_all (full store)")]
        assert "  T2.1 user: Pretty good, but make it more specific for near Ponte Vedra Beach" in evidence
        assert "  T2.2 user: Yeah, that works. Mickler’s Landing" in evidence
        assert "  T2.1 assistant: " in evidence and " turn " not in evidence  # no "T2 turn 1" beside "T2.1"
        assert "written in T2.2 (holding T2.1)" in text  # the item quoting T2.1's turn, stored a turn later
