"""Rich renderings of protocol-B replay data: a session's dialogue and store change, a probe's gold
beside its answer, and its scores (original, latest re-score, live re-run) with sub-scores and reasons.

Plain functions from engine data to lists of Rich ``Text`` lines, like ``render.py``, so screens stay
about layout and keys and a rendering can be tested without an app.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text

from memprobe_engine.events.paradigms import ProbeAnswer
from memprobe_engine.paradigms.read.ingest import SessionDetail
from memprobe_engine.paradigms.read.probe import ProbeDetail
from memprobe_engine.replay import one_line
from memprobe_tui.render import Lines, field, heading

ROLE_STYLES = {"user": "bold cyan", "assistant": "bold green", "tool_output": "bold magenta"}
PHASE_STYLES = {"encoding": "green", "perturbation": "bold yellow", "filler": "", "post_perturbation": "cyan"}

#: The structured-gold fields that matter for each probe type, in the order they are compared.
GOLD_FIELDS: dict[str, tuple[str, ...]] = {
    "current_value": ("current_value",),
    "previous_value": ("previous_value", "original_value"),
    "change_detection": ("has_changed", "current_value", "previous_value"),
    "source": ("source_of_change", "invalid_sources", "has_changed"),
    "conflict_value": ("conflict_gold", "current_value"),
    "temporal": ("temporal_gold", "has_changed", "previous_value", "current_value", "source_of_change"),
}
#: The reader's answer fields per probe type (the unified reader's JSON schemas), reason last.
ANSWER_FIELDS: dict[str, tuple[str, ...]] = {
    "current_value": ("answer", "reason"),
    "previous_value": ("answer", "reason"),
    "change_detection": ("changed", "current_value", "previous_value", "reason"),
    "source": ("source_description", "source_class", "accepted", "reason"),
    "conflict_value": ("conflict_value_mentioned", "conflict_value", "source_class", "status_class",
                       "applies_to_target", "current_value", "reason"),
    "temporal": ("changed", "old_value", "new_value", "trigger", "reason", "timing"),
}


def score_style(score: float | None) -> str:
    if score is None:
        return "dim"
    return "green" if score >= 0.999 else ("red" if score <= 0.001 else "yellow")


def fmt_score(score: float | None) -> str:
    """``1``, ``0.75``, ``0.5``: partial credit without trailing zeros; ``—`` when there is none."""
    if score is None:
        return "—"
    return f"{score:.2f}".rstrip("0").rstrip(".") if score % 1 else f"{score:.0f}"


def _value(value: object) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}={_value(v)}" for k, v in value.items() if v not in (None, "", []))
    if isinstance(value, list):
        return ", ".join(_value(v) for v in value) or "[]"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return "—" if value is None else str(value)


# -- sessions --------------------------------------------------------------------------------------
def session_lines(detail: SessionDetail) -> Lines:
    """The session header, its dialogue turn by turn, and what the system did while ingesting it."""
    step = detail.step
    head = Text()
    head.append(f"session {step.session_idx}", style="bold")
    head.append(" · ")
    head.append(step.phase, style=PHASE_STYLES.get(step.phase, ""))
    head.append(f" · {step.session_type}")
    if detail.clock:
        head.append(f" · {detail.clock}", style="dim")
    lines: Lines = [head]
    if not detail.ingested:
        lines.append(Text("not ingested yet (no session_ingest event in this span)", style="yellow"))
    for turn in detail.turns:
        text = Text()
        text.append(f"{turn.role}: ", style=ROLE_STYLES.get(turn.role, "bold"))
        text.append(turn.content)
        lines.append(text)
    writes = len(detail.memory_ops)
    calls = f", {len(detail.llm_calls)} LLM calls" if detail.llm_calls else ""
    lines.append(Text(f"{writes} memory ops{calls} while ingesting · m: this store in the memory view",
                      style="dim"))
    return lines


def store_summary(detail: SessionDetail) -> Text:
    """One line over the store table: size after the session and the session's diff."""
    if detail.store_error:
        return Text(f"⚠ {detail.store_error}", style="bold red")
    view = detail.store
    if view is None:
        return Text("no store", style="dim")
    if not view.rows:
        return Text("store empty after this session (this system keeps no memory store)", style="dim")
    text = Text()
    text.append(f"store after S{detail.step.session_idx:02d}: {view.size} items  ", style="bold")
    text.append(f"+{view.added}", style="bold green")
    text.append(f" ~{view.updated}", style="bold yellow")
    text.append(f" -{view.deleted}", style="red")
    text.append(" vs before the session", style="dim")
    return text


