"""Protocol-A-shaped recordings without any model, for replay tests and benchmarks (test data: it lives
in tests/, not in the shipped engine).

The span tree, event kinds and fields mirror a real run (``recovery/unit.py``, ``rollout.py``,
``scoring.py``, ``attribution.py``): unit → rollout → episode → turn, then recovery → dimension →
mode → stage, with messages, LLM calls (long messages stored as payloads), embeddings, retrievals,
memory operations carrying JSON Patches (adds, updates, links, deletes), preference judgments,
slot-fills, judge scores, attribution stages and an optional re-score. Text is generated from a
seeded RNG and events are stamped by a simulated clock, so the same arguments always write the
same recording.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from memprobe_engine.events.base import EventBase
from memprobe_engine.events.dialogue import Message
from memprobe_engine.events.header import RecordingHeader
from memprobe_engine.events.llm import EmbeddingBatch, LLMCall, RecordedMessage, RetryNote, TokenUsage
from memprobe_engine.events.memory import MemoryFootprint, MemoryOp, Retrieval
from memprobe_engine.events.recorder import Recorder
from memprobe_engine.events.recovery import EpisodeEnd, PreferenceJudgment
from memprobe_engine.events.run import RunEnd, RunStart
from memprobe_engine.events.scoring import AttributionLabel, AttributionStage, JudgeScore, SlotFill
from memprobe_engine.events.writer import open_writer

_WORDS = ("schedule plan shift budget garden recipe report meeting deadline draft lesson route travel "
          "weekend project family budget spreadsheet notes outline summary checklist reminder").split()
E = TypeVar("E", bound=EventBase)
_INLINE_LIMIT = 200  # same rule as the chat client: longer message texts go to the payload store
SYSTEM_PROMPT = ("You are a helpful assistant with a long-term memory. Use the memory items below when they are "
                 "relevant; never invent facts about the user. Answer the current request concisely. " * 3)


@dataclass(frozen=True)
class SynthDimension:
    """One hidden target: ``disclosure`` is what the simulated user says that carries the evidence."""

    dimension: str
    category: str
    short: str
    task: str
    disclosure: str = ""


@dataclass(frozen=True)
class SynthUser:
    user_id: str
    dimensions: tuple[SynthDimension, ...]


def generic_users(n_users: int, n_dims: int, seed: int = 0) -> list[SynthUser]:
    """Users with made-up dimensions (no sessions tree behind them)."""
    rng = random.Random(seed)
    cats = ("skill_memory", "knowledge_memory", "episodic_memory", "self_model", "assistance_preference")
    out = []
    for u in range(n_users):
        dims = tuple(SynthDimension(f"dim_{d:02d}", cats[d % len(cats)], f"likes {rng.choice(_WORDS)} done early",
                                    f"Can you help me with my {rng.choice(_WORDS)} for next week?")
                     for d in range(n_dims))
        out.append(SynthUser(f"user_{u + 1:03d}", dims))
    return out


class _ClockRecorder(Recorder):
    """Stamps events with a simulated clock (half a second apart) instead of the wall clock, so a
    synthetic recording is byte-for-byte the same every time it is written."""

    def __init__(self, writer: Any, start: float) -> None:
        super().__init__(writer)
        self._clock = start

    def emit(self, event: E) -> E:
        if not event.time:
            self._clock += 0.5
            event.time = self._clock
        return super().emit(event)


class _Writer:
    """Emits one unit's events; memory stores are plain dicts whose changes become JSON Patches."""

    def __init__(self, rec: Recorder, rng: random.Random, system: str) -> None:
        self.rec, self.rng, self.system = rec, rng, system
        self.store: dict[str, dict[str, Any]] = {}
        self.next_id = 1
        self.clock = 0

    def text(self, n: int, lead: str = "") -> str:
        words = " ".join(self.rng.choice(_WORDS) for _ in range(n))
        sentence = (lead + " " + words).strip()
        return sentence[:1].upper() + sentence[1:] + "."

    def msg(self, role: str, content: str) -> RecordedMessage:
        if len(content) > _INLINE_LIMIT:
            return RecordedMessage(role=role, content_ref=self.rec.put_payload(content))
        return RecordedMessage(role=role, content=content)

    def call(self, role: str, messages: list[tuple[str, str]], response: str, parsed: Any = None,
             tokens: tuple[int, int] = (400, 60)) -> int:
        rng = self.rng
        event = self.rec.emit(LLMCall(
            role=role, backend="local", model="qwen2.5-coder-1.5b-instruct-q4_k_m",
            request_hash=f"{rng.getrandbits(128):032x}", messages=[self.msg(r, c) for r, c in messages],
            params={"temperature": 0.0 if "judge" in role or role == "slot_filler" else 0.7, "max_tokens": 400},
            response_text=response, parsed=parsed, latency_s=round(rng.uniform(0.3, 4.0), 3),
            usage=TokenUsage(prompt_tokens=tokens[0] + rng.randint(0, 300), completion_tokens=tokens[1]),
            cache_hit=rng.random() < 0.1,
            retries=[RetryNote(attempt=1, error="HTTP 429 Too Many Requests", wait_s=1.0)] if rng.random() < 0.03
            else []))
        return event.seq

    def observe(self, kind: str, text: str, task_index: int, turn: int) -> None:
        """What the memory system does with one observation: its native writes, as JSON Patches."""
        if self.system == "nomem":
            return
        self.clock += 1
        item_id = f"{self.system[:2]}{self.next_id:04d}"
        if self.system == "longctx_full":
            self.add(item_id, {"id": item_id, "content": f"{kind}: {text}", "category": kind,
                               "task_index": task_index, "turn": turn, "timestamp": f"t+{self.clock}m"})
            return
        self.call("memory_writer", [("system", "Extract durable facts about the user."), ("user", text)],
                  '{"facts": ["' + text[:60] + '"]}', tokens=(250, 40))
        roll = self.rng.random()
        if self.system == "mem0" and self.store and roll < 0.2:
            victim = self.rng.choice(list(self.store))
            self.emit_op("update", [victim], [{"op": "replace", "path": f"/items/{victim}/memory",
                                               "value": "Updated: " + text[:120]},
                                              {"op": "replace", "path": f"/items/{victim}/updated_at",
                                               "value": f"t+{self.clock}m"}], "UPDATE")
            self.store[victim].update(memory="Updated: " + text[:120], updated_at=f"t+{self.clock}m")
        elif self.system == "mem0" and self.store and roll < 0.28:
            victim = self.rng.choice(list(self.store))
            del self.store[victim]
            self.emit_op("delete", [victim], [{"op": "remove", "path": f"/items/{victim}"}], "DELETE: contradicted")
        elif self.system == "mem0":
            self.add(item_id, {"id": item_id, "memory": text[:160], "category": self.rng.choice(
                ["preference", "fact", "event"]), "created_at": f"t+{self.clock}m", "updated_at": f"t+{self.clock}m"})
        else:  # amem-like notes: construct a note, link it, evolve a neighbour
            links = self.rng.sample(list(self.store), min(2, len(self.store)))
            self.add(item_id, {"id": item_id, "content": text[:200], "keywords": self.rng.sample(_WORDS, 3),
                               "tags": [kind], "context": self.text(6, "About"), "links": links,
                               "timestamp": f"t+{self.clock}m"})
            if links and roll < 0.5:
                self.emit_op("evolve", [links[0]], [{"op": "replace", "path": f"/items/{links[0]}/context",
                                                     "value": self.text(6, "Evolved")}], "evolved by " + item_id)
                self.store[links[0]]["context"] = "evolved"

    def add(self, item_id: str, item: dict[str, Any]) -> None:
        self.next_id += 1
        self.store[item_id] = item
        self.emit_op("add", [item_id], [{"op": "add", "path": f"/items/{item_id}", "value": item}], None)

    def emit_op(self, op: str, ids: list[str], patch: list[dict[str, Any]], note: str | None) -> None:
        self.rec.emit(MemoryOp(op=op, item_ids=ids, patch=patch, store_size=len(self.store), note=note))

    def search(self, query: str, purpose: str, k: int = 5) -> list[str]:
        if self.system == "nomem":
            self.rec.emit(Retrieval(query=query, k=k, item_ids=[], scores=[], purpose=purpose))
            return []
        self.rec.emit(EmbeddingBatch(backend="st", model="all-MiniLM-L6-v2", n_texts=1, dim=384))
        ids = self.rng.sample(list(self.store), min(k, len(self.store)))
        scores = sorted((round(self.rng.uniform(0.2, 0.9), 3) for _ in ids), reverse=True)
        self.rec.emit(Retrieval(query=query, k=k, item_ids=ids, scores=list[float | None](scores), purpose=purpose))
        return ids


