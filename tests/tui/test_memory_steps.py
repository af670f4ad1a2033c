"""One diff model in the memory view (issue 36, item 1): a step is a turn (all its ops against the
store before the turn) or an op (against the store before that op), the header says which, and
``m``, ``n``/``p`` and ``[``/``]`` land on the same numbers for the same step — on every step of every
shipped recording."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from textual import events
from textual.pilot import Pilot

from memprobe_engine.protocols import open_session
from memprobe_engine.replay.memory_view import store_view
from memprobe_tui.app import MemProbeApp
from memprobe_tui.screens.memory import MemoryScreen
from tests.tui.conftest import REPO
from tests.tui.helpers import settle, text_of

SHIPPED = sorted(p.name for p in (REPO / "recordings").iterdir() if (p / "events.jsonl").exists())
FIXED = REPO / "recordings" / "sample-quick-fixed-user_001"


def _app(path: Path) -> MemProbeApp:
    return MemProbeApp(session=open_session(path), live={"rescore": None}, keymap_path=None)


async def _shown(pilot: Pilot[None]) -> MemoryScreen:
    """The memory screen once the step last asked for is drawn (polled: waiting for an idle CPU
    per key would take minutes over the ~370 steps)."""
    for _ in range(3000):
        screen = pilot.app.screen
        if isinstance(screen, MemoryScreen) and screen.step is not None and screen._target is None:
            return screen
        await asyncio.sleep(0.002)
        await pilot._wait_for_screen()
    raise AssertionError("the memory view never drew its step")


async def _key(pilot: Pilot[None], key: str) -> MemoryScreen:
    """One key as the terminal sends it, then the step it asked for, drawn (Pilot's press waits for
    an idle CPU twice per key, which on a shared machine costs most of this test's time)."""
    event = events.Key(key, key if len(key) == 1 else None)
    event.set_sender(pilot.app)
    pilot.app.post_message(event)
    for _ in range(3000):  # until the app and the screen have handled it (and what it posted)
        await asyncio.sleep(0.001)
        if pilot.app._message_queue.empty() and pilot.app.screen._message_queue.empty():
            break
    await pilot._wait_for_screen()
    return await _shown(pilot)


def _header(pilot: object) -> tuple[str, str]:
    return text_of(pilot, "#title"), text_of(pilot, "#info")  # type: ignore[arg-type]


def _counts(info: str) -> str:
    return info.split(" · ")[0].rsplit(":", 1)[-1].strip()


async def test_m_and_n_p_and_brackets_agree_on_the_fixed_run_as_the_audit_walked_it() -> None:
    """The audit's walk: ``m`` on the overview, then ``p p p n n n``: the same turn, the same numbers;
    ``[`` inside turn 3.1 names an op of it, never the turn."""
    app = _app(FIXED)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("m")
        await settle(pilot)
        opened = _header(pilot)
        assert "· T3 turn 1 ·" in opened[0]
        assert opened[1].startswith("step T3.1 (all 2 ops") and "+2 ~0 -0" in opened[1]  # seq 75 and 78
        await pilot.press("p", "p", "p", "n", "n", "n")  # typed faster than the store rebuilds
        await settle(pilot)
        assert _header(pilot) == opened
        await pilot.press("left_square_bracket")
        await settle(pilot)
        title, info = _header(pilot)
        assert "op seq 78 in T3 turn 1" in title and info.startswith("op 2/2 of T3.1") and "+1 ~0 -0" in info
        await pilot.press("left_square_bracket")
        await settle(pilot)
        assert _header(pilot)[1].startswith("op 1/2 of T3.1")
        await pilot.press("escape", "escape")  # the transcript at the turn shown, the overview
        await settle(pilot)
        await pilot.press("enter", "colon", *"T3.1", "enter", "m")  # the transcript's m on turn 3.1
        await settle(pilot)
        assert _header(pilot) == opened


@pytest.mark.parametrize("name", SHIPPED)
async def test_every_step_of_every_store_reads_the_same_however_it_is_reached(name: str) -> None:
    path = REPO / "recordings" / name
    app = _app(path)
    session = app.session
    assert session is not None
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        stores = session.timeline.keys()
        assert stores, name
        for unit, system in stores:
            assert unit is not None and system is not None
            app.open_memory(session, unit, system, None)  # the overview's m
            screen = await _shown(pilot)
            assert screen.step is not None
            ranges, ops = screen._step_ranges(), screen.op_seqs or []
            opened, opened_step = _header(pilot), screen.step
            # n/p: every turn, back to the first and forward to the last, each read twice
            turns: dict[int, tuple[str, str]] = {}
            for key in ["p"] * (len(ranges) + 1) + ["n"] * (len(ranges) + 1):
                await _key(pilot, key)
                step = screen.step
                assert step is not None and step.kind == "turn" and step.turn is not None, (name, key, step)
                header = _header(pilot)
                assert turns.setdefault(step.turn, header) == header, (name, system, step.turn)
                first, last = ranges[step.turn]
                truth = store_view(session, unit, system, last, first - 1)  # the turn against before it
                assert _counts(header[1]) == f"+{truth.added} ~{truth.updated} -{truth.deleted}"
                assert header[1].startswith("step ") and "op seq" not in header[0]
            assert len(turns) == len(ranges), name
            if opened_step.kind == "turn":
                assert opened_step.turn is not None and turns[opened_step.turn] == opened, name
            # [/]: every op, each against the store just before it, named as an op
            seen: dict[int, tuple[str, str]] = {}
            keys = ["right_square_bracket", "left_square_bracket", "right_square_bracket"]
            for key in [k for k in keys for _ in range(len(ops) + 1)]:
                await _key(pilot, key)
                step = screen.step
                if not seen and step is not None and step.kind == "turn":
                    continue  # the last turn, when every op lies before it: ] moves nowhere
                assert step is not None and step.kind == "op", (name, key, step)
                header = _header(pilot)
                assert seen.setdefault(step.after_seq, header) == header, (name, system, step.after_seq)
                truth = store_view(session, unit, system, step.after_seq, step.after_seq - 1)
                assert _counts(header[1]) == f"+{truth.added} ~{truth.updated} -{truth.deleted}"
                assert header[1].startswith("op") and "op seq" in header[0]
            assert sorted(seen) == ops, name
            if opened_step.kind == "op":
                assert seen[opened_step.after_seq] == opened, name
            # what the transcript's m opens: a turn (first - 1, last) and a memory event (seq - 1, seq)
            for turn in {0, len(ranges) // 2, len(ranges) - 1}:
                first, last = ranges[turn]
                app.open_memory(session, unit, system, (first - 1, last))
                await _shown(pilot)
                assert _header(pilot) == turns[turn], (name, turn)
                await pilot.press("escape")
            for seq in ops[:3] + ops[-2:]:
                app.open_memory(session, unit, system, (seq - 1, seq))
                await _shown(pilot)
                assert _header(pilot) == seen[seq], (name, seq)
                await pilot.press("escape")
            await pilot.press("escape")
            await pilot.pause(0.05)
