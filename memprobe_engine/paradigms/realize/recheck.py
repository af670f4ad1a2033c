"""``memprobe generate episodes --recheck``: hold written episodes to the current rules.

When the rules get stricter (a rule gap found in a shipped suite), episodes written under the old
rules may break them. This pass checks every session of every written episode against the current
:func:`check_session` (with the prompt that wrote it, from the recording) and takes each episode
that fails out of ``episodes.jsonl``. The realizer then redoes those episodes on the same run: every
accepted session that still passes is reused from the recording, so only the failing sessions are
asked again — the realizer resumes per session, not only per episode.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson

from memprobe_engine.events.llm import LLMCall
from memprobe_engine.events.payloads import PayloadReader
from memprobe_engine.events.reader import open_recording
from memprobe_engine.events.realize import RealizeCheck
from memprobe_engine.paradigms.realize.plan import build_plan
from memprobe_engine.paradigms.realize.rules import check_session
from memprobe_engine.paradigms.realize.writer import join_reply
from memprobe_engine.paradigms.suite import EPISODES_FILE, LatentSpec, Turn


@dataclass(frozen=True)
class RecheckFailure:
    """A written episode taken out because a session breaks the current rules."""

    episode_id: str
    session_idx: int
    session_type: str
    problems: list[str]


def accepted_calls(record: Path) -> Iterator[tuple[RealizeCheck, LLMCall, str, str]]:
    """Every accepted rule check of the generation recording, with the call it accepted, that
    call's prompt (its last user message, resolved from the payloads) and the session's text (the
    reply, after the opening words sent as its start, if any); checks without them are skipped."""
    if not (record / "events.jsonl").exists():
        return
    payloads = PayloadReader(record)
    calls: dict[int, LLMCall] = {}
    with open_recording(record) as reader:
        for event in reader.iter_events(kinds=["llm_call", "realize_check"]):
            if isinstance(event, LLMCall):
                calls[event.seq] = event
            elif isinstance(event, RealizeCheck) and event.outcome == "accepted" and event.call_seq in calls:
                call = calls[event.call_seq]
                texts = [m.content if m.content is not None else payloads.get(m.content_ref or "")
                         for m in call.messages]
                roles = [m.role for m in call.messages]
                opening = texts[-1] if roles and roles[-1] == "assistant" else None
                prompt = next((t for r, t in zip(reversed(roles), reversed(texts)) if r == "user"), None)
                if isinstance(prompt, str) and call.response_text is not None and (
                        opening is None or isinstance(opening, str)):
                    yield event, call, prompt, join_reply(opening, call.response_text)


def _accepted_prompts(record: Path) -> dict[tuple[str, int], str]:
    """(episode id, planned session index) → the prompt of the last accepted attempt."""
    return {(check.episode_id, check.session_idx): prompt for check, _, prompt, _ in accepted_calls(record)}


def recheck_written(out: Path, record: Path, specs: list[LatentSpec]) -> list[RecheckFailure]:
    """Take the written episodes that break the current rules out of ``out/episodes.jsonl``."""
    path = out / EPISODES_FILE
    if not path.exists():
        return []
    by_id = {s.episode_id: s for s in specs}
    prompts = _accepted_prompts(record)
    kept: list[bytes] = []
    failures: list[RecheckFailure] = []
    for line in path.read_bytes().splitlines():
        if not line.strip():
            continue
        raw = orjson.loads(line)
        spec = by_id.get(str(raw.get("episode_id")))
        failure = None if spec is None else _first_failure(raw, spec, prompts)
        if failure is None:
            kept.append(line)
        else:
            failures.append(failure)
    if failures:
        replace_lines(path, kept)
    return failures


def replace_lines(path: Path, lines: list[bytes]) -> None:
    """Rewrite a JSON-lines file with ``lines``, all or nothing: a crash leaves the old file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(b"".join(line + b"\n" for line in lines))
    os.replace(tmp, path)


def _first_failure(raw: dict[str, object], spec: LatentSpec,
                   prompts: dict[tuple[str, int], str]) -> RecheckFailure | None:
    metadata = raw.get("metadata") if isinstance(raw.get("metadata"), dict) else {}
    assert isinstance(metadata, dict)
    cap = metadata.get("filler_cap")
    dropped = {d.get("planned_index") for d in metadata.get("dropped_sessions") or [] if isinstance(d, dict)}
    plans = [p for p in build_plan(spec, seed=int(metadata.get("seed") or 0),
                                   filler_cap=cap if isinstance(cap, int) else None) if p.index not in dropped]
    sessions = raw.get("sessions") if isinstance(raw.get("sessions"), list) else []
    assert isinstance(sessions, list)
    if len(plans) != len(sessions):
        return RecheckFailure(spec.episode_id, -1, "episode", [f"{len(sessions)} sessions written, "
                                                                f"{len(plans)} planned"])
    for plan, session in zip(plans, sessions, strict=True):
        turns = [Turn.model_validate(t) for t in session.get("dialogue", [])]
        problems = check_session(plan, turns, spec, prompts.get((spec.episode_id, plan.index)))
        if problems:
            return RecheckFailure(spec.episode_id, plan.index, plan.session_type, problems)
    return None