def _episode(w: _Writer, user: SynthUser, dim: SynthDimension, index: int, turns: int) -> list[str]:
    rec = w.rec
    said: list[str] = []
    with rec.span(f"task {index + 1}: {dim.dimension}", "episode", dimension=dim.dimension, task_id=f"t{index + 1:02d}",
                  category=dim.category, task_index=index):
        rec.emit(Message(role="user", content=dim.task, task_index=index, turn=0))
        w.observe("task", dim.task, index, 0)
        user_text = dim.task
        for turn in range(1, turns + 1):
            with rec.span(f"turn {turn}", "turn", turn=turn, task_index=index):
                hits = w.search(user_text, "agent_context")
                block = "\n".join(f'{{"id": "{h}", "content": "…"}}' for h in hits)
                reply = w.text(40, "Here is a plan:")
                w.call("agent", [("system", SYSTEM_PROMPT), ("user", f"Memory:\n{block}\n\nUser: {user_text}")],
                       reply, tokens=(900, 120))
                rec.emit(Message(role="assistant", content=reply, task_index=index, turn=turn))
                w.observe("agent_reply", reply, index, turn)
                mean = round(w.rng.uniform(3.5, 5.0), 2)
                seq = w.call("preference_judge", [("system", "Rate the reply against each preference."),
                                                  ("user", reply)], f'{{"mean": {mean}}}', tokens=(500, 50))
                rec.emit(PreferenceJudgment(task_index=index, turn=turn, scores={"reply_length": mean}, mean=mean,
                                            call_seq=seq))
                done = turn == turns
                lead = f"That helps. Some background: {dim.disclosure or dim.short}" if turn == 1 else "Thanks,"
                user_text = w.text(18, lead)
                said.append(user_text)
                feedback = "satisfied" if done else w.rng.choice(["followup", "clarify", "correction"])
                w.call("simulator", [("system", "You are the user. Stay in character."), ("user", reply)],
                       user_text, {"feedback_type": feedback, "text": user_text, "is_done": done}, tokens=(700, 60))
                rec.emit(Message(role="user", content=user_text, task_index=index, turn=turn, feedback_type=feedback,
                                 is_done=done))
                w.observe("user_reply", user_text, index, turn)
                if done:  # the runner writes the episode's end inside its last turn (recovery/rollout.py)
                    rec.emit(EpisodeEnd(task_index=index, end_reason="satisfied", turns=turns))
    return said


