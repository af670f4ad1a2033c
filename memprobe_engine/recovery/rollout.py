"""Simulation rollout: a simulated user works through its tasks with a memory-equipped assistant.

Everything except the memory system is held constant: the same tasks, simulator prompt, assistant
scaffold and turn cap. Memory persists across one user's tasks. Each task is an ``episode`` span,
each exchange a ``turn`` span; messages, retrievals, preference judgments and the episode's end
reason are events, and the memory system records its own operations.

The order inside a turn follows the recovery release's runner: the memory is searched with the
user's latest message *before* that message is written, the assistant replies, the preference judge
rates the reply, the simulator reacts. An assistant reply is offered to the memory only when the
episode goes on — the release never stores a task's final reply — and the user's last message is
written when the episode ends. An episode ends only when the simulator says ``satisfied`` or at
the turn cap. A simulator reply still unusable after the client's repair rounds follows the
exclusion policy (:mod:`.policy`) and never counts against metric A.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from memprobe_engine.events.dialogue import Message
from memprobe_engine.events.memory import Retrieval
from memprobe_engine.events.recorder import Recorder
from memprobe_engine.events.recovery import EpisodeEnd, PreferenceJudgment
from memprobe_engine.events.run import ErrorEvent
from memprobe_engine.llm.types import SamplingParams
from memprobe_engine.memory.base import AgentContext, MemorySystem, Observation, ScoredItem, SimClock, memory_line
from memprobe_engine.recovery import prompts, prompts_embedded
from memprobe_engine.recovery.config import DEFAULT_MAX_TURNS
from memprobe_engine.recovery.framing import DEFAULT_FRAMING, Framing
from memprobe_engine.recovery.inputs import BankEntry, SimUser, Task
from memprobe_engine.recovery.policy import DEFAULT_POLICY, ExclusionPolicy, release_user_text
from memprobe_engine.recovery.prompts import Turn
from memprobe_engine.recovery.schemas import PreferenceVerdict, SimulatorReply
from memprobe_engine.recovery.simulator_focus import choose_focus, focus_entries

if TYPE_CHECKING:
    from memprobe_engine.llm.client import ChatClient
    from memprobe_engine.llm.embeddings import TextEmbedder

#: The release's sampling temperatures: assistant replies 0.7, simulated user 0.85, judges 0.
AGENT_TEMPERATURE = 0.7
SIMULATOR_TEMPERATURE = 0.85


@dataclass(frozen=True)
class RolloutSettings:
    """Knobs of the episode loop. Defaults are the release's: 25 turns, k = 5, no reply caps (a
    cap of ``None`` sends none); the README's quick run turns turns and caps down for small CPUs."""

    max_turns: int = DEFAULT_MAX_TURNS
    agent_max_tokens: int | None = None
    simulator_max_tokens: int | None = None
    judge_max_tokens: int | None = None
    #: The preference judge rates every preference of the user with a reason each, so it needs a
    #: bigger budget than one slot-fill or one judge score; ``None`` means ``judge_max_tokens``, 0 none.
    preference_judge_max_tokens: int | None = None
    agent_k: int = 5
    agent_temperature: float = AGENT_TEMPERATURE
    simulator_temperature: float = SIMULATOR_TEMPERATURE
    seed: int = 0
    preference_judge: bool = True
    policy: ExclusionPolicy = DEFAULT_POLICY
    #: How prompts are laid out for the model (:mod:`.framing`); ``release`` is the paper's.
    framing: Framing = DEFAULT_FRAMING
    #: Who judges a fill (:mod:`.judge_kind`): ``model`` (the paper's judge) or ``calibrated:NAME``.
    recovery_judge: str = "model"

    @property
    def preference_judge_cap(self) -> int | None:
        """The reply cap the preference judge is sent."""
        if self.preference_judge_max_tokens is None:
            return self.judge_max_tokens
        return self.preference_judge_max_tokens or None


@dataclass
class Episode:
    """What one task's dialogue produced (kept in memory for attribution stages 1 and 2)."""

    task: Task
    task_index: int
    history: list[Turn] = field(default_factory=list)
    end_reason: str = "turn_cap"
    turns: int = 0
    unusable_replies: int = 0


