"""Protocol A's part of ``memprobe export html``: the report's tables, the index of every (user,
dimension, system, mode) case, and the why-chain of each ``--case USER:DIM[:SYSTEM]``.

A why-chain holds the hidden target and task, the transcript with its evidence turns, the store the
slot-filler read at the fill with diff marks against the store before the dimension's episode, per
access mode what was retrieved (top-k), the fill, the judge's score and reason, the attribution
stages and label. The queries are the TUI's (``read/dimension.py``, ``replay/``), so the page shows
what the dimension inspector shows; every recorded text goes through ``esc``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memprobe_engine.errors import MemProbeError
from memprobe_engine.report.html_parts import (Capture, HtmlSections, IndexRow, anchor, case_index, cut, esc, pick,
                                                printed_html, score_text)
from memprobe_engine.recovery.read.dimension import DimensionDetail, ModeDetail, dimension_detail
from memprobe_engine.replay.memory_view import StoreView, item_text, step_numbered, store_view
from memprobe_engine.replay.queries import step_messages
from memprobe_engine.replay.session import ReplaySession

#: How a store row's diff mark reads (in text, not only in colour: the page is printable).
MARKS = {"+": ("added", "+ added since the dimension's episode began"),
         "~": ("updated", "~ updated since the dimension's episode began"),
         "-": ("deleted", "- deleted since the dimension's episode began"), " ": ("same", "in the store before it")}
#: The index's columns.
HEAD = ("user", "dimension", "system", "mode", "score", "attribution")


def transcript(session: ReplaySession, detail: DimensionDetail) -> str:
    """The dimension's episode, turn by turn; the evidence turns are marked."""
    if detail.episode is None:
        return "<p class='note'>No episode of this dimension is recorded.</p>"
    evidence = {(t.turn, t.text) for t in detail.evidence_turns}
    rows = []
    for step in detail.episode.steps:
        for role, text in step_messages(session, step):
            hit = (step.turn, text) in evidence
            rows.append(f"<div class='msg {esc(role)}{' evidence' if hit else ''}'><span class='who'>"
                        f"{esc(step.label)} · {esc(role)}{' · evidence' if hit else ''}</span>"
                        f"<div class='text'>{esc(text)}</div></div>")
    ended = f"ended: {esc(detail.episode.end_reason or detail.episode.status or '?')}, {detail.episode.turns} turn(s)"
    return "".join(rows) + f"<p class='note'>{ended}</p>" if rows else "<p class='note'>No messages recorded.</p>"


def shown_text(item: dict[str, Any]) -> str:
    """An item's text as the TUI shows it: a native ``[Task 0]`` named as the steps name that task
    (``[T1 task]``), so the page and the screen number tasks alike; the stored text is unchanged."""
    return step_numbered(item_text(item))


def store_table(view: StoreView, read: set[str]) -> str:
    """The store at the fill: one row per item with its diff mark and whether the top-k returned it."""
    head = (f"<p>{view.size} item(s) at seq {view.after_seq}; against the store before the episode "
            f"(seq {view.before_seq}): {view.added} added, {view.updated} updated, {view.deleted} deleted.</p>")
    if view.note:
        head += f"<p class='note'>{esc(view.note)}</p>"
    rows = []
    for row in sorted(view.rows, key=lambda r: (r.mark == " ", r.item_id)):
        css, label = MARKS.get(row.mark, ("same", row.mark))
        retrieved = " · retrieved" if row.item_id in read else ""
        rows.append(f"<tr class='{css}'><td class='mark'>{esc(row.mark.strip() or '·')}</td>"
                    f"<td class='id'>{esc(row.item_id)}</td><td>{esc(cut(shown_text(row.item)))}"
                    f"<div class='why'>{esc(label)}{esc(retrieved)}</div></td></tr>")
    if not rows:
        return head + "<p class='note'>The store was empty.</p>"
    return head + ("<table class='store'><thead><tr><th>±</th><th>item</th><th>content</th></tr></thead><tbody>"
                   + "".join(rows) + "</tbody></table>")