def _recover(w: _Writer, dim: SynthDimension, said: list[str], judge_seqs: dict[tuple[str, str], int]) -> None:
    rec, rng = w.rec, w.rng
    with rec.span(f"recover {dim.dimension}", "dimension", dimension=dim.dimension, category=dim.category):
        for mode in ("dump_all", "retrieve"):
            with rec.span(mode, "mode", mode=mode):
                if mode == "retrieve":
                    w.search(f"What best describes the user's {dim.dimension}?", "retrieve_mode")
                label = dim.short if rng.random() < 0.5 else w.text(5, "probably")
                seq = w.call("slot_filler", [("system", "Fill the slot from the memory."),
                                             ("user", "Memory:\n" + "x" * 300)], label, tokens=(2000, 40))
                rec.emit(SlotFill(mode=mode, label=label, reason=w.text(10, "The memory says"), call_seq=seq))
                score = rng.choice([0.0, 0.25, 0.5, 0.75, 1.0])
                seq = w.call("recovery_judge", [("system", "Score the prediction against the target."),
                                                ("user", f"Target: {dim.short}\nPrediction: {label}")],
                             f'{{"reason": "…", "score": {score}}}', tokens=(300, 40))
                judge = rec.emit(JudgeScore(mode=mode, score=score, reason=w.text(12, "The prediction"), call_seq=seq))
                judge_seqs[(dim.dimension, mode)] = judge.seq
                label_out = "ok"
                if score < 0.75:
                    with rec.span("stage 0: task design", "stage", stage=0, mode=mode):
                        rec.emit(AttributionStage(mode=mode, stage=0, verdict="can_invite", reason=w.text(8, "The task"),
                                                  cached=mode == "retrieve"))
                    with rec.span("stage 1: disclosure", "stage", stage=1, mode=mode):
                        seq = w.call("attribution_judge", [("user", "\n".join(said))], '{"disclosed": true}')
                        rec.emit(AttributionStage(mode=mode, stage=1, verdict="disclosed", call_seq=seq,
                                                  evidence=said[0] if said else None, reason=w.text(8, "The user")))
                    label_out = "memory_failure"
                rec.emit(AttributionLabel(mode=mode, label=label_out, score=score))  # type: ignore[arg-type]


