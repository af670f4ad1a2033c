"""Simulation rollout: a simulated user works through its tasks with a memory-equipped assistant.

Everything except the memory system is held constant: the same tasks, simulator prompt, assistant
scaffold and turn cap. Memory persists across one user's tasks. Each task is an ``episode`` span,
each exchange a ``turn`` span; messages, retrievals, preference judgments and the episode's end
reason are events, and the memory system records its own operations.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import orjson

from memprobe_engine.events.dialogue import Message
from memprobe_engine.events.memory import MemoryFootprint, Retrieval
from memprobe_engine.events.recorder import Recorder
from memprobe_engine.events.recovery import EpisodeEnd, PreferenceJudgment
from memprobe_engine.events.run import ErrorEvent
from memprobe_engine.llm.types import SamplingParams
from memprobe_engine.memory.base import MemorySystem, Observation, ScoredItem, SimClock
from memprobe_engine.recovery import prompts
from memprobe_engine.recovery.inputs import SimUser, Task
from memprobe_engine.recovery.prompts import Turn
from memprobe_engine.recovery.schemas import PreferenceVerdict, SimulatorReply


@dataclass(frozen=True)
class RolloutSettings:
    """Knobs of the episode loop that the README's quick run turns down for small CPUs."""

    max_turns: int = 25
    agent_max_tokens: int = 400
    simulator_max_tokens: int = 200
    judge_max_tokens: int = 200
    agent_k: int = 5
    temperature: float = 0.7
    seed: int = 0
    preference_judge: bool = True


@dataclass
class Episode:
    """What one task's dialogue produced (kept in memory for attribution stages 1 and 2)."""

    task: Task
    task_index: int
    history: list[Turn] = field(default_factory=list)
    end_reason: str = "turn_cap"
    turns: int = 0


def memory_block(hits: Sequence[ScoredItem]) -> str:
    """How retrieved items are shown to the assistant: one JSON line per item, native fields."""
    return "\n".join(orjson.dumps(hit.item).decode() for hit in hits)


async def run_episode(*, chat: object, recorder: Recorder, system: MemorySystem, user: SimUser, task: Task,
                      task_index: int, clock: SimClock, settings: RolloutSettings) -> Episode:
    """One task from the user's opening request to satisfaction or the turn cap."""
    target = user.bank.entry(task.dimension)
    assert target is not None, f"task {task.task_id} targets {task.dimension}, which is not in the bank"
    preferences = [e for e in user.bank.entries if e.category == "assistance_preference"]
    episode = Episode(task=task, task_index=task_index)
    clock.advance(days=1)
    user_text = task.task
    recorder.emit(Message(role="user", content=user_text, task_index=task_index, turn=0))
    await system.observe(Observation(kind="task", text=user_text, task_index=task_index, timestamp=clock.iso()))
    episode.history.append(("user", user_text))
    agent_params = SamplingParams(temperature=settings.temperature, max_tokens=settings.agent_max_tokens,
                                  seed=settings.seed)
    sim_params = SamplingParams(temperature=settings.temperature, max_tokens=settings.simulator_max_tokens,
                                seed=settings.seed)
    judge_params = SamplingParams(temperature=0.0, max_tokens=settings.judge_max_tokens)

    for turn in range(1, settings.max_turns + 1):
        with recorder.span(f"turn {turn}", "turn", turn=turn, task_index=task_index):
            clock.advance(minutes=2)
            hits = await system.search(user_text, settings.agent_k)
            recorder.emit(Retrieval(query=user_text, k=settings.agent_k, item_ids=[h.id for h in hits],
                                    scores=[h.score for h in hits], purpose="agent_context"))
            reply = await chat.chat("agent", prompts.agent_messages(memory_block(hits), episode.history),  # type: ignore[attr-defined]
                                    params=agent_params)
            if reply.text is None:
                return _abort(recorder, episode, turn, "the agent call returned no text")
            recorder.emit(Message(role="assistant", content=reply.text, task_index=task_index, turn=turn))
            episode.history.append(("assistant", reply.text))
            await system.observe(Observation(kind="assistant", text=reply.text, task_index=task_index, turn=turn,
                                             timestamp=clock.iso()))
            if settings.preference_judge and preferences:
                await _judge_preferences(chat, recorder, preferences, reply.text, task_index, turn, judge_params)

            sim = await chat.chat("simulator", prompts.simulator_messages(user, target, episode.history),  # type: ignore[attr-defined]
                                  params=sim_params, schema=SimulatorReply)
            if sim.parsed is None:
                return _abort(recorder, episode, turn, f"the simulator's reply was unusable: {sim.excluded}")
            answer: SimulatorReply = sim.parsed
            clock.advance(minutes=2)
            user_text = answer.text
            recorder.emit(Message(role="user", content=user_text, task_index=task_index, turn=turn,
                                  feedback_type=answer.feedback_type, is_done=answer.is_done))
            episode.history.append(("user", user_text))
            await system.observe(Observation(kind="user", text=user_text, task_index=task_index, turn=turn,
                                             timestamp=clock.iso()))
            episode.turns = turn
            if answer.is_done:
                episode.end_reason = "satisfied"
                break
    recorder.emit(EpisodeEnd(task_index=task_index, end_reason=episode.end_reason, turns=episode.turns))  # type: ignore[arg-type]
    return episode


async def _judge_preferences(chat: object, recorder: Recorder, preferences: list, reply: str, task_index: int,
                             turn: int, params: SamplingParams) -> None:
    outcome = await chat.chat("preference_judge", prompts.preference_messages(preferences, reply),  # type: ignore[attr-defined]
                              params=params, schema=PreferenceVerdict)
    if outcome.parsed is None:
        recorder.emit(PreferenceJudgment(task_index=task_index, turn=turn, scores={}, mean=None,
                                         call_seq=outcome.call_seq, excluded=outcome.excluded))
        return
    wanted = {p.dimension for p in preferences}
    scores: dict[str, float | None] = {p.dimension: None for p in preferences}
    for rating in outcome.parsed.ratings:
        if rating.dimension in wanted:
            scores[rating.dimension] = None if rating.score is None else float(rating.score)
    given = [s for s in scores.values() if s is not None]
    recorder.emit(PreferenceJudgment(task_index=task_index, turn=turn, scores=scores,
                                     mean=sum(given) / len(given) if given else None, call_seq=outcome.call_seq))


def _abort(recorder: Recorder, episode: Episode, turn: int, why: str) -> Episode:
    recorder.emit(ErrorEvent(where="rollout", error_type="EpisodeAborted", message=why, recoverable=True))
    episode.end_reason = "error"
    episode.turns = turn
    recorder.emit(EpisodeEnd(task_index=episode.task_index, end_reason="error", turns=turn))
    return episode


def record_footprint(recorder: Recorder, system: MemorySystem) -> None:
    """Metric E at the end of a user's trajectory."""
    fp = system.footprint()
    recorder.emit(MemoryFootprint(n_items=fp.n_items, total_chars=fp.total_chars, mean_chars=fp.mean_chars))