def mode_section(mode: ModeDetail) -> str:
    """One access mode: retrieval, fill, judge, attribution."""
    parts = [f"<h4>{esc(mode.mode)}</h4>"]
    if mode.retrieval is not None:
        parts.append(f"<p><b>Query</b> (k={mode.retrieval.k}): {esc(mode.retrieval.query)}</p>")
    if mode.retrieved:
        items = "".join(f"<li><span class='id'>{esc(item_id)}</span> <span class='num'>{score_text(score)}</span> "
                        f"{esc(cut(shown_text(item)) if item else '(not in the rebuilt store)')}</li>"
                        for item_id, score, item in mode.retrieved)
        title = "Top-k retrieved" if mode.mode == "retrieve" else "Read by the slot-filler (the whole store)"
        parts.append(f"<p><b>{title}</b> ({len(mode.retrieved)}):</p><ol class='topk'>{items}</ol>")
    fill = mode.slot_fill
    if fill is not None:
        flags = "".join(f" <span class='flag'>{esc(f)}</span>" for f in (
            f"excluded: {fill.excluded}" if fill.excluded else "", "overflow" if fill.overflow else "") if f)
        parts.append(f"<p><b>Fill</b>: <q>{esc(fill.label)}</q>{flags}</p>"
                     f"<p class='reason'>{esc(fill.reason)}</p>")
    judge = mode.judge
    if judge is not None:
        parts.append(f"<p><b>Judge</b>: score <span class='num'>{score_text(judge.score)}</span>"
                     f"{' (' + esc(judge.judge) + ')' if judge.judge else ''}"
                     f"{' excluded: ' + esc(judge.excluded) if judge.excluded else ''}</p>"
                     f"<p class='reason'>{esc(judge.reason)}</p>")
    if mode.pair is not None and mode.pair.latest is not None:
        parts.append(f"<p><b>Re-scored</b> ({mode.pair.rescores}×): <span class='num'>"
                     f"{score_text(mode.pair.latest.score)}</span></p><p class='reason'>{esc(mode.rescore_reason)}</p>")
    stages = mode.rescore_stages or mode.stages
    if stages:
        rows = "".join(f"<tr><td>{esc(s.stage)}</td><td>{esc(s.verdict)}</td><td>{esc(s.evidence)}</td>"
                       f"<td>{esc(s.reason)}</td></tr>" for s in stages)
        parts.append("<table class='stages'><thead><tr><th>stage</th><th>verdict</th><th>evidence</th>"
                     f"<th>reason</th></tr></thead><tbody>{rows}</tbody></table>")
    if mode.label is not None:
        parts.append(f"<p><b>Attribution</b>: <span class='label'>{esc(mode.label.label)}</span></p>")
    return "<section class='mode'>" + "".join(parts) + "</section>"


def case_section(session: ReplaySession, detail: DimensionDetail, view: StoreView | None) -> str:
    """The whole why-chain of one case."""
    parts = [f"<section class='case' id='{esc(anchor(detail.user_id, detail.system, detail.dimension))}'>"
             f"<h3>{esc(detail.user_id)} × {esc(detail.system)} · "
             f"{esc(detail.dimension)} <span class='cat'>({esc(detail.category)})</span></h3>"]
    if detail.target is not None:
        parts.append(f"<p><b>Hidden target</b>: <q>{esc(detail.target.short)}</q></p>"
                     f"<p class='reason'>{esc(detail.target.explanation)}</p>")
    elif detail.target_note:
        parts.append(f"<p class='note'>{esc(detail.target_note)}</p>")
    if detail.task:
        parts.append(f"<p><b>Task</b>: {esc(detail.task)}</p>")
    parts.append("<h4>Transcript</h4>" + transcript(session, detail))
    if view is not None:
        read = {item_id for m in detail.modes.values() for item_id, _, _ in m.retrieved if m.mode == "retrieve"}
        parts.append(f"<h4>Store at the fill (seq {view.after_seq})</h4>" + store_table(view, read))
    for name in ("dump_all", "retrieve"):
        if name in detail.modes:
            parts.append(mode_section(detail.modes[name]))
    for name, mode in detail.modes.items():
        if name not in ("dump_all", "retrieve"):
            parts.append(mode_section(mode))
    return "".join(parts) + "</section>"


def _chain(session: ReplaySession, user: str, dimension: str, system: str) -> str:
    detail = dimension_detail(session, user, system, dimension)
    view = None
    if detail.fill_seq is not None:
        first = detail.episode.steps[0].first_line if detail.episode and detail.episode.steps else None
        start = session.event_or_none(first) if first is not None else None
        try:
            view = store_view(session, user, system, detail.fill_seq, (start.seq - 1) if start is not None else -1)
        except MemProbeError:
            view = None
    return case_section(session, detail, view)


def _parse(spec: str) -> tuple[str, str, str | None] | None:
    parts = spec.split(":")
    if len(parts) < 2 or len(parts) > 3 or not parts[1]:
        return None
    return parts[0], parts[1], parts[2] if len(parts) > 2 else None


def html_sections(session: ReplaySession, cases: Sequence[str]) -> HtmlSections:
    """The page's protocol-A part for the recording open in ``session`` (its index built)."""
    from memprobe_engine.recovery.read.frames import load_frames
    from memprobe_engine.recovery.read.render import print_tables
    from memprobe_engine.recovery.read.tables import build_tables

    frames = load_frames([session.directory])
    capture = Capture()
    print_tables(build_tables(frames), capture)
    labels = {(r["user_id"], r["system"], r["dimension"], r["mode"]): str(r["label"])
              for r in frames.attribution.to_dict("records")}
    rows = [IndexRow(str(r["user_id"]), str(r["dimension"]), str(r["system"]),
                     None if r["score"] != r["score"] else float(r["score"]),
                     labels.get((r["user_id"], r["system"], r["dimension"], r["mode"]), str(r["excluded"] or "")),
                     tuple(esc(str(r[k])) for k in ("user_id", "dimension", "system", "mode")), link=1)
            for r in frames.scores.to_dict("records")]
    known = sorted({(row.unit, row.dimension, row.system) for row in rows})
    example = f"{known[0][0]}:{known[0][1]}" if known else "user_001:dim"
    picked = pick(cases, known, _parse, "USER:DIM or USER:DIM:SYSTEM", example)
    return HtmlSections(printed_html(capture), case_index(HEAD, rows, set(picked)),
                        [_chain(session, unit, dimension, system) for unit, dimension, system in picked], "USER:DIM")