def write_synthetic_run(directory: Path | str, users: list[SynthUser], systems: list[str], *,
                        turns: tuple[int, int] = (2, 3), seed: int = 0, sessions: str | None = None,
                        finish: bool = True, rescore: bool = True, max_events: int | None = None,
                        progress: Callable[[int], None] | None = None) -> int:
    """Write a run of ``users`` × ``systems`` into ``directory``; returns the number of events.

    ``finish=False`` leaves the run open (no run_end), like a run still going; ``max_events`` stops
    starting new units once that many events are written.
    """
    config = {"suite": "recovery", "sessions": sessions, "users": [u.user_id for u in users], "systems": systems,
              "modes": ["dump_all", "retrieve"], "k": 5, "max_turns": turns[1], "seed": seed,
              "models": {"agent": "local:qwen2.5-coder-1.5b"}}
    header = RecordingHeader(run_id=f"recovery-synthetic-{seed}", suite="recovery", created=1767600000.0 + seed,
                             config=config)
    rng = random.Random(seed)
    writer = open_writer(Path(directory), header)
    rec = _ClockRecorder(writer, header.created)
    rec.emit(RunStart(run_id=header.run_id, suite="recovery"))
    originals: list[tuple[str, str, SynthDimension, int]] = []
    with rec.span("run", "run") if finish else contextlib.nullcontext():
        for user in users:
            for system in systems:
                if max_events is not None and writer.next_seq >= max_events:
                    break
                w = _Writer(rec, rng, system)
                seqs: dict[tuple[str, str], int] = {}
                with rec.span(f"{user.user_id} × {system}", "unit", user_id=user.user_id, system=system,
                              tasks=len(user.dimensions)):
                    w.emit_op("reset", [], [{"op": "replace", "path": "/items", "value": {}}], f"new user {user.user_id}")
                    said: dict[str, list[str]] = {}
                    with rec.span("rollout", "rollout"):
                        for i, dim in enumerate(user.dimensions):
                            said[dim.dimension] = _episode(w, user, dim, i, rng.randint(*turns))
                        rec.emit(MemoryFootprint(n_items=len(w.store), total_chars=sum(len(str(v)) for v in w.store.values()),
                                                 mean_chars=sum(len(str(v)) for v in w.store.values()) / max(1, len(w.store))))
                    with rec.span("recovery", "recovery"):
                        for dim in user.dimensions:
                            _recover(w, dim, said[dim.dimension], seqs)
                originals += [(user.user_id, system, user.dimensions[0], seqs[(user.dimensions[0].dimension, "dump_all")])]
                if progress is not None:
                    progress(writer.next_seq)
        if rescore and originals:
            user_id, system, dim, seq = originals[0]
            with rec.span(f"rescore {dim.dimension}", "rescore", user_id=user_id, system=system, dimension=dim.dimension):
                w = _Writer(rec, rng, system)
                call = w.call("recovery_judge", [("user", f"Target: {dim.short}")], '{"score": 1.0}')
                rec.emit(JudgeScore(mode="dump_all", score=1.0, reason="Re-scored: the prediction matches.",
                                    call_seq=call, rescore_of=seq))
    if finish:
        rec.emit(RunEnd(status="completed"))
    count = writer.next_seq
    writer.close()
    return count
