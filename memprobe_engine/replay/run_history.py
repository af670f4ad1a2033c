"""A recording's run history: every run session that wrote to it, in order — the first run, each
resume after a crash or a kill, each re-score appended from the replay — with how it ended. A
resumed recording holds a failed attempt's events before the resume's; this says so."""

from __future__ import annotations

from dataclasses import dataclass

from memprobe_engine.replay.session import ReplaySession


@dataclass(frozen=True)
class Attempt:
    """One run session: its run_start and the run_end that closed it (None: it never closed)."""

    number: int
    first_seq: int
    last_seq: int | None
    started: float | None
    resumed: bool
    note: str | None
    status: str  # the run_end's status; "running" or "no run_end (killed?)" when none closed it
    reason: str | None


def run_history(session: ReplaySession) -> list[Attempt]:
    """The run sessions in recording order (reads one line per run_start)."""
    with session.index.lock:
        starts = list(session.index.events("run_start"))
        ends = list(session.index.events("run_end"))
    out: list[Attempt] = []
    for number, start in enumerate(starts, 1):
        seq = int(start.get("seq", 0))
        following = int(starts[number].get("seq", 0)) if number < len(starts) else None
        end = next((e for e in ends if int(e.get("seq", -1)) > seq and (following is None or e["seq"] < following)),
                   None)
        event = session.event_by_seq(seq)
        status = str(end.get("status")) if end else (
            "running" if following is None and session.writer_alive() else "no run_end (killed?)")
        out.append(Attempt(number, seq, int(end["seq"]) if end else None, event.time if event else None,
                           bool(start.get("resumed")), getattr(event, "note", None), status,
                           end.get("reason") if end else None))
    return out
