"""One-line, plain-text summaries of events for lists, and multi-line details for a detail pane.

Kept in the engine (no styling) so a UI, a log or a test can say what an event was the same way.
"""

from __future__ import annotations

import orjson

from memprobe_engine.events.union import AnyEvent

#: Short tags per kind, used to colour and align event lists.
TAGS: dict[str, str] = {
    "message": "msg", "llm_call": "llm", "embedding": "emb", "memory_op": "mem", "memory_snapshot": "snap",
    "retrieval": "ret", "memory_footprint": "size", "episode_end": "end", "preference_judgment": "pref",
    "slot_fill": "fill", "judge_score": "judge", "attribution_stage": "stage", "attribution_label": "label",
    "error": "ERR", "metric": "metric", "run_start": "run", "run_end": "run", "span_begin": "span",
    "span_end": "span",
}


def one_line(text: str | None, width: int = 200) -> str:
    flat = " ".join((text or "").split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _score(value: float | None) -> str:
    return "—" if value is None else f"{value:g}"


def describe(event: AnyEvent) -> tuple[str, str]:
    """(tag, summary) of one event."""
    kind = event.kind
    tag = TAGS.get(kind, kind)
    if event.kind == "message":
        extra = f" [{event.feedback_type}{', done' if event.is_done else ''}]" if event.feedback_type else ""
        return tag, f"{event.role}{extra}: {one_line(event.content)}"
    if event.kind == "llm_call":
        flags = " cached" if event.cache_hit else ""
        flags += f" {len(event.retries)} retries" if event.retries else ""
        flags += " ERROR" if event.error else (" EXCLUDED" if event.excluded else "")
        return tag, (f"{event.role} · {event.model} · {event.usage.prompt_tokens}+{event.usage.completion_tokens} tok"
                     f" · {event.latency_s:.2f}s{flags}")
    if event.kind == "memory_op":
        ids = ", ".join(event.item_ids[:4]) + ("…" if len(event.item_ids) > 4 else "")
        note = f" — {one_line(event.note, 60)}" if event.note else ""
        return tag, f"{event.op} {ids}{note}".rstrip()
    if event.kind == "memory_snapshot":
        return tag, f"snapshot of {event.n_items} items"
    if event.kind == "retrieval":
        hits = ", ".join(f"{i}({_score(s)})" if s is not None else i
                         for i, s in zip(event.item_ids, list(event.scores) + [None] * len(event.item_ids)))
        return tag, f"{event.purpose or 'search'} k={event.k}: {hits or 'nothing'}"
    if event.kind == "embedding":
        return tag, f"{event.n_texts} texts · {event.model}{' · ' + str(event.cache_hits) + ' cached' if event.cache_hits else ''}"
    if event.kind == "episode_end":
        return tag, f"task {event.task_index + 1} ended: {event.end_reason} after {event.turns} turns"
    if event.kind == "preference_judgment":
        return tag, f"preference {_score(event.mean)}/5" + (f" (excluded: {event.excluded})" if event.excluded else "")
    if event.kind == "slot_fill":
        return tag, f"{event.mode}: {one_line(event.label) if event.label is not None else '—'}" + (
            " (overflow)" if event.overflow else "")
    if event.kind == "judge_score":
        again = f" re-score of #{event.rescore_of}" if event.rescore_of is not None else ""
        return tag, f"{event.mode}: {_score(event.score)}{again}"
    if event.kind == "attribution_stage":
        return tag, f"{event.mode} stage {event.stage}: {event.verdict}{' (cached)' if event.cached else ''}"
    if event.kind == "attribution_label":
        return tag, f"{event.mode}: {event.label}"
    if event.kind == "error":
        return tag, f"{event.where}: {one_line(event.message)}"
    if event.kind == "memory_footprint":
        return tag, f"{event.n_items} items, {event.mean_chars:.0f} chars/item"
    if event.kind == "span_begin":
        return tag, f"begin {event.span_kind} {event.name}"
    if event.kind == "span_end":
        return tag, f"end {event.status}"
    return tag, one_line(orjson.dumps(event.model_dump(exclude_none=True)).decode())


def detail_lines(event: AnyEvent) -> list[str]:
    """Every field of an event, one ``name: value`` per line; long text kept whole."""
    data = event.model_dump(exclude_none=True)
    lines: list[str] = []
    for key, value in data.items():
        if isinstance(value, str):
            lines.append(f"{key}: {value}")
        else:
            lines.append(f"{key}: {orjson.dumps(value).decode()}")
    return lines
