"""The reader's batched reads serve exactly the bytes of its one-line reads, whatever the batching."""

from __future__ import annotations

from pathlib import Path

import pytest

from memprobe_engine.events import reader as reader_module
from memprobe_engine.events.reader import open_recording

RUN = Path(__file__).resolve().parents[1] / "fixtures" / "tui" / "run"


@pytest.mark.parametrize(("gap", "most", "chunk"), [(64 << 10, 1 << 20, 65_536), (0, 1 << 20, 7), (300, 700, 3),
                                                    (1, 1, 1)])
def test_raw_lines_match_raw_for_dense_sparse_and_oversized_batches(monkeypatch: pytest.MonkeyPatch, gap: int,
                                                                       most: int, chunk: int) -> None:
    # Tiny limits force every path: lines read together, lines on their own, lines longer than the
    # buffer, offsets converted in several chunks.
    monkeypatch.setattr(reader_module, "_READ_GAP", gap)
    monkeypatch.setattr(reader_module, "_READ_MAX", most)
    monkeypatch.setattr(reader_module, "_OFFSET_CHUNK", chunk)
    with open_recording(RUN) as reader:
        every = range(len(reader))
        assert list(reader.raw_lines(every)) == [(line, reader.raw(line)) for line in every]
        sparse = [0, 3, 4, 50, len(reader) - 1]
        assert list(reader.raw_lines(sparse)) == [(line, reader.raw(line)) for line in sparse]
        assert list(reader.raw_lines([])) == []


def test_kind_filtered_passes_serve_the_same_events_as_one_line_reads() -> None:
    with open_recording(RUN) as reader:
        batched = [(line, data) for line, data in reader.iter_dicts(["judge_score", "span_begin"])]
        single = [(line, reader.get_dict(line)) for line in range(len(reader))
                  if reader.get_dict(line)["kind"] in ("judge_score", "span_begin")]
        assert batched == single