def memory_block(hits: Sequence[ScoredItem]) -> str:
    """How retrieved items are shown to the assistant: one line per item (its text and tags)."""
    return "\n".join(memory_line(hit.item) for hit in hits)


async def agent_context(system: MemorySystem, query: str, k: int, task_index: int) -> AgentContext:
    """The system's own ``agent_context`` hook when it has one, else its ``search(query, k)``."""
    hook = getattr(system, "agent_context", None)
    if hook is not None:
        context: AgentContext = await hook(query, k, task_index)
        return context
    return AgentContext(hits=await system.search(query, k))


async def open_turn(recorder: Recorder, system: MemorySystem, clock: SimClock, settings: RolloutSettings, *,
                    user_text: str, user_kind: str, user_turn: int, task_index: int) -> AgentContext:
    """The start of every turn, live or fixed: the memory is searched with the user's latest message
    (recorded as the assistant's retrieval) before that message is written to it. One function, so a
    fixed-dialogue run feeds the memory in exactly the live rollout's order."""
    clock.advance(minutes=2)
    context = await agent_context(system, user_text, settings.agent_k, task_index)
    recorder.emit(Retrieval(query=user_text, k=settings.agent_k, item_ids=[h.id for h in context.hits],
                            scores=[h.score for h in context.hits], purpose="agent_context"))
    await system.observe(Observation(kind=user_kind, text=user_text, task_index=task_index, turn=user_turn,
                                     timestamp=clock.iso()))
    return context


async def run_episode(*, chat: ChatClient, recorder: Recorder, system: MemorySystem, user: SimUser, task: Task,
                      task_index: int, clock: SimClock, settings: RolloutSettings,
                      embedder: TextEmbedder | None = None) -> Episode:
    """One task from the user's opening request to satisfaction or the turn cap. The embedded
    framing's simulator needs ``embedder`` for its focus (:mod:`.simulator_focus`)."""
    if settings.framing == "embedded" and embedder is None:
        raise ValueError("the embedded framing's simulated user needs an embedder (recovery/simulator_focus.py)")
    preferences = [e for e in user.bank.entries if e.category == "assistance_preference"]
    episode = Episode(task=task, task_index=task_index)
    clock.advance(days=1)
    user_text, user_turn, user_kind = task.task, 0, "task"
    recorder.emit(Message(role="user", content=user_text, task_index=task_index, turn=0))
    episode.history.append(("user", user_text))
    agent_params = SamplingParams(temperature=settings.agent_temperature, max_tokens=settings.agent_max_tokens,
                                  seed=settings.seed)
    sim_params = SamplingParams(temperature=settings.simulator_temperature,
                                max_tokens=settings.simulator_max_tokens, seed=settings.seed)
    judge_params = SamplingParams(temperature=0.0, max_tokens=settings.preference_judge_cap)

    for turn in range(1, settings.max_turns + 1):
        with recorder.span(f"turn {turn}", "turn", turn=turn, task_index=task_index):
            context = await open_turn(recorder, system, clock, settings, user_text=user_text, user_kind=user_kind,
                                      user_turn=user_turn, task_index=task_index)
            messages = prompts.agent_messages(memory_block(context.hits), episode.history, context.prior_dialogue)
            reply = await chat.chat("agent", messages, params=agent_params)
            if reply.text is None:
                return _abort(recorder, episode, turn, "the agent call returned no text")
            recorder.emit(Message(role="assistant", content=reply.text, task_index=task_index, turn=turn))
            episode.history.append(("assistant", reply.text))
            # The preference judge reads only this reply, and the simulator never sees its verdict, so
            # the two calls run side by side (on two of the embedded server's slots).
            judging = asyncio.ensure_future(_judge_preferences(
                chat, recorder, preferences, task.task, reply.text, task_index, turn, judge_params)) \
                if settings.preference_judge and preferences else None
            try:
                if settings.framing == "embedded":
                    assert embedder is not None
                    focus = await focus_entries(embedder, user, task.task, episode.history)
                    pick = await choose_focus(chat, user, task.task, episode.history, focus)
                    parsed, raw_text, excluded = await _in_role_reply(chat, prompts_embedded.simulator_log(
                        user, task.task, episode.history, pick), sim_params)
                else:
                    sim = await chat.chat("simulator", prompts.simulator_messages(user, task.task, episode.history),
                                          params=sim_params, schema=SimulatorReply)
                    parsed, raw_text, excluded = sim.parsed, release_user_text(sim.text or ""), sim.excluded
            except BaseException:
                if judging is not None:
                    judging.cancel()
                    await asyncio.gather(judging, return_exceptions=True)
                raise
            if judging is not None:
                await judging
            clock.advance(minutes=2)
            episode.turns = turn
            if parsed is None:
                episode.unusable_replies += 1
                recorder.emit(ErrorEvent(where="rollout", error_type="SimulatorReplyUnusable", recoverable=True,
                                         message=f"turn {turn}: {excluded} ({settings.policy} policy)"))
                if settings.policy == "audit":
                    return await end_episode(recorder, system, episode, "excluded", clock,
                                f"the simulator's reply at turn {turn} was unusable: {excluded}")
                # The release's fallback: a follow-up with whatever text the reply held.
                feedback, user_text = "followup", raw_text
            else:
                answer: SimulatorReply = parsed
                feedback, user_text = answer.feedback_type, answer.text
            done = feedback == "satisfied"
            recorder.emit(Message(role="user", content=user_text, task_index=task_index, turn=turn,
                                  feedback_type=feedback, is_done=done))
            episode.history.append(("user", user_text))
            user_turn, user_kind = turn, "user"
            if done:
                return await end_episode(recorder, system, episode, "satisfied", clock)
            if turn < settings.max_turns:  # the episode goes on: this reply was not the last one
                await system.observe(Observation(kind="assistant", text=reply.text, task_index=task_index,
                                                 turn=turn, timestamp=clock.iso()))
    reason = "excluded" if episode.unusable_replies else "turn_cap"
    return await end_episode(recorder, system, episode, reason, clock,
                "hit the turn cap after an unusable simulator reply" if episode.unusable_replies else None)


