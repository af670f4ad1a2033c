"""Rich renderings of engine objects for the detail panes: an event, an LLM call, a store item.

Plain functions from engine data to lists of Rich ``Text`` lines, so screens stay about layout and
keys, and a rendering can be tested without an app.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
from rich.text import Text

from memprobe_engine.events.llm import LLMCall
from memprobe_engine.events.union import AnyEvent
from memprobe_engine.replay import LLMCallView, describe, detail_lines
from memprobe_engine.replay.memory_view import item_links
from memprobe_engine.replay.textdiff import Piece, item_changes
from memprobe_tui.timefmt import duration, local_time

Lines = list[Text]
_ENVELOPE = ("seq:", "kind:", "time:", "span_id:", "parent_span_id:", "unit:", "user_id:", "system:", "dimension:")


def heading(text: str) -> Text:
    return Text(text, style="bold underline")


def field(name: str, value: object, style: str = "") -> Text:
    text = Text()
    text.append(f"{name}: ", style="bold")
    text.append(value if isinstance(value, str) else orjson.dumps(value).decode(), style=style)
    return text


def pretty(value: object) -> Text:
    return Text(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode())


def event_detail(event: AnyEvent) -> Lines:
    """The full content of one event, the interesting fields first."""
    _, summary = describe(event)
    lines: Lines = [Text(f"{event.kind} · seq {event.seq}", style="bold")]
    if event.kind == "message":
        role = event.role + (f" ({event.feedback_type}{', done' if event.is_done else ''})" if event.feedback_type else "")
        lines += [Text(role, style="bold"), Text(event.content)]
    elif event.kind == "retrieval":
        lines += [field("purpose", event.purpose or "search"), field("query", event.query), field("k", event.k)]
        scores = list(event.scores) + [None] * len(event.item_ids)
        lines += [Text(f"  {i}  {'' if s is None else f'{s:.3f}'}", style="magenta")
                  for i, s in zip(event.item_ids, scores)] or [Text("  (nothing returned)", style="dim")]
        lines.append(Text("m: the store at this step shows these items", style="dim"))
    elif event.kind == "memory_op":
        lines += [field("op", event.op, "green"), field("items", ", ".join(event.item_ids) or "—")]
        if event.note:
            lines.append(field("note", event.note))
        lines.append(heading("patch"))
        for op in event.patch:  # each change with the value it wrote (an update's new text, not only its path)
            value = op.get("value")
            head = Text(f"{op['op']:<7} {op['path']}", style="green")
            if "value" in op and not isinstance(value, (dict, list)):
                head.append(" = ", style="dim")
                head.append(value if isinstance(value, str) else orjson.dumps(value).decode())
            lines.append(head)
            if isinstance(value, (dict, list)):
                lines.append(pretty(value))
    elif event.kind == "llm_call":
        lines += [Text(summary), field("request", event.request_hash)]
        if (why := cut_off(event)) is not None:
            lines.append(Text(f"⚠ {why}", style="bold yellow"))
        if event.response_text:
            lines += [heading("response"), Text(event.response_text)]
        if event.error:
            lines.append(field("error", event.error, "bold red"))
        lines.append(Text("Enter: full request, params and retries", style="dim"))
    else:
        lines += [Text(line) for line in detail_lines(event) if not line.startswith(_ENVELOPE)]
    # Where the event sits comes last: the title bar already says which user, system and step.
    lines.append(Text(f"span {event.span_id} ← {event.parent_span_id} · {local_time(event.time)}", style="dim"))
    return lines


def cut_off(event: LLMCall) -> str | None:
    """Why a reply looks cut off by max_tokens, or None: the backend said ``length``, or (when it
    said nothing) the completion used the whole max_tokens budget."""
    reason = event.finish_reason
    if reason == "length":
        return "cut off by max_tokens (finish reason: length)"
    limit = (event.params or {}).get("max_tokens")
    if reason is None and isinstance(limit, int) and limit > 0 and event.usage.completion_tokens >= limit:
        return f"probably cut off: used all {limit} max_tokens (the backend gave no finish reason)"
    return None


def call_detail(view: LLMCallView) -> Lines:
    """Everything recorded about an LLM call, request resolved from payloads."""
    e = view.event
    usage = f"{e.usage.prompt_tokens} prompt + {e.usage.completion_tokens} completion tokens"
    if e.usage.cached_prompt_tokens:
        usage += (f" · {e.usage.cached_prompt_tokens} of the prompt served from the server's prefix cache, "
                  f"{max(0, e.usage.prompt_tokens - e.usage.cached_prompt_tokens)} evaluated")
    finish = getattr(e, "finish_reason", None)
    lines: Lines = [field("role", e.role), field("model", f"{e.model} ({e.backend})"), field("tokens", usage),
                    field("finish reason", finish or "not reported"),
                    field("time", f"{local_time(e.time)} · latency {duration(e.latency_s)}"),
                    field("cache hit", "yes" if e.cache_hit else "no", "green" if e.cache_hit else ""),
                    field("request hash", e.request_hash), field("params", e.params)]
    if e.replica:
        lines.append(field("replica", e.replica))
    if e.retries:
        lines.append(heading(f"retries ({len(e.retries)})"))
        lines += [Text(f"  attempt {r.attempt}: {r.error} (waited {r.wait_s:g} s)", style="yellow") for r in e.retries]
    if e.repairs:
        lines.append(field("structured-output repairs", e.repairs, "yellow"))
    if e.error:
        lines.append(field("error", e.error, "bold red"))
    if e.excluded:
        lines.append(field("excluded", e.excluded, "bold yellow"))
    lines.append(heading(f"request ({len(view.messages)} messages)"))
    for message in view.messages:
        ref = f"  [payload {message.ref[:19]}…]" if message.ref else ""
        lines += [Text(f"── {message.role}{ref}", style="bold cyan"), Text(message.content)]
    if view.schema is not None:
        lines += [heading("response schema"), pretty(view.schema)]
    lines.append(heading("response"))
    if (why := cut_off(e)) is not None:
        lines.append(Text(f"⚠ {why}", style="bold yellow"))
    lines.append(Text(e.response_text or "(no text)"))
    if e.parsed is not None:
        lines += [heading("parsed"), pretty(e.parsed)]
    if view.missing:
        lines.append(Text(f"missing payloads: {', '.join(view.missing)}", style="bold red"))
    return lines


DIFF_STYLES = {"same": "", "old": "red strike", "new": "bold green underline"}
#: Git's word-diff marks around removed and added words: the difference survives NO_COLOR, a
#: monochrome terminal, copy and export (styles alone left exports with old and new words interleaved).
DIFF_MARKS = {"same": ("", ""), "old": ("[-", "-]"), "new": ("{+", "+}")}


def diff_text(pieces: list[Piece]) -> Text:
    """Word pieces as ``kept [-removed-]{+added+}``, marks styled with their words, spacing kept outside."""
    text = Text()
    for kind, piece in pieces:
        opening, closing = DIFF_MARKS[kind]
        words = piece.rstrip() if closing else piece
        if closing and not words:  # a change of spacing alone: nothing to mark
            text.append(piece)
            continue
        text.append(f"{opening}{words}{closing}", style=DIFF_STYLES[kind])
        if closing:
            text.append(piece[len(words):])
    return text


def diff_lines(before: dict[str, Any] | None, after: dict[str, Any] | None) -> Lines:
    """An update as old → new per changed field: removed words as ``[-…-]``, added as ``{+…+}``."""
    lines: Lines = [heading("old → new ([-removed-] {+added+})")]
    for change in item_changes(before, after):
        text = Text()
        text.append(f"{change.name}: ", style="bold")
        lines.append(text.append_text(diff_text(change.pieces())))
    return lines


def item_detail(item_id: str, item: dict[str, Any] | None, mark: str, history: list[Any] | None,
                before: dict[str, Any] | None = None, step_of: Callable[[int], str] | None = None) -> Lines:
    """An item's native fields (an update's old → new first), the items it links to, and the ops
    that touched it."""
    if item is None:
        return [Text(f"{item_id}: not in the store at this step", style="dim")]
    state = {"+": " — added at this step", "~": " — updated at this step", "-": " — deleted at this step"}
    lines: Lines = [Text(f"{item_id}{state.get(mark, '')}", style="bold")]
    if mark == "~":
        lines += diff_lines(before, item)
        lines.append(heading("fields now"))
    lines += [field(k, v) for k, v in item.items() if k != "id"]
    if isinstance(item.get("task_index"), int):  # the store's own count from 0, beside steps counted from 1
        lines.append(Text(f"  task_index {item['task_index']} is the store's own count from 0: task "
                          f"T{item['task_index'] + 1} in the steps", style="dim"))
    links = item_links(item)
    if links:
        lines.append(field("links", " → ".join(links), "cyan"))
    if history is None:
        lines.append(Text("history: loading…", style="dim"))
    else:
        lines.append(heading(f"history ({len(history)} ops since the last reset, by the step that made each)"))
        for ev in history:
            where = step_of(ev.seq) if step_of is not None else ""
            note = getattr(ev, "note", None) or ""  # a snapshot (an import's final store) has no note
            lines.append(Text(f"  {where:<10} {getattr(ev, 'op', ev.kind):<8} seq {ev.seq:<7} {note}"))
    return lines
