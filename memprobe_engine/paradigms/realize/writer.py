"""The realizer: latent specs → episodes, one short LLM-written session at a time, rule-checked.

Per episode, :func:`build_plan` fixes the ordered sessions; each is asked of the ``realizer`` role
and checked by :func:`check_session`. A session that breaks a rule is asked again with the problems
shown: ``attempts`` times on ``realizer``, then ``strong_attempts`` times on ``realizer_strong`` (a
bigger model, where the small one cannot follow the rules); decoys, which the small model never
wrote correctly in trials, get all ``attempts + strong_attempts`` tries on ``realizer_strong``. When the attempts run out the failure is
recorded as a ``realize_exclusion``: a filler session is dropped (the episode keeps the rest and
lists it in ``metadata.dropped_sessions``); an encoding or perturbation session excludes the whole
episode (it would have no valid manipulation), listed in ``excluded.jsonl``.

Every call goes through the engine's :class:`ChatClient` into one recording
(``OUT/_generation/``). Resuming (the same command again) skips episodes already written or
excluded and serves every response the recording holds, so no finished call is asked again.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import orjson

from memprobe_engine.errors import ConfigError
from memprobe_engine.events.realize import RealizeCheck, RealizeExclusion
from memprobe_engine.events.recorder import Recorder
from memprobe_engine.llm.client import ChatClient
from memprobe_engine.llm.types import ChatMessage, SamplingParams
from memprobe_engine.paradigms.realize.plan import (
    SessionPlan,
    build_plan,
    build_probes,
    readable_fact,
)
from memprobe_engine.paradigms.realize.prompts import reply_start, session_messages
from memprobe_engine.paradigms.realize.rules import check_session
from memprobe_engine.paradigms.suite import (
    EPISODES_FILE,
    FACT_TYPES_FILE,
    SPECS_FILE,
    Episode,
    FactType,
    LatentSpec,
    Session,
    Turn,
    dump_episode,
    parse_episode,
)

EXCLUDED_FILE = "excluded.jsonl"
GENERATION_DIR = "_generation"
#: Turns kept of a reply (the prompt asks for 2–4).
KEEP_TURNS = 4
TWO_TURN_STOP = ("\nUSER:", "\nUser:", "\n[USER]", "\n**User")
ESSENTIAL = frozenset({"encoding", "perturbation", "perturbation_p1", "perturbation_p2"})
#: Kinds that start on ``realizer_strong``: decoys (two values in a fixed relation plus a
#: one-sentence refusal: the 0.5B model failed every attempt at them in trials). Everything else
#: starts on ``realizer`` and escalates when it keeps breaking the rules.
STRONG_FIRST = frozenset({"decoy_nonupdate"})
_SPEAKER = re.compile(r"^\s*[\[*]*\s*(user|assistant|asst|tool(?:[ _]output)?)\s*[\]*]*\s*[:\]][\s*]*", re.IGNORECASE)
_ROLE_OF = {"user": "user", "assistant": "assistant", "asst": "assistant"}
#: The reply shape's "fill this in" marker at the start or end of a turn.
_PLACEHOLDER = re.compile(r"^(\.\.\.|…)+\s*|\s*(\.\.\.|…)+$")
#: Backends that continue a final assistant message instead of answering it (llama.cpp's server
#: does): there the reply's opening words are sent as its start, so the model writes on from them.
#: Asked only in the prompt, the small models copied the layout that showed them (a marker line,
#: ``...`` turns) in 241 of the 331 rejected checks of the suite's fourth session; on 8 sessions that
#: had failed before, the 0.5B model passed 7 with the opening sent this way, 2 with it only quoted.
PREFILL_BACKENDS = frozenset({"local"})
#: How a complete turn ends (a sentence mark, optionally inside quotes / brackets, or a code fence).
_FINISHED = re.compile(r"([.!?…:]|```)[\"')\]*”’]*\s*$")


@dataclass(frozen=True)
class RealizeSettings:
    """What shapes the generated text (all of it goes into the recording's fingerprint)."""

    seed: int = 0
    temperature: float = 0.7
    max_tokens: int = 150
    attempts: int = 3
    strong_attempts: int = 1
    #: At most this many fillers per type (see :func:`build_plan`); None keeps the plan's counts.
    filler_cap: int | None = None

    def config(self) -> dict[str, Any]:
        return {"seed": self.seed, "temperature": self.temperature, "max_tokens": self.max_tokens,
                "attempts": self.attempts, "strong_attempts": self.strong_attempts, "filler_cap": self.filler_cap}


@dataclass(frozen=True)
class AcceptedSession:
    """A session an earlier session of the run accepted (reused on resume; see realize_run)."""

    text: str
    role: str
    call_seq: int


@dataclass(frozen=True)
class Exclusion:
    """Why an episode was left out: the essential session that could not be realized."""

    episode_id: str
    session_type: str
    reason: str


@dataclass
class RealizeStats:
    """Counts for the end-of-run summary."""

    episodes: int = 0
    excluded_episodes: int = 0
    skipped: int = 0
    sessions: int = 0
    calls: int = 0
    live_calls: int = 0
    regenerations: int = 0
    strong_sessions: int = 0
    dropped_sessions: int = 0
    reused: int = 0
    per_episode_s: list[float] = field(default_factory=list)


def parse_turns(text: str) -> list[Turn]:
    """Dialogue turns from ``USER: … / ASSISTANT: … / TOOL: …`` text (also ``[USER]``, ``**User:**``).

    A line without a speaker continues the previous turn; text before the first speaker is dropped;
    a turn that repeats an earlier one word for word (small models loop) ends the dialogue."""
    turns: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        match = _SPEAKER.match(line)
        if match:
            name = match.group(1).lower()
            turns.append((_ROLE_OF.get(name, "tool_output"), [line[match.end():]]))
        elif turns:
            turns[-1][1].append(line)
    out: list[Turn] = []
    seen: set[str] = set()
    for role, lines in turns:
        raw = "\n".join(lines).strip()
        if not raw:
            continue
        # The prompt's reply shape marks what the model writes with "..."; a copied marker is
        # dropped (text only removed). A turn that was nothing but the marker stays, empty, so
        # the rules reject the session instead of the dialogue silently losing a speaker.
        content = _PLACEHOLDER.sub("", raw).strip()
        key = " ".join(content.lower().split())
        if content and key in seen:
            break
        seen.add(key)
        out.append(Turn.model_validate({"role": role, "content": content}))
    return out


def join_reply(opening: str | None, text: str) -> str:
    """The session's text: the opening sent as the reply's start, then what the model wrote on
    (a backend that repeats the opening in its answer is taken as it is)."""
    if opening is None or text.lstrip().startswith(opening):
        return text
    return opening + text


def session_turns(text: str) -> list[Turn]:
    """The turns kept of a reply: the first ``KEEP_TURNS`` (small models run on past the asked
    length), minus a last turn the token cap cut off mid-sentence when at least two turns remain.

    Both repairs are mechanical and add nothing: they only drop text after the session the prompt
    asked for, and the rules then check what is kept."""
    turns = parse_turns(text)
    kept = turns[:KEEP_TURNS]
    if len(kept) == len(turns) and len(kept) > 2 and not _FINISHED.search(kept[-1].content):
        kept = kept[:-1]
    return kept


class Realizer:
    """Realizes episodes into ``out`` (``episodes.jsonl``, ``excluded.jsonl``) through ``chat``."""

    def __init__(self, chat: ChatClient, recorder: Recorder, out: Path, fact_types: list[FactType],
                 settings: RealizeSettings, progress: Callable[[str], None] | None = None,
                 accepted: dict[str, AcceptedSession] | None = None,
                 on_written: Callable[[], None] | None = None) -> None:
        self.chat = chat
        self.recorder = recorder
        self.out = out
        self.fact_types = fact_types
        self.settings = settings
        self.progress = progress
        self.stats = RealizeStats()
        self.accepted = accepted or {}
        self.on_written = on_written
        self._write_lock = asyncio.Lock()

    def finished_ids(self) -> set[str]:
        """Episodes already written or excluded by an earlier session of this run."""
        done: set[str] = set()
        for name in (EPISODES_FILE, EXCLUDED_FILE):
            path = self.out / name
            if path.exists():
                for line in path.read_bytes().splitlines():
                    if line.strip():
                        try:
                            done.add(str(orjson.loads(line)["episode_id"]))
                        except (orjson.JSONDecodeError, KeyError, TypeError):
                            continue  # a torn last line from a crash: that episode is redone
        return done

    async def run(self, specs: list[LatentSpec], concurrency: int = 2) -> RealizeStats:
        done = self.finished_ids()
        todo = [s for s in specs if s.episode_id not in done]
        self.stats.skipped = len(specs) - len(todo)
        gate = asyncio.Semaphore(max(1, concurrency))

        async def one(spec: LatentSpec) -> None:
            async with gate:
                started = time.monotonic()
                episode = await self.realize_episode(spec)
                elapsed = time.monotonic() - started
                self.stats.per_episode_s.append(elapsed)
                await self._write(episode)
                if self.progress is not None:
                    state = (f"excluded ({episode.session_type})" if isinstance(episode, Exclusion)
                             else f"{len(episode.sessions)} sessions")
                    self.progress(f"{spec.episode_id}: {state} in {elapsed:.0f} s")

        tasks = [asyncio.create_task(one(spec)) for spec in todo]
        try:
            await asyncio.gather(*tasks)
        finally:
            # One failure stops the run: the other episodes are cancelled (and redone on resume)
            # before the recording is closed, so nothing writes into a closed recording.
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        return self.stats

    async def realize_episode(self, spec: LatentSpec) -> Episode | Exclusion:
        """One episode, or its exclusion when an essential session could not be realized (recorded)."""
        fact = readable_fact(spec, self.fact_types)
        plans = build_plan(spec, seed=self.settings.seed, filler_cap=self.settings.filler_cap)
        sessions: list[Session] = []
        dropped: list[dict[str, Any]] = []
        with self.recorder.span(f"realize {spec.episode_id}", "episode", unit=spec.episode_id,
                                episode_id=spec.episode_id, paradigm=spec.paradigm, condition=spec.condition,
                                split=spec.is_split):
            for plan in plans:
                turns, problems = await self._session(plan, spec, fact)
                if turns is None:
                    reason = f"rules still failed after all attempts: {'; '.join(problems)}"
                    if plan.kind in ESSENTIAL:
                        self.recorder.emit(RealizeExclusion(episode_id=spec.episode_id, scope="episode",
                                                            session_idx=plan.index, session_type=plan.session_type,
                                                            reason=f"{plan.session_type} session: {reason}"))
                        return Exclusion(spec.episode_id, plan.session_type, reason)
                    self.recorder.emit(RealizeExclusion(episode_id=spec.episode_id, scope="session",
                                                        session_idx=plan.index, session_type=plan.session_type,
                                                        reason=reason))
                    dropped.append({"planned_index": plan.index, "session_type": plan.session_type,
                                    "reason": reason})
                    self.stats.dropped_sessions += 1
                    continue
                sessions.append(Session(session_idx=len(sessions), phase=plan.phase, session_type=plan.session_type,
                                        dialogue=turns, metadata=dict(plan.metadata)))
        metadata: dict[str, Any] = {
            "total_sessions": len(sessions), "length_tier": spec.length_tier, "split_perturbation": spec.is_split,
            "generator": "memprobe generate episodes", "models": self._models(), "seed": self.settings.seed,
            "filler_cap": self.settings.filler_cap}
        if dropped:
            metadata["dropped_sessions"] = dropped
        raw = {"episode_id": spec.episode_id, "group_id": spec.group_id, "paradigm": spec.paradigm,
               "condition": spec.condition, "expected_behavior": spec.expected_behavior,
               "latent_spec": spec.model_dump(mode="json", exclude_unset=True),
               "sessions": [s.model_dump(mode="json") for s in sessions], "probes": build_probes(spec),
               "metadata": metadata}
        return parse_episode(raw, f"realized episode {spec.episode_id}")

    def _models(self) -> dict[str, str]:
        return {role: f"{self.chat.spec_for(role).backend}:{self.chat.spec_for(role).model}"
                for role in ("realizer", "realizer_strong")}

    async def _session(self, plan: SessionPlan, spec: LatentSpec, fact: str) -> tuple[list[Turn] | None, list[str]]:
        """Ask for one session until it passes the rules or the attempts run out."""
        feedback: list[str] = []
        total = self.settings.attempts + self.settings.strong_attempts
        self.stats.sessions += 1
        with self.recorder.span(f"{plan.session_type} {plan.index}", "session", session_idx=plan.index,
                                phase=plan.phase, session_type=plan.session_type):
            # Sessions start on the small model and escalate when it keeps breaking the rules,
            # except kinds it never passed in trials (STRONG_FIRST), which go to the strong role at once.
            essential = plan.kind in STRONG_FIRST
            if essential:
                self.stats.strong_sessions += 1
            for attempt in range(total):
                role = "realizer_strong" if essential or attempt >= self.settings.attempts else "realizer"
                if attempt == self.settings.attempts and not essential:
                    self.stats.strong_sessions += 1
                if attempt > 0:
                    self.stats.regenerations += 1
                messages = session_messages(plan, spec, fact, feedback)
                prompt = messages[-1].content
                kept = self.accepted.get(prompt)
                if kept is not None and not check_session(plan, session_turns(kept.text), spec, prompt):
                    # Accepted by an earlier session of this run (perhaps from another role): kept.
                    self.stats.reused += 1
                    self.recorder.emit(RealizeCheck(episode_id=spec.episode_id, session_idx=plan.index,
                                                    session_type=plan.session_type, attempt=attempt, role=kept.role,
                                                    call_seq=kept.call_seq, problems=[], outcome="accepted"))
                    return session_turns(kept.text), []
                # A two-turn session ends where the model would start a second user turn: small
                # models otherwise ignore the length and write until the token cap.
                stop = None if plan.kind.startswith("perturbation") else TWO_TURN_STOP
                params = SamplingParams(temperature=self.settings.temperature, max_tokens=self.settings.max_tokens,
                                        seed=_seed(self.settings.seed, prompt, attempt), stop=stop)
                opening = (reply_start(plan, spec, fact, feedback)
                           if self.chat.spec_for(role).backend in PREFILL_BACKENDS else None)
                if opening is not None:
                    messages = [*messages, ChatMessage(role="assistant", content=opening)]
                outcome = await self.chat.chat(role, messages, params=params)
                self.stats.calls += 1
                self.stats.live_calls += 0 if outcome.cache_hit else 1
                turns = session_turns(join_reply(opening, outcome.text))
                problems = check_session(plan, turns, spec, prompt)
                last = attempt == total - 1
                verdict: Literal["accepted", "retry", "failed"] = (
                    "accepted" if not problems else ("failed" if last else "retry"))
                self.recorder.emit(RealizeCheck(episode_id=spec.episode_id, session_idx=plan.index,
                                                session_type=plan.session_type, attempt=attempt, role=role,
                                                call_seq=outcome.call_seq, problems=problems, outcome=verdict))
                if not problems:
                    return turns, []
                feedback = problems
        return None, feedback

    async def _write(self, episode: Episode | Exclusion) -> None:
        """Append the finished episode (or its exclusion) at once, so a crash loses no finished one."""
        async with self._write_lock:
            if isinstance(episode, Episode):
                _append(self.out / EPISODES_FILE, dump_episode(episode))
                self.stats.episodes += 1
                if self.on_written is not None:
                    self.on_written()  # the suite's spec file follows each episode, so it always loads
                return
            line = {"episode_id": episode.episode_id, "session_type": episode.session_type, "reason": episode.reason}
            _append(self.out / EXCLUDED_FILE, orjson.dumps(line) + b"\n")
            self.stats.excluded_episodes += 1


def _append(path: Path, data: bytes) -> None:
    """One finished line, appended and flushed (a few KB: no need to leave the event loop)."""
    with open(path, "ab") as handle:
        handle.write(data)


def _seed(seed: int, prompt: str, attempt: int) -> int:
    """The sampling seed of a request: a function of its prompt and attempt, so each regeneration
    differs while the same session planned in two matched episodes is one request, written once."""
    digest = hashlib.sha256(f"{seed}:{attempt}:{prompt}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def select_specs(specs: list[LatentSpec], wanted: list[str] | None, source: Path) -> list[LatentSpec]:
    """The specs named by ``--episodes`` (in that order, so a long run can interleave paradigms and
    a partial run is still balanced), or all of them in the file's order."""
    if not wanted:
        return specs
    known = {s.episode_id for s in specs}
    unknown = [w for w in wanted if w not in known]
    if unknown:
        raise ConfigError(f"--episodes: {', '.join(unknown)} not in {source}. Episode ids there: "
                          f"{', '.join(sorted(known)[:8])}{' …' if len(known) > 8 else ''}.")
    by_id = {s.episode_id: s for s in specs}
    return [by_id[w] for w in dict.fromkeys(wanted)]


def write_suite_files(out: Path, specs: list[LatentSpec], specs_path: Path) -> None:
    """``latent_specs.json`` with the specs of the episodes written so far (file order), and the
    fact-type registry copied from beside the specs file when there is one."""
    done: set[str] = set()
    if (out / EPISODES_FILE).exists():
        for line in (out / EPISODES_FILE).read_bytes().splitlines():
            if line.strip():
                done.add(str(orjson.loads(line)["episode_id"]))
    kept = [s.model_dump(mode="json", exclude_unset=True) for s in specs if s.episode_id in done]
    (out / SPECS_FILE).write_bytes(orjson.dumps({"specs": kept}, option=orjson.OPT_INDENT_2))
    registry = specs_path.parent / FACT_TYPES_FILE
    if registry.exists() and registry.resolve() != (out / FACT_TYPES_FILE).resolve():
        (out / FACT_TYPES_FILE).write_bytes(registry.read_bytes())
