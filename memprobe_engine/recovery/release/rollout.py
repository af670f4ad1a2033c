"""One user's rollout of a release run as events: episodes, turns, preference judgments, final store.

Layout (the one :mod:`memprobe_engine.recovery.rollout` records): span ``rollout`` → per task a span
``episode`` (dimension; attrs task_id, category, task_index, and the release files it came from) →
the task as user message turn 0, then per turn a span ``turn`` holding the assistant message, the
preference judgment and the simulated user's reply; then ``episode_end``. After the last episode:
one ``memory_snapshot`` of the final store and its ``memory_footprint``.

What the release does not hold is not invented: there are no per-turn memory writes (the rollout
span says so in ``attrs.note``), no agent-context retrievals and no LLM call records. Episode N of
the release is the N-th task of the user's task file, so ``task_index`` is N-1.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from memprobe_engine.imports.emitter import DictEmitter
from memprobe_engine.imports.problems import ProblemLog
from memprobe_engine.recovery.release.files import Release
from memprobe_engine.recovery.release.sessions import ImportedUser

STORE_NOTE = ("release holds only the final store: no per-turn memory writes were published, so the store "
              "is empty until the one snapshot taken after the last episode")
#: Release end reasons → ``EpisodeEnd.end_reason``; anything else is imported as "error" and reported.
END_REASONS = {"satisfied": "satisfied", "max_turns": "turn_cap", "turn_cap": "turn_cap",
               "max_turns_reached": "turn_cap", "turn_limit": "turn_cap", "error": "error"}


@dataclass
class Store:
    """The final store by item id, with lookups used to match retrieved memories to items."""

    items: dict[str, dict[str, Any]] = field(default_factory=dict)
    by_key: dict[tuple[Any, ...], list[str]] = field(default_factory=dict)
    by_content: dict[str, list[str]] = field(default_factory=dict)

    def add(self, item_id: str, item: dict[str, Any]) -> None:
        self.items[item_id] = item
        content = item.get("content")
        if isinstance(content, str):
            self.by_content.setdefault(content, []).append(item_id)
            self.by_key.setdefault(item_key(item), []).append(item_id)


def item_key(item: dict[str, Any]) -> tuple[Any, ...]:
    """What identifies an id-less item (longctx_full): its content and where it was written."""
    return (item.get("content"), item.get("category"), item.get("task_index"), item.get("turn"))


@dataclass
class RolloutStats:
    episodes: int = 0
    turns: int = 0
    messages: int = 0
    memory_items: int = 0


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def task_plan(user: ImportedUser, log: ProblemLog) -> list[dict[str, Any]]:
    """The tasks in the order the release ran them; the bank order stands in when tasks are unreadable."""
    if user.tasks is not None:
        return user.tasks
    log.add("warning", Release.tasks(user.user_id), "without the task file, episode N is mapped to the N-th "
                                                    "bank dimension (the release's task order)", user_id=user.user_id)
    return [{"task_id": f"t{i + 1:02d}", "dimension": e["dimension"], "category": e["category"], "task": None}
            for i, e in enumerate(user.entries())]


def emit_rollout(em: DictEmitter, release: Release, run: str, user: ImportedUser, log: ProblemLog,
                 stats: RolloutStats) -> Store | None:
    """Emit the rollout span of one user; returns the final store (None when its file is unusable)."""
    uid = user.user_id
    plan = task_plan(user, log)
    present = release.episodes(run, uid)
    extra = [n for n in present if n > len(plan)]
    if extra:
        log.add("warning", f"history/{run}/{uid}/", f"episode(s) {extra} have no task in the task file; "
                                                    f"not imported", user_id=uid)
    memories_rel = Release.memories(run, uid)
    with em.span("rollout", "rollout", source=memories_rel, note=STORE_NOTE):
        for n, task in enumerate(plan, start=1):
            _episode(em, release, run, user, n, task, log, stats)
        store = _final_store(release, memories_rel, uid, log)
        if store is not None:
            em.emit("memory_snapshot", snapshot_ref=em.put_payload({"items": store.items}), n_items=len(store.items))
            total = sum(len(str(item.get("content", ""))) for item in store.items.values())
            em.emit("memory_footprint", n_items=len(store.items), total_chars=total,
                    mean_chars=total / len(store.items) if store.items else 0.0)
            stats.memory_items += len(store.items)
    return store


def _episode(em: DictEmitter, release: Release, run: str, user: ImportedUser, n: int, task: dict[str, Any],
             log: ProblemLog, stats: RolloutStats) -> None:
    uid, index = user.user_id, n - 1
    hist_rel, pref_rel = Release.history(run, uid, n), Release.pref_judge(run, uid, n)
    history = release.read(hist_rel, log, user_id=uid)
    if history is None:
        return
    pref = release.read(pref_rel, log, user_id=uid, missing=None)
    if pref is None:
        why = "file is missing" if not release.exists(pref_rel) else "file is unusable"
        log.add("warning", pref_rel, f"{why}: per-preference scores are not imported; each turn's judgment "
                                     f"carries only the mean from the transcript's preference_evaluator", user_id=uid)
    opening = history.get("task") if isinstance(history.get("task"), str) else task.get("task")
    if task.get("task") is not None and opening != task.get("task"):
        log.add("warning", hist_rel, "the transcript's task differs from the task file's; the transcript's is "
                                     "imported as the opening message", user_id=uid)
    attrs: dict[str, Any] = {"task_id": task["task_id"], "category": task["category"], "task_index": index,
                             "source": hist_rel}
    if pref is not None:
        attrs["preference_source"] = pref_rel
    turns = history.get("turns") if isinstance(history.get("turns"), list) else []
    with em.span(f"task {n}: {task['dimension']}", "episode", dimension=task["dimension"], **attrs):
        if isinstance(opening, str):
            em.emit("message", role="user", content=opening, task_index=index, turn=0)
            stats.messages += 1
        pref_turns, names = _preference_turns(pref)
        done = 0
        for position, turn in enumerate(turns, start=1):
            if not isinstance(turn, dict):
                log.add("warning", hist_rel, f"turns[{position - 1}] is not an object; skipped", user_id=uid)
                continue
            number = turn["turn"] if isinstance(turn.get("turn"), int) else position
            _turn(em, turn, number, index, pref_turns.get(number), names, stats)
            done += 1
        reason = history.get("end_reason")
        end = END_REASONS.get(reason) if isinstance(reason, str) else None
        if end is None:
            log.add("warning", hist_rel, f"end_reason {reason!r} is not one MemProbe knows; imported as 'error'",
                    user_id=uid)
        em.emit("episode_end", task_index=index, end_reason=end or "error", turns=done)
    stats.episodes += 1
    stats.turns += done


def _preference_turns(pref: dict[str, Any] | None) -> tuple[dict[int, dict[str, Any]], dict[Any, str]]:
    """Per-turn records of a pref_judge file by turn number, and preference idx → dimension."""
    if pref is None:
        return {}, {}
    names = {p.get("idx"): str(p.get("dimension")) for p in pref.get("prefs") or [] if isinstance(p, dict)}
    turns = {t["turn"]: t for t in pref.get("turns") or [] if isinstance(t, dict) and isinstance(t.get("turn"), int)}
    return turns, names


def _turn(em: DictEmitter, turn: dict[str, Any], number: int, index: int, judged: dict[str, Any] | None,
          names: dict[Any, str], stats: RolloutStats) -> None:
    with em.span(f"turn {number}", "turn", turn=number, task_index=index):
        reply = turn.get("agent_response")
        if isinstance(reply, str):
            em.emit("message", role="assistant", content=reply, task_index=index, turn=number)
            stats.messages += 1
        if judged is not None:
            scores: dict[str, float | None] = {}
            for item in judged.get("per_pref") or []:
                if isinstance(item, dict):
                    scores[names.get(item.get("idx"), f"pref_{item.get('idx')}")] = _number(item.get("score"))
            given = [s for s in scores.values() if s is not None]
            mean = _number(judged.get("score"))
            em.emit("preference_judgment", task_index=index, turn=number, scores=scores,
                    mean=mean if mean is not None else (sum(given) / len(given) if given else None))
        else:
            evaluator = turn.get("preference_evaluator")
            mean = _number(evaluator.get("score")) if isinstance(evaluator, dict) else None
            if mean is not None:
                em.emit("preference_judgment", task_index=index, turn=number, scores={}, mean=mean)
        sim = turn.get("user_simulator")
        if isinstance(sim, dict) and isinstance(sim.get("text"), str):
            done = sim.get("is_done")
            em.emit("message", role="user", content=sim["text"], task_index=index, turn=number,
                    feedback_type=sim.get("feedback_type") if isinstance(sim.get("feedback_type"), str) else None,
                    is_done=done if isinstance(done, bool) else None)
            stats.messages += 1


def _final_store(release: Release, rel: str, uid: str, log: ProblemLog) -> Store | None:
    """The release's final store keyed by item id; id-less items get ``<category>-<n:04d>``."""
    data = release.read(rel, log, user_id=uid)
    if data is None:
        return None
    memories = data.get("memories")
    if not isinstance(memories, list):
        log.add("error", rel, "has no 'memories' list; the final store is not imported", user_id=uid)
        return None
    store, per_category, skipped = Store(), Counter[str](), 0
    for item in memories:
        if not isinstance(item, dict):
            skipped += 1
            continue
        ident = item.get("id")
        if isinstance(ident, (str, int)) and not isinstance(ident, bool) and str(ident):
            item_id = str(ident)
        else:
            category = str(item.get("category") or "item")
            per_category[category] += 1
            item_id = f"{category}-{per_category[category]:04d}"
        if item_id in store.items:
            repeat = 2
            while f"{item_id}#{repeat}" in store.items:
                repeat += 1
            log.add("warning", rel, f"item id {item_id!r} repeats; stored as {item_id}#{repeat}", user_id=uid)
            item_id = f"{item_id}#{repeat}"
        store.add(item_id, item)
    if skipped:
        log.add("warning", rel, f"{skipped} memory item(s) are not objects; skipped", user_id=uid)
    declared = data.get("num_memories")
    if isinstance(declared, int) and declared != len(store.items):
        log.add("warning", rel, f"num_memories says {declared}, the file holds {len(store.items)} items",
                user_id=uid)
    return store
