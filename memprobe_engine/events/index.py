"""Byte-offset index of ``events.jsonl``: where every complete line starts and ends.

Built by scanning the file through ``mmap`` in fixed-size windows with numpy, releasing each
window's pages after use (``MADV_DONTNEED``) so the reader's resident memory stays a small
fraction of the file. The index can be extended from where it stopped, which is how a reader
follows a recording that a live run is still writing.
"""

from __future__ import annotations

import mmap
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

_WINDOW = 8 << 20  # bytes scanned per step; a multiple of the page size


@dataclass
class LineIndex:
    """``ends[i]`` is the byte offset just past line ``i``'s newline; line ``i`` starts at
    ``ends[i-1]`` (or 0). ``tail_bytes`` counts bytes after the last newline: a torn last line
    while a writer is alive, damage after a crash."""

    ends: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    scanned_to: int = 0
    tail_bytes: int = 0

    def __len__(self) -> int:
        return int(self.ends.shape[0])

    def span(self, line: int) -> tuple[int, int]:
        """(offset, length) of line ``line`` including its newline."""
        start = int(self.ends[line - 1]) if line > 0 else 0
        return start, int(self.ends[line]) - start

    @property
    def complete_end(self) -> int:
        return int(self.ends[-1]) if len(self) else 0


def extend_index(index: LineIndex, path: Path) -> int:
    """Scan bytes from the last complete line to the current end of file; returns new line count."""
    size = os.path.getsize(path) if path.exists() else 0
    start = index.complete_end
    if size <= start:
        index.tail_bytes = 0
        index.scanned_to = size
        return 0
    found: list[np.ndarray] = []
    with open(path, "rb") as handle:
        mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            window_start = start - (start % mmap.PAGESIZE)
            while window_start < size:
                length = min(_WINDOW, size - window_start)
                view = np.frombuffer(mapped, dtype=np.uint8, count=length, offset=window_start)
                hits = np.flatnonzero(view == 10)
                del view
                if hits.size:
                    ends = hits.astype(np.int64) + (window_start + 1)
                    found.append(ends[ends > start])
                if hasattr(mapped, "madvise"):
                    mapped.madvise(mmap.MADV_DONTNEED, window_start, length)
                window_start += length
        finally:
            mapped.close()
    new_ends = np.concatenate(found) if found else np.zeros(0, dtype=np.int64)
    if new_ends.size:
        index.ends = np.concatenate([index.ends, new_ends]) if len(index) else new_ends
    index.scanned_to = size
    index.tail_bytes = size - index.complete_end
    return int(new_ends.size)
