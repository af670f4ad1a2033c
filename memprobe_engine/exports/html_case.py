"""The why-chain of one case as HTML: for protocol A one (user, system, dimension) — the hidden
target and task, the transcript with its evidence turns, the store the slot-filler read at the fill
with diff marks against the store before the dimension's episode, per access mode what was retrieved
(top-k), the fill, the judge's score and reason, the attribution stages and label; for protocol B
one (episode, system) — its probes with the question, what the reader saw, the answer and the score.

Every recorded text is untrusted (a user's words, a model's output, item fields) and goes through
:func:`esc` — the only way text enters the page. The queries are the TUI's (``replay/``), so the
page shows what the dimension inspector shows.
"""

from __future__ import annotations

import html

import orjson

from memprobe_engine.events.paradigms import ProbeAnswer, ProbeScore
from memprobe_engine.recovery.read.dimension import DimensionDetail, ModeDetail
from memprobe_engine.replay.memory_view import StoreView, item_text
from memprobe_engine.replay.queries import step_messages
from memprobe_engine.replay.session import ReplaySession

#: How a store row's diff mark reads (in text, not only in colour: the page is printable).
MARKS = {"+": ("added", "+ added since the dimension's episode began"),
         "~": ("updated", "~ updated since the dimension's episode began"),
         "-": ("deleted", "- deleted since the dimension's episode began"), " ": ("same", "in the store before it")}
#: Longest item text shown in full; longer ones are cut with a note (the recording has all of it).
ITEM_CHARS = 1200


def esc(value: object) -> str:
    """``value`` as HTML text: every ``<``, ``&``, quote escaped."""
    return html.escape("" if value is None else str(value), quote=True)


def _score(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def _cut(text: str) -> str:
    return text if len(text) <= ITEM_CHARS else f"{text[:ITEM_CHARS]}… ({len(text) - ITEM_CHARS:,} more characters)"


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
                    f"<td class='id'>{esc(row.item_id)}</td><td>{esc(_cut(item_text(row.item)))}"
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
        items = "".join(f"<li><span class='id'>{esc(item_id)}</span> <span class='num'>{_score(score)}</span> "
                        f"{esc(_cut(item_text(item)) if item else '(not in the rebuilt store)')}</li>"
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
        parts.append(f"<p><b>Judge</b>: score <span class='num'>{_score(judge.score)}</span>"
                     f"{' (' + esc(judge.judge) + ')' if judge.judge else ''}"
                     f"{' excluded: ' + esc(judge.excluded) if judge.excluded else ''}</p>"
                     f"<p class='reason'>{esc(judge.reason)}</p>")
    if mode.pair is not None and mode.pair.latest is not None:
        parts.append(f"<p><b>Re-scored</b> ({mode.pair.rescores}×): <span class='num'>"
                     f"{_score(mode.pair.latest.score)}</span></p><p class='reason'>{esc(mode.rescore_reason)}</p>")
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
    """The whole why-chain of one protocol-A case."""
    anchor = f"case-{detail.user_id}-{detail.system}-{detail.dimension}"
    parts = [f"<section class='case' id='{esc(anchor)}'><h3>{esc(detail.user_id)} × {esc(detail.system)} · "
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


def probe_section(episode: str, system: str, answers: list[ProbeAnswer], scores: dict[int, ProbeScore]) -> str:
    """A protocol-B (episode, system): its probes, what the reader saw, answered and scored."""
    parts = [f"<section class='case' id='{esc(f'case-{episode}-{system}')}'><h3>{esc(episode)} × {esc(system)}</h3>"]
    for answer in answers:
        seen = "".join(f"<li><span class='id'>{esc(r.id)}</span> <span class='num'>{_score(r.score)}</span> "
                       f"{esc(_cut(r.text))}</li>" for r in answer.retrieved)
        text = answer.answer_text if answer.answer_text is not None else (
            orjson.dumps(answer.answer).decode() if answer.answer is not None else "")
        score = scores.get(answer.probe_index)
        verdict = (f"<p><b>Score</b>: <span class='num'>{_score(score.score)}</span>"
                   f"{' excluded: ' + esc(score.exclusion_reason) if score.excluded else ''}</p>"
                   f"<p class='reason'>{esc(score.reason)}</p>") if score is not None else \
            "<p class='note'>not scored</p>"
        error = f"<p class='flag'>error: {esc(answer.error)}</p>" if answer.error else ""
        parts.append(f"<section class='mode'><h4>probe {answer.probe_index}: {esc(answer.probe_type)}</h4>"
                     f"<p><b>Question</b>: {esc(answer.question)}</p>"
                     + (f"<p><b>The reader saw</b> ({len(answer.retrieved)}):</p><ol class='topk'>{seen}</ol>"
                        if seen else "")
                     + f"<p><b>Answer</b>: <q>{esc(text)}</q></p>{error}{verdict}</section>")
    return "".join(parts) + "</section>"
