"""Fixed-dialogue (off-policy) runs of protocol A: a recorded dialogue instead of a live rollout.

``memprobe run --dialogues SOURCE`` takes each selected task's user and assistant turns from an
earlier recording (an imported release run's ``nomem`` transcripts, or any MemProbe recording) and
feeds them to the memory system under test exactly as :func:`.rollout.run_episode` would: the same
observations in the same order, the same simulated clock, the same agent-context retrieval, the
same spans and events. No simulator, assistant or preference-judge call is made, so the memory
system alone (collect → recover) is measured on identical evidence; slot-fill, judge and
attribution then run as usual, attribution reading the fixed transcript.

SOURCE is ``RECORDING`` or ``RECORDING@SYSTEM`` (:mod:`.dialogue_source`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from memprobe_engine.errors import ConfigError
from memprobe_engine.events.dialogue import Message
from memprobe_engine.events.reader import open_recording
from memprobe_engine.events.recorder import Recorder
from memprobe_engine.events.recovery import EpisodeEnd
from memprobe_engine.events.run import SpanBegin
from memprobe_engine.memory.base import MemorySystem, Observation, SimClock
from memprobe_engine.recovery.dialogue_source import DialogueSource
from memprobe_engine.recovery.inputs import Task
from memprobe_engine.recovery.rollout import Episode, RolloutSettings, end_episode, open_turn


@dataclass(frozen=True)
class Exchange:
    """One turn of a recorded dialogue: the assistant's reply and the user's answer to it (None when
    the source ended right after the reply)."""

    reply: str
    answer: str | None = None
    feedback_type: str | None = None
    is_done: bool = False


@dataclass
class FixedDialogue:
    """One task's recorded dialogue: its opening, the exchanges in order, how the source ended it."""

    opening: str | None = None
    exchanges: list[Exchange] = field(default_factory=list)
    end_reason: str | None = None


@dataclass
class FixedDialogues:
    """Every (user, dimension) dialogue of one source."""

    source: DialogueSource
    by_case: dict[tuple[str, str], FixedDialogue]

    def get(self, user_id: str, dimension: str) -> FixedDialogue:
        return self.by_case[(user_id, dimension)]

    def check_covers(self, cases: Iterable[tuple[str, str]]) -> None:
        """One clear error naming the first selected task the source has no dialogue for."""
        missing = [case for case in cases if case not in self.by_case]
        if missing:
            user_id, dimension = missing[0]
            raise ConfigError(
                f"--dialogues {self.source.recording}: no {self.source.system} dialogue for {user_id} × {dimension} "
                f"({len(missing)} selected task(s) missing). Select users and --dims the source recorded, or "
                f"name a source that holds them.")


def load_dialogues(source: DialogueSource) -> FixedDialogues:
    """Every dialogue of ``source.system`` in the recording. A unit that ran again (a resumed run)
    replaces its earlier attempt; an episode without ``episode_end`` is left out."""
    collected: dict[tuple[str, str], FixedDialogue] = {}
    ended: set[tuple[str, str]] = set()
    dimension_of: dict[tuple[str, int], str] = {}
    with open_recording(source.recording) as reader:
        for event in reader.iter_events(kinds=["span_begin", "message", "episode_end"]):
            if event.system != source.system or event.user_id is None:
                continue
            user_id = event.user_id
            if isinstance(event, SpanBegin):
                if event.span_kind == "unit":
                    for case in [c for c in collected if c[0] == user_id]:
                        del collected[case]
                        ended.discard(case)
                elif event.span_kind == "episode" and event.dimension is not None:
                    index = event.attrs.get("task_index")
                    if isinstance(index, int):
                        dimension_of[(user_id, index)] = event.dimension
                        collected[(user_id, event.dimension)] = FixedDialogue()
                continue
            if not isinstance(event, (Message, EpisodeEnd)):
                continue
            index = -1 if event.task_index is None else event.task_index
            dimension = event.dimension or dimension_of.get((user_id, index))
            if dimension is None or (user_id, dimension) not in collected:
                continue
            dialogue = collected[(user_id, dimension)]
            if isinstance(event, EpisodeEnd):
                dialogue.end_reason = event.end_reason
                ended.add((user_id, dimension))
            else:
                _add_message(dialogue, event)
    return FixedDialogues(source, {case: d for case, d in collected.items() if case in ended})


def _add_message(dialogue: FixedDialogue, message: Message) -> None:
    if message.role == "user" and (message.turn or 0) == 0:
        dialogue.opening = message.content
    elif message.role == "assistant":
        dialogue.exchanges.append(Exchange(reply=message.content))
    elif message.role == "user" and dialogue.exchanges and dialogue.exchanges[-1].answer is None:
        last = dialogue.exchanges[-1]
        dialogue.exchanges[-1] = Exchange(reply=last.reply, answer=message.content,
                                          feedback_type=message.feedback_type, is_done=bool(message.is_done))


async def replay_episode(*, recorder: Recorder, system: MemorySystem, task: Task, task_index: int,
                         clock: SimClock, settings: RolloutSettings, dialogue: FixedDialogue) -> Episode:
    """One task fed from ``dialogue``: the live rollout's observation order and clock, no model call
    of the rollout's own. Cut at the turn cap; the source's end reason otherwise stands."""
    episode = Episode(task=task, task_index=task_index)
    clock.advance(days=1)
    user_text, user_turn, user_kind = dialogue.opening or task.task, 0, "task"
    recorder.emit(Message(role="user", content=user_text, task_index=task_index, turn=0))
    episode.history.append(("user", user_text))
    exchanges: Sequence[Exchange] = dialogue.exchanges[:settings.max_turns]
    for turn, exchange in enumerate(exchanges, 1):
        with recorder.span(f"turn {turn}", "turn", turn=turn, task_index=task_index):
            await open_turn(recorder, system, clock, settings, user_text=user_text, user_kind=user_kind,
                            user_turn=user_turn, task_index=task_index)
            recorder.emit(Message(role="assistant", content=exchange.reply, task_index=task_index, turn=turn))
            episode.history.append(("assistant", exchange.reply))
            clock.advance(minutes=2)
            episode.turns = turn
            if exchange.answer is None:  # the source stopped after this reply
                break
            recorder.emit(Message(role="user", content=exchange.answer, task_index=task_index, turn=turn,
                                  feedback_type=exchange.feedback_type, is_done=exchange.is_done))
            episode.history.append(("user", exchange.answer))
            user_text, user_turn, user_kind = exchange.answer, turn, "user"
            if exchange.is_done:
                return await end_episode(recorder, system, episode, "satisfied", clock)
            if turn < len(exchanges):  # the episode goes on: this reply was not the last one
                await system.observe(Observation(kind="assistant", text=exchange.reply, task_index=task_index,
                                                 turn=turn, timestamp=clock.iso()))
    cut = len(dialogue.exchanges) > len(exchanges)
    reason = "turn_cap" if cut or dialogue.end_reason in (None, "satisfied") else dialogue.end_reason
    why = f"the source's episode ended {reason}" if reason == "excluded" else None
    return await end_episode(recorder, system, episode, reason, clock, why)
