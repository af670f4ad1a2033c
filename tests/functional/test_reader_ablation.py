"""The reader ablation (paper Table 4) on a recording the real runner writes: every probe of the
systems with a reader is answered again by another reader from the recorded reader call, as the
layer reader:SPEC; the run's own answers and scores stay; `report` prints Table 4 and ρ / τ."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from memprobe_engine.events.paradigms import ProbeAnswer, ProbeScore
from memprobe_engine.events.reader import open_recording
from memprobe_engine.llm.types import ChatRequest
from memprobe_engine.paradigms import reader
from memprobe_engine.paradigms.read.reader_table import spearman
from memprobe_engine.paradigms.read.report import paradigm_report
from memprobe_engine.paradigms.reader_ablation import ablate_reader
from tests.functional.test_paradigm_run import ANSWERS, ParadigmOracle, _config, _run

SYSTEMS = ["full_context", "naive_rag", "latest_value"]
OTHER = "openai:other-reader@http://127.0.0.1:9/v1"


class WeakReader(ParadigmOracle):
    """The second reader: right about everything but the current value, and only when it read the
    whole episode (full_context); every request is kept to check what it was sent."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[ChatRequest] = []

    def answer(self, request: ChatRequest) -> tuple[str, str]:
        self.seen.append(request)
        body = request.messages[-1].content
        if body.endswith(reader.ANSWER_FORMATS["current_value"]) and "Session 3" not in body:
            return "reader", json.dumps({"answer": "FitLife", "reason": "the first gym named"})
        return super().answer(request)


def test_a_second_reader_answers_every_probe_as_a_layer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMPROBE_CACHE_DIR", str(tmp_path / "cache"))
    record = _run(tmp_path / "rec", ParadigmOracle(), SYSTEMS)
    with open_recording(record) as rec:
        originals = {(a.system, a.probe_index): a for a in rec.iter_of(ProbeAnswer)}
        calls = {e.seq: e for e in rec.iter_events(kinds=["llm_call"])}
        recorded = {tuple(m.content if m.content is not None else str(rec.payload(m.content_ref or ""))
                          for m in calls[a.llm_call_seq].messages)
                    for a in originals.values() if a.llm_call_seq is not None}
        before = [(s.system, s.probe_index, s.score) for s in rec.iter_of(ProbeScore) if s.layer is None]
    weak = WeakReader()
    summary = asyncio.run(ablate_reader(record, OTHER, _config(), backend_factory=lambda spec: weak))
    assert summary.layer == f"reader:{OTHER}" and summary.answered == 8 and summary.errors == 0
    assert summary.no_reader == ["latest_value"]            # a heuristic has no reader call
    # The recorded reader messages are sent again as they were: no memory system ran again.
    sent = {tuple(m.content for m in r.messages) for r in weak.seen}
    assert sent == recorded and len(sent) == 8
    with open_recording(record) as rec:
        layer = [a for a in rec.iter_of(ProbeAnswer) if a.layer == summary.layer]
        scores = [s for s in rec.iter_of(ProbeScore) if s.layer == summary.layer]
        own = [s for s in rec.iter_of(ProbeScore) if s.layer is None]
    assert len(layer) == 8 and len(scores) == 8 and len(own) == 12
    assert [(s.system, s.probe_index, s.score) for s in own] == before   # the run's own scores stay
    # Same answers, same scores, except where the second reader went wrong.
    was = {(s.system, s.probe_index): s.score for s in own}
    changed = {(s.system, s.probe_type) for s in scores if s.score != was[(s.system, s.probe_index)]}
    assert changed == {("naive_rag", "current_value")}
    assert layer[0].answer is not None and ANSWERS  # structured answers, as the runner records them

    out = io.StringIO()
    paradigm_report([record], tables="1", console=Console(file=out, width=160), errors=Console(file=io.StringIO()))
    text = out.getvalue()
    assert "Table 4: reader ablation" in text and "other-reader" in text
    table4 = text[text.index("Table 4: reader ablation"):].splitlines()
    rows = {line.split()[0]: line.split()[1:] for line in table4 if line.startswith(("naive_rag", "full_context"))}
    assert rows == {"full_context": ["75.0", "75.0"], "naive_rag": ["75.0", "50.0"]}
    assert "Spearman ρ = –, Kendall τ = – over 2 systems" in text   # the run's reader ties them: no order
    # Resumed: nothing is asked again.
    again = asyncio.run(ablate_reader(record, OTHER, _config(), backend_factory=lambda spec: weak))
    assert again.answered == 0 and again.already == 8


def test_rank_correlations() -> None:
    assert spearman([0.9, 0.7, 0.5], [0.8, 0.6, 0.4]) == pytest.approx(1.0)
    assert spearman([0.9, 0.7, 0.5], [0.4, 0.6, 0.8]) == pytest.approx(-1.0)
    assert spearman([0.5, 0.5], [0.1, 0.9]) is None
