"""The progress display of long commands: plain timestamped lines off a terminal (with ETA once a
step is done), model start-up messages shown as phases, and a live display that ends cleanly."""

from __future__ import annotations

import io
import logging
import re

from memprobe_engine.orchestration.progress import CommandProgress


def test_plain_lines_count_units_give_an_eta_and_show_model_start_up() -> None:
    out = io.StringIO()
    with CommandProgress("run", unit="units", stream=out) as progress:
        progress.phase("recording to DIR")
        logging.getLogger("memprobe_engine.llm.backends.local").info("starting embedded llama.cpp server for %r", "1.5b")
        progress.hook("sim_01 × nomem: task 1/3", 0, 2)
        progress.hook("sim_01 × nomem done in 3 s", 1, 2)
        progress.hook("sim_01 × amem done in 3 s", 2, 2)
    lines = out.getvalue().splitlines()
    assert all(re.match(r"\[\d\d:\d\d:\d\d\] run: ", line) for line in lines)
    assert "recording to DIR" in lines[0] and "starting embedded llama.cpp server for '1.5b'" in lines[1]
    assert "0/2 units" in lines[2] and "1/2 units · ETA" in lines[3]
    assert "2/2 units" in lines[-1] and "finished in" in lines[-1]
    assert not logging.getLogger("memprobe_engine.llm").handlers  # the handler is gone afterwards


def test_live_display_renders_and_stops() -> None:
    out = io.StringIO()
    with CommandProgress("rescore", unit="cases", total=3, stream=out, live=True) as progress:
        progress.advance(note="judge dump_all")
        progress.note("a line of its own")
        progress.advance(2)
    text = out.getvalue()
    assert "a line of its own" in text and "3/3 cases" in text and "finished in" in text
