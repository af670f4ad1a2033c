"""Rich rendering of a dimension's detail: target, task, evidence turns, and per access mode the
retrieval, slot-fill, judge score (original beside the latest re-score or live re-run) and the
attribution stages."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from memprobe_engine.recovery.read import DimensionDetail, ModeDetail
from memprobe_engine.recovery.read.why import WhyChain
from memprobe_engine.replay import one_line
from memprobe_engine.replay.memory_view import item_text, step_numbered
from memprobe_engine.replay.queries import turn_short
from memprobe_tui.recovery.render_why import why_lines
from memprobe_tui.render import Lines, field, heading

_VERDICT_STYLE = {"ok": "green", "disclosed": "yellow", "memory_failure": "bold red", "can_invite": "green",
                  "cannot_invite": "red", "task_design_failure": "red", "excluded": "dim"}


def _score(value: float | None) -> str:
    return "excluded" if value is None else f"{value:g}"


def score_line(mode: ModeDetail, live: dict[str, Any] | None) -> Text:
    """``original → latest re-score → live re-run`` as far as they exist."""
    text = Text()
    text.append("judge: ", style="bold")
    original = mode.judge.score if mode.judge is not None else (
        mode.pair.original.score if mode.pair and mode.pair.original else None)
    text.append(_score(original), style="bold")
    if mode.pair and mode.pair.latest is not None:
        text.append(f"   re-score ({mode.pair.rescores}): ", style="cyan")
        text.append(_score(mode.pair.latest.score), style="bold cyan")
    if live is not None:
        text.append("   re-run: ", style="magenta")
        text.append(_score(live.get("score")), style="bold magenta")
    return text


#: Items of a dump_all read listed in the inspector; the rest are one `m` away (the store at fill time).
READ_SHOWN = 12


def judge_call(detail: DimensionDetail) -> tuple[int, str] | None:
    """The call ``c`` opens: the recovery judge's, else (a rubric scored it: no judge call) the
    slot-filler's, else any call of the dimension."""
    calls = [c for m in detail.modes.values() for c in m.calls]
    for role in ("recovery_judge", "slot_filler"):
        found = next((c for c in calls if c[1] == role), None)
        if found is not None:
            return found
    return calls[0] if calls else None


def _fill_text(mode: ModeDetail) -> str:
    fill = mode.slot_fill
    if fill is None:
        return "no slot-fill"
    return f"“{one_line(fill.label, 24)}”" if fill.label is not None else f"— ({one_line(fill.excluded or 'none', 24)})"


def answer_lines(detail: DimensionDetail, why: WhyChain | None = None, width: int = 80) -> Lines:
    """The answer first: the why-chain per mode once read (before: per mode the fill, the judge's
    score and the attribution with its stages)."""
    lines: Lines = why_lines(why, width) if why is not None else [
        heading("why (per mode: the fill, judge score → attribution [its stages])")]
    for name, mode in (detail.modes.items() if why is None else []):
        original = mode.judge.score if mode.judge is not None else (
            mode.pair.original.score if mode.pair and mode.pair.original else None)
        text = Text(f" {name:<8} ", style="bold")  # one line at 80 columns: fill, score, label, stages
        text.append(f"{_fill_text(mode)} judge {_score(original)}")
        if mode.label is not None:
            text.append(" → ")
            text.append(mode.label.label, style=_VERDICT_STYLE.get(mode.label.label, "yellow"))
        stages = ", ".join(f"s{s.stage} {s.verdict}" for s in mode.stages)
        if stages:
            text.append(f" [{stages}]", style="dim")
        lines.append(text)
    keys = []
    if detail.fill_seq is not None:
        keys.append(f"m store at fill (seq {detail.fill_seq})")
    if detail.evidence_turns:
        keys.append("e evidence")
    if detail.episode is not None:
        keys.append("t task")
    if (call := judge_call(detail)) is not None:
        keys.append(f"c {'judge' if call[1] == 'recovery_judge' else call[1].replace('_', '-')} call #{call[0]}")
    if keys:
        lines.append(Text(" " + " · ".join(keys), style="dim"))
    return lines


def _read_lines(detail: DimensionDetail | None, mode: ModeDetail, relevant: list[str] | None = None) -> Lines:
    lines: Lines = []
    written = detail.written if detail is not None else {}
    read = mode.retrieved
    if mode.mode == "dump_all":
        first = f", the {len(relevant)} that hold the trait first (★)" if relevant else ""
        lines.append(field("read", f"the whole store: {len(read)} items{first} (written at: step)"))
        if relevant:  # the relevant items, not the first in id order
            at = {item_id: i for i, item_id in enumerate(relevant)}
            read = sorted(read, key=lambda r: at.get(r[0], len(at)))
    wanted = set(relevant or [])
    for rank, (item_id, score, item) in enumerate(read):
        if mode.mode == "dump_all" and rank == READ_SHOWN:
            lines.append(Text(f"  … {len(mode.retrieved) - READ_SHOWN} more: m lists them all", style="dim"))
            break
        shown = one_line(step_numbered(item_text(item)), 90) if item else "(not in the rebuilt store)"
        where = written.get(item_id, "")
        star = "★" if item_id in wanted else " "
        lines.append(Text(f" {star}{item_id} {'' if score is None else f'{score:.3f} '}[{where}]  {shown}",
                          style="magenta"))
    return lines