#: Fresh samples the embedded framing's simulator gets after an unusable line (the client's two
#: repair rounds, as a resample: a small model shown its own out-of-role reply repeats it).
IN_ROLE_RESAMPLES = 2


async def _in_role_reply(chat: ChatClient, log: prompts_embedded.SimulatorLog,
                         params: SamplingParams) -> tuple[SimulatorReply | None, str, str | None]:
    """The user's next line under the embedded framing: (reply, text to fall back on, why unusable).
    An unusable line is asked for again with the next seed (each its own recorded, cached call)."""
    reason, fallback = "", ""
    for attempt in range(IN_ROLE_RESAMPLES + 1):
        seed = None if params.seed is None else params.seed + attempt
        outcome = await chat.chat("simulator", log.messages,
                                  params=params.model_copy(update={"seed": seed, "stop": log.stop}))
        try:
            return log.reply(outcome.text or ""), "", None
        except ValueError as err:
            reason = str(err)
            fallback = fallback or log.said(outcome.text or "")
    return None, fallback, f"the user's line was still unusable after {IN_ROLE_RESAMPLES} resample(s): {reason}"


async def end_episode(recorder: Recorder, system: MemorySystem, episode: Episode, reason: str, clock: SimClock,
               why: str | None = None) -> Episode:
    """Write the user's last message to memory (the release's end-of-episode write) and record
    how the episode ended. ``excluded`` keeps the episode out of metric A."""
    speaker, text = episode.history[-1]
    if speaker == "user" and len(episode.history) > 1:
        await system.observe(Observation(kind="user", text=text, task_index=episode.task_index, turn=episode.turns,
                                         timestamp=clock.iso()))
    episode.end_reason = reason
    recorder.emit(EpisodeEnd(task_index=episode.task_index, end_reason=reason, turns=episode.turns,
                             excluded=why if reason == "excluded" else None))
    return episode


async def _judge_preferences(chat: ChatClient, recorder: Recorder, preferences: list[BankEntry], task_text: str,
                             reply: str, task_index: int, turn: int, params: SamplingParams) -> None:
    outcome = await chat.chat("preference_judge", prompts.preference_messages(preferences, task_text, reply),
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

