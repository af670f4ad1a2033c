"""What an import could not take over cleanly, collected instead of raised.

A public release is messy: a run may be missing or cut short, one JSON file may be malformed, a
retrieve twin may be absent. An import never stops at such a file; it keeps what it can and records
one :class:`ImportProblem` naming the file (relative to the release root) and what was left out.
Problems travel between processes as plain dicts, so a worker's log pickles cheaply.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import orjson

Level = Literal["error", "warning", "notice"]
#: error: a file could not be read and its content is missing from the import; warning: content was
#: imported but is incomplete or inconsistent; notice: a documented deviation (e.g. a relaxed rule).
LEVELS: tuple[Level, ...] = ("error", "warning", "notice")


@dataclass(frozen=True)
class ImportProblem:
    """One problem: the release file it concerns, the run and user when known, and what happened."""

    level: Level
    file: str
    message: str
    run: str | None = None
    user_id: str | None = None

    def __str__(self) -> str:
        where = " ".join(part for part in (self.run, self.user_id) if part)
        return f"[{self.level}] {self.file}: {self.message}" + (f" ({where})" if where else "")


class ProblemLog:
    """Collects problems in order; ``run`` and ``user_id`` default to the log's current context."""

    def __init__(self, run: str | None = None) -> None:
        self.run = run
        self.items: list[ImportProblem] = []

    def add(self, level: Level, file: str, message: str, *, user_id: str | None = None,
            run: str | None = None) -> None:
        """Record one problem."""
        self.items.append(ImportProblem(level=level, file=file, message=message, run=run or self.run,
                                        user_id=user_id))

    def extend(self, problems: Iterable[ImportProblem]) -> None:
        self.items.extend(problems)

    def as_dicts(self) -> list[dict[str, Any]]:
        return [asdict(p) for p in self.items]


def from_dicts(rows: Iterable[dict[str, Any]]) -> list[ImportProblem]:
    """Problems back from their plain-dict form (as a worker process returns them)."""
    return [ImportProblem(**row) for row in rows]


def dedupe(problems: Iterable[ImportProblem]) -> list[ImportProblem]:
    """Drop exact repeats (a shared file, e.g. the stage-0 cache, is read once per run), keep order."""
    return list(dict.fromkeys(problems))


def count_levels(problems: Iterable[ImportProblem]) -> dict[str, int]:
    counts: dict[str, int] = {level: 0 for level in LEVELS}
    for problem in problems:
        counts[problem.level] += 1
    return counts


def write_report(path: Path, report: dict[str, Any]) -> None:
    """Write the import report as indented JSON (atomically: a reader never sees half a file)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS))
    tmp.replace(path)