# -- probes ----------------------------------------------------------------------------------------
def gold_lines(detail: ProbeDetail) -> Lines:
    """The question and the structured gold (the fields this probe type is scored on)."""
    lines: Lines = [heading("gold")]
    gold = detail.gold
    if gold is None:
        return lines + [Text(detail.gold_note or "gold not available", style="yellow")]
    if gold.expected_behavior:
        lines.append(field("expected", gold.expected_behavior))
    if gold.gold_answer:
        lines.append(field("gold answer", gold.gold_answer, "green"))
    for name in GOLD_FIELDS.get(detail.probe_type, tuple(gold.gold)):
        if name in gold.gold and gold.gold[name] not in (None, [], {}):
            lines.append(field(name, _value(gold.gold[name]), "green"))
    return lines


def answer_lines(answer: ProbeAnswer | None, title: str = "answer") -> Lines:
    """A probe_answer's structured fields (or its free text, or its execution error)."""
    lines: Lines = [heading(title)]
    if answer is None:
        return lines + [Text("no answer recorded", style="dim")]
    if answer.error:
        lines.append(field("error", answer.error, "bold red"))
        lines.append(Text("execution error: excluded from denominators", style="yellow"))
    if answer.answer is not None:
        order = ANSWER_FIELDS.get(answer.probe_type, ())
        names = [n for n in order if n in answer.answer] + [n for n in answer.answer if n not in order]
        lines += [field(name, _value(answer.answer[name]), "dim" if name == "reason" else "bold")
                  for name in names]
    elif answer.answer_text:
        lines.append(Text(answer.answer_text))
    return lines


def _score_block(label: str, score: dict[str, Any] | None, style: str) -> Lines:
    if score is None:
        return []
    text = Text()
    text.append(f"{label}: ", style=f"bold {style}".strip())
    if score.get("excluded"):
        text.append("excluded", style="yellow")
        reason = score.get("exclusion_reason") or score.get("reason")
        return [text, Text(f"  {reason}", style="dim")] if reason else [text]
    value = float(score.get("score", 0.0))
    text.append(fmt_score(value), style=f"bold {score_style(value)}")
    subs = score.get("subscores") or {}
    if subs:
        text.append("  (" + ", ".join(f"{k} {fmt_score(float(v))}" for k, v in subs.items()) + ")")
    version = score.get("scorer_version")
    if version:
        text.append(f"  scorer {version}", style="dim")
    lines = [text]
    if score.get("reason"):
        lines.append(Text("  " + str(score["reason"]), style="dim"))
    return lines


def score_lines(detail: ProbeDetail, live: dict[str, Any] | None) -> Lines:
    """Original score, the latest re-score (with the answer it scored), the live re-run."""
    lines: Lines = [heading("score")]
    unscored = "not scored yet" if detail.layer is None else f"not scored in the layer {detail.layer}"
    lines += _score_block("original", detail.score, "") or [Text(unscored, style="dim")]
    cell = detail.cell
    if cell is not None and cell.latest is not None:
        lines += _score_block(f"re-score ({cell.rescores})", cell.latest, "cyan")
        if detail.rescore_answer is not None and detail.rescore_answer.answer is not None:
            shown = _value({k: v for k, v in detail.rescore_answer.answer.items() if k != "reason"})
            lines.append(Text(f"  re-run answer: {one_line(shown, 160)}", style="cyan"))
    if live:
        if live.get("answer") is not None or live.get("error"):
            shown = live.get("error") or _value({k: v for k, v in (live.get("answer") or {}).items() if k != "reason"})
            lines.append(Text(f"live re-run answer: {one_line(str(shown), 160)}", style="magenta"))
        if "score" in live:
            lines += _score_block("live re-run", live, "magenta")
    return lines


def memory_lines(detail: ProbeDetail) -> Lines:
    """The memory the reader saw (retrieved items, best first) and where its LLM call is."""
    answer = detail.answer
    protocol = answer.input_protocol if answer is not None else "?"
    lines: Lines = [heading(f"memory the reader saw ({protocol})")]
    items = answer.retrieved if answer is not None else []
    for item in items:
        score = "" if item.score is None else f"{item.score:.3f} "
        where = f"[{detail.written[item.id]}] " if item.id in detail.written else ""  # the session that wrote it
        lines.append(Text(f"  {item.id} {score}{where}{one_line(item.text, 150)}", style="magenta"))
    if not items:
        what = {"full_context": "the whole episode (no retrieval)", "oracle_rag": "the gold evidence sessions",
                "heuristic": "none: a heuristic answers by rule, without a reader or a memory"}.get(
                    protocol, "nothing retrieved")
        lines.append(Text(f"  {what}", style="dim"))
    if detail.call_seq is not None:
        lines.append(Text(f"reader LLM call #{detail.call_seq} · c opens it", style="dim"))
    return lines
