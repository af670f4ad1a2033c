"""Headless measurement of the paradigm (protocol-B) screens on a suite-sized recording.

    .venv/bin/python bench/tui_paradigms.py [--episodes 56] [--systems 3] [--dir /tmp/memprobe-bench-paradigms]

1. Writes a paradigm recording the size of the upstream suite: ``--episodes`` episodes (the two
   upstream sample episodes repeated under new ids, 21 sessions and 4 probes each) × ``--systems``
   systems (amem-shaped stores first, then stores-less ones), with the fixture generator of
   ``tests/fixtures/make_paradigm_fixture.py`` (memory ops with JSON Patches, ingest events, reader
   calls, answers, rule scores), reusing the folder when it already holds that recording.
2. Runs the app with ``App.run_test()`` at 80×24 and measures: the time to the filled episode list
   (open, index pass, per-probe scores), the session stepper's step latency (each ``n`` until the
   screen has the session's dialogue and store diff), the store-growth column of an episode, and the
   probe inspector's load.

Target (as for the protocol-A stepper in bench/tui.py): first screen ≤ 1 s, session step ≤ 50 ms
(median, from the key sent to the session drawn).
"""

from __future__ import annotations

from memprobe_engine.protocols import open_session
import argparse
import asyncio
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from textual import events

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def synthesize(directory: Path, n_episodes: int, n_systems: int) -> int:
    """Write the recording unless ``directory`` holds one of this shape; returns its event count."""
    from memprobe_engine.events.header import RecordingHeader
    from memprobe_engine.events.reader import open_recording
    from memprobe_engine.events.run import RunEnd, RunStart
    from memprobe_engine.events.writer import open_writer
    from memprobe_engine.paradigms.suite import load_suite
    from tests.fixtures.make_paradigm_fixture import SUITE, ClockRecorder, run_episode

    systems = ["amem", "full_context", "naive_rag", "oracle_rag", "time_aware_rag"][:n_systems]
    systems = [s if s == "amem" or i < 5 else f"{s}_{i}" for i, s in enumerate(systems)]
    shape = {"episodes": n_episodes, "systems": systems}
    if (directory / "header.json").exists():
        with open_recording(directory) as reader:
            if reader.header.config.get("bench") == shape:
                return len(reader)
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    base = load_suite(ROOT / SUITE).episodes
    episodes = []
    for n in range(n_episodes):
        source = base[n % len(base)]
        copy = source.model_copy(update={"episode_id": f"{source.episode_id}-{n:02d}"})
        for probe, original in zip(copy.probes, source.probes):
            probe.attach_spec(original.spec or source.latent_spec)
        episodes.append(copy)
    header = RecordingHeader(run_id="paradigms-bench", suite="paradigms", created=1767657600.0,
                             config={"suite": "paradigms", "sessions": SUITE, "systems": systems, "bench": shape})
    writer = open_writer(directory, header)
    rec = ClockRecorder(writer, header.created)
    rec.emit(RunStart(run_id=header.run_id, suite="paradigms"))
    errors = [True]  # no execution errors in the bench
    for system in systems:
        kind = "amem" if system == "amem" else "full_context"
        for episode in episodes:
            run_episode(rec, episode, kind, errors, label=system)
    rec.emit(RunEnd(status="completed"))
    count = writer.next_seq
    writer.close()
    (directory / "writer.lock").unlink(missing_ok=True)
    return count


async def measure(directory: Path) -> dict[str, Any]:
    from memprobe_tui.app import MemProbeApp
    from memprobe_tui.paradigms.episode_stepper import EpisodeScreen
    from memprobe_tui.paradigms.overview import ParadigmOverviewScreen
    from memprobe_tui.paradigms.probe_inspector import ProbeScreen

    started = time.perf_counter()
    session = open_session(directory)
    app = MemProbeApp(session=session, live={"rescore": None}, keymap_path=None)
    out: dict[str, Any] = {"events": len(session)}
    async with app.run_test(size=(80, 24)) as pilot:
        while not (isinstance(app.screen, ParadigmOverviewScreen) and app.screen.rows):
            await pilot.pause(0.005)
        out["first_screen_s"] = time.perf_counter() - started
        out["episodes_listed"] = len(app.screen.rows)
        t0 = time.perf_counter()
        await pilot.press("enter")
        while not (isinstance(app.screen, EpisodeScreen) and app.screen.detail is not None):
            await pilot.pause(0.002)
        out["stepper_open_s"] = time.perf_counter() - t0
        screen = app.screen
        t0 = time.perf_counter()
        while screen.growth is None:
            await pilot.pause(0.002)
        out["store_growth_s"] = time.perf_counter() - t0
        await pilot.pause()
        steps = []
        for position in range(1, 21):
            # The key goes in as the terminal driver sends it, the clock stops once the session is
            # drawn: Pilot's press also waits for the app to look idle (~0.1 s whatever it does).
            key_event = events.Key("n", "n")
            key_event.set_sender(app)
            t0 = time.perf_counter()
            app._driver.send_message(key_event)
            while screen.detail is None or screen.detail.step.session_idx != position:
                await asyncio.sleep(0.001)
            drawn: asyncio.Future[float] = asyncio.get_running_loop().create_future()
            screen.call_after_refresh(lambda: drawn.done() or drawn.set_result(time.perf_counter()))
            steps.append(await drawn - t0)
        out["step_median_ms"] = 1000 * statistics.median(steps)
        out["step_p95_ms"] = 1000 * sorted(steps)[int(0.95 * (len(steps) - 1))]
        t0 = time.perf_counter()
        await pilot.press("n", "enter")
        while not (isinstance(app.screen, ProbeScreen) and app.screen.detail is not None):
            await pilot.pause(0.002)
        out["probe_inspector_s"] = time.perf_counter() - t0
    session.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=56)
    parser.add_argument("--systems", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/memprobe-bench-paradigms"))
    args = parser.parse_args()
    t0 = time.perf_counter()
    count = synthesize(args.dir, args.episodes, args.systems)
    print(f"recording: {count:,} events, {args.episodes} episodes × {args.systems} systems "
          f"({time.perf_counter() - t0:.1f} s to write or check)")
    figures = asyncio.run(measure(args.dir))
    print(f"first screen (open, index, episode list with probe scores): {figures['first_screen_s']:.2f} s "
          f"({figures['episodes_listed']} episodes of the first system; target ≤ 1 s)")
    print(f"session stepper: open {figures['stepper_open_s'] * 1000:.0f} ms; store growth of 21 sessions "
          f"{figures['store_growth_s'] * 1000:.0f} ms")
    print(f"session step (n): median {figures['step_median_ms']:.1f} ms, p95 {figures['step_p95_ms']:.1f} ms "
          f"(target ≤ 50 ms)")
    print(f"probe inspector load: {figures['probe_inspector_s'] * 1000:.0f} ms")


if __name__ == "__main__":
    main()