def mode_lines(mode: ModeDetail, live: dict[str, Any] | None, detail: DimensionDetail | None = None,
               relevant: list[str] | None = None) -> Lines:
    lines: Lines = [heading(f"{mode.mode}{' (full store)' if mode.mode == 'dump_all' else ' (top-k)'}")]
    if mode.retrieval is not None:
        lines.append(field("query", one_line(mode.retrieval.query, 120)))
    lines += _read_lines(detail, mode, relevant)
    fill = mode.slot_fill
    if fill is not None:
        label = fill.label if fill.label is not None else f"— ({fill.excluded or 'no prediction'})"
        lines.append(field("slot-fill", label, "bold"))
        if fill.reason:
            lines.append(Text("  " + fill.reason, style="dim"))
        if fill.overflow:
            lines.append(Text("  store overflowed the reader's context: diagnostic, not a comparable score",
                              style="yellow"))
    lines.append(score_line(mode, live))
    if mode.judge is not None and mode.judge.reason:
        lines.append(Text("  " + mode.judge.reason, style="dim"))
    if mode.rescore_reason:
        lines.append(Text("  re-score: " + mode.rescore_reason, style="cyan"))
    if live and live.get("reason"):
        lines.append(Text("  re-run: " + str(live["reason"]), style="magenta"))
    for stage in mode.stages:
        text = Text(f"  stage {stage.stage}: ")
        text.append(stage.verdict, style=_VERDICT_STYLE.get(stage.verdict, "yellow"))
        if stage.cached:
            text.append(" (cached)", style="dim")
        if stage.reason:
            text.append(f" — {stage.reason}", style="dim")
        lines.append(text)
    for stage in mode.rescore_stages:
        text = Text(f"  re-score stage {stage.stage}: ", style="cyan")
        text.append(stage.verdict, style=_VERDICT_STYLE.get(stage.verdict, "yellow"))
        if stage.reason:
            text.append(f" — {stage.reason}", style="dim")
        lines.append(text)
    for stage in (live or {}).get("stages", []):
        lines.append(Text(f"  re-run stage {stage[0]}: {stage[1]}", style="magenta"))
    if mode.label is not None:
        lines.append(field("attribution", mode.label.label, _VERDICT_STYLE.get(mode.label.label, "yellow")))
    if mode.calls:
        lines.append(Text(f"  LLM calls: {', '.join(f'{role} #{seq}' for seq, role in mode.calls)}", style="dim"))
    return lines


def dimension_lines(detail: DimensionDetail, live: dict[str, dict[str, Any]], why: WhyChain | None = None,
                    width: int = 80) -> Lines:
    """The whole inspector text; ``live`` holds per-mode results of a re-run in progress, ``why`` the
    why-chain once read."""
    lines: Lines = [*answer_lines(detail, why, width), heading("target")] if detail.modes else [heading("target")]
    if detail.target is not None:
        lines += [Text(detail.target.short, style="bold green"), Text(detail.target.explanation)]
    else:
        lines.append(Text(detail.target_note or "hidden target not available", style="yellow"))
        lines.append(Text("The recovery judge's prompt holds the target: c opens that call.", style="dim"))
    lines += [heading("task"), Text(detail.task or "(task not found in the recording)")]
    source = f" (matched on {detail.evidence_source})" if detail.evidence_source else ""
    lines.append(heading(f"evidence turns{source}"))
    if detail.evidence:
        lines.append(Text(f"stage 1 evidence: “{one_line(detail.evidence, 200)}”", style="italic"))
    if detail.evidence_turns:
        for ev in detail.evidence_turns:
            where = turn_short(ev.task_index, ev.turn)  # as the step list and the why chain name it
            lines.append(Text(f"  {where} {ev.role}: {one_line(ev.text, 110)}", style="cyan"))
        lines.append(Text("  e: open the first of these turns in the transcript", style="dim"))
    else:
        lines.append(Text("  no turn carries it", style="dim"))
    for name in ("dump_all", "retrieve"):
        if name in detail.modes:
            lines += mode_lines(detail.modes[name], live.get(name), detail, why.relevant if why else None)
    for name, mode in detail.modes.items():
        if name not in ("dump_all", "retrieve"):
            lines += mode_lines(mode, live.get(name), detail, why.relevant if why else None)
    if not detail.modes:
        lines.append(Text("not scored yet", style="dim"))
    return lines
