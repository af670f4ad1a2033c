"""Does the embedded model answer as the user? Simulator layouts on fixed conversation states.

    flock /tmp/memprobe-model.lock .venv/bin/python bench/simulator_voice.py --layout NAME [--limit N]
    .venv/bin/python bench/simulator_voice.py --list           # the states, no model call

The live quick job takes 20+ minutes, so a simulator layout is first tried here: the states are the
moments a real run asked the simulator for the user's next message — every distinct one of the shipped
live quick recording (``recordings/sample-quick-sim_01``, the 1.5B's own assistant replies) and the first
two assistant replies of three tasks of each of the paper's users (``sessions/release-a/dialogues``).
Each state is sent under one layout (:data:`LAYOUTS`) to the simulator role of ``sessions/quick.toml``
(local:1.5b) with the live job's sampling (temperature 0.85, seed 0, 120 tokens), through the engine's
chat client: every call is recorded under ``--record`` and cached, so a rerun costs nothing. A plain
:class:`SimulatorReply` schema is asked for, so no repair round hides a first answer; the script prints
each reply and the share the out-of-role detector (``recovery/simulator_voice.py``) passes.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from memprobe_engine.events.header import new_header  # noqa: E402
from memprobe_engine.events.reader import open_recording  # noqa: E402
from memprobe_engine.events.recorder import Recorder  # noqa: E402
from memprobe_engine.events.writer import open_writer  # noqa: E402
from memprobe_engine.llm.client import ChatClient  # noqa: E402
from memprobe_engine.llm.config import load_llm_config  # noqa: E402
from memprobe_engine.llm.embeddings import Embedder  # noqa: E402
from memprobe_engine.llm.types import ChatMessage, SamplingParams  # noqa: E402
from memprobe_engine.recovery import prompts, prompts_embedded  # noqa: E402
from memprobe_engine.recovery.inputs import SimUser, load_users  # noqa: E402
from memprobe_engine.recovery.prompts import Turn  # noqa: E402
from memprobe_engine.recovery.schemas import SimulatorReply  # noqa: E402
from memprobe_engine.recovery.simulator_focus import choose_focus, focus_entries  # noqa: E402
from memprobe_engine.recovery.simulator_voice import out_of_role_reason  # noqa: E402

LIVE_RECORDING = ROOT / "recordings" / "sample-quick-sim_01"
PAPER_DIALOGUES = ROOT / "sessions" / "release-a" / "dialogues"
#: The live quick job's simulator sampling (Makefile LIVE_ARGS; the release's temperature).
TEMPERATURE, SEED, MAX_TOKENS = 0.85, 0, 120
PAPER_TASKS, PAPER_REPLIES = 2, 2


@dataclass(frozen=True)
class State:
    """One moment a simulator was asked for the user's next message."""

    source: str
    user: SimUser
    task_text: str
    history: tuple[Turn, ...]  # opens with the task, ends with the assistant's reply to react to

    @property
    def name(self) -> str:
        return f"{self.source} {self.user.user_id} task {self.task_text[:40]!r} turn {len(self.history) // 2}"


def _dialogues(recording: Path) -> dict[tuple[str, str, int], list[Turn]]:
    """(user, system, task index) → its messages in order; a resumed run's repeats are dropped."""
    out: dict[tuple[str, str, int], list[Turn]] = {}
    with open_recording(recording) as reader:
        for event in reader.iter_events(kinds=["message"]):
            key = (str(event.user_id), str(event.system), int(event.task_index or 0))
            turns = out.setdefault(key, [])
            if event.turn == 0 and turns:
                turns.clear()  # a resumed run writes the episode again
            turns.append((event.role, event.content))
    return out


def states(also: Sequence[Path] = ()) -> list[State]:
    found: list[State] = []
    seen: set[tuple[str, tuple[Turn, ...]]] = set()
    users: dict[str, SimUser] = {u.user_id: u for u in load_users(ROOT / "sessions", ["sim_01"])}
    users.update({u.user_id: u for u in load_users(ROOT / "sessions" / "release-a")})

    def add(source: str, user_id: str, turns: Sequence[Turn], limit: int) -> None:
        taken = 0
        for end, (speaker, _) in enumerate(turns):
            if speaker != "assistant" or taken >= limit:
                continue
            history = tuple(turns[:end + 1])
            if (user_id, history) in seen:
                continue
            seen.add((user_id, history))
            found.append(State(source, users[user_id], turns[0][1], history))
            taken += 1

    for recording in (LIVE_RECORDING, *also):
        for (user_id, _, _), turns in sorted(_dialogues(recording).items()):
            add("live", user_id, turns, 99)
    per_user: dict[str, int] = {}
    for (user_id, _, _), turns in sorted(_dialogues(PAPER_DIALOGUES).items()):
        if per_user.get(user_id, 0) < PAPER_TASKS and len(turns) > 2:
            per_user[user_id] = per_user.get(user_id, 0) + 1
            add("paper", user_id, turns, PAPER_REPLIES)
    return found


Layout = Callable[[SimUser, str, Sequence[Turn]], list[ChatMessage]]


def _script(user: SimUser, task_text: str, history: Sequence[Turn]) -> list[ChatMessage]:
    """(a) The release's content with the whole dialogue in one user message, each line labelled by
    speaker, and the instruction to write only the user's next message."""
    name = user.profile.name.split()[0] if user.profile.name != user.user_id else "this person"
    system = f"{prompts.SIMULATOR_SYSTEM}\n\nYOUR PROFILE AND MEMORY BANK\n{prompts.persona_block(user)}"
    lines = [f"USER: {task_text}"]
    body = list(history[1:]) if history and history[0][0] == "user" else list(history)
    lines += [f"{'ASSISTANT' if speaker == 'assistant' else 'USER'}: {text}" for speaker, text in body]
    earlier = [text for speaker, text in body[:-1] if speaker == "user"][-3:]
    repeat = ("Do not reuse the opening or the sentence shape of your earlier USER messages.\n" if earlier else "")
    prompt = (f"THE CONVERSATION SO FAR. USER is you, {name}; ASSISTANT is the AI assistant helping you.\n\n"
              + "\n\n".join(lines) +
              f"\n\n---\n{repeat}Write USER's next message: what {name} types back to the assistant now. You are "
              f"the one being helped: react to the ASSISTANT's last message as {name} would (ask, correct, push "
              f"back, give a detail it needs, or say you are done). Never write the ASSISTANT's part: no offers of "
              f"help, no advice or suggestions to anyone, no \"let me know if you need anything\".")
    return [ChatMessage(role="system", content=system), ChatMessage(role="user", content=prompt)]


#: Chat layouts asked for a JSON reply; ``embedded`` (the product's :class:`SimulatorLog`) is the log.
LAYOUTS: dict[str, Layout] = {"release": prompts.simulator_messages, "script": _script}


async def run(layout: str, record: Path, limit: int | None, also: Sequence[Path], focus: bool = False,
              seeds: int = 1, live_only: bool = False) -> None:
    config = load_llm_config(ROOT / "sessions" / "quick.toml", os.environ, {})
    record.mkdir(parents=True, exist_ok=True)
    writer = open_writer(record / f"{layout}-{time.strftime('%H%M%S')}", new_header("simulator-voice", "recovery",
                                                     {"suite": "recovery", "layout": layout}))
    recorder = Recorder(writer)
    chat = ChatClient(config, recorder=recorder)
    params = SamplingParams(temperature=TEMPERATURE, max_tokens=MAX_TOKENS, seed=SEED)
    embedder = Embedder.from_spec("st:minilm", recorder=recorder) if focus else None
    in_voice = total = 0
    chosen = [s for s in states(also) if s.source == "live" or not live_only][:limit]
    try:
        for state, seed in ((state, SEED + n) for state in chosen for n in range(seeds)):
            if layout == "embedded":
                entries = [] if embedder is None else await focus_entries(embedder, state.user, state.task_text,
                                                                          state.history)
                pick = await choose_focus(chat, state.user, state.task_text, state.history, entries)
                if seed == SEED and entries:
                    print(f"      focus: {[e.dimension for e in entries]}; picked "
                          f"{(pick.entry.dimension, pick.feedback_type, pick.opening) if pick else None}")
                log = prompts_embedded.simulator_log(state.user, state.task_text, state.history, pick)
                outcome = await chat.chat("simulator", log.messages,
                                          params=params.model_copy(update={"stop": log.stop, "seed": seed}))
                text = log.said(outcome.text or "")
                try:
                    kind: str = log.reply(outcome.text or "").feedback_type
                except ValueError as err:
                    kind = f"unusable ({err})"
            else:
                outcome = await chat.chat("simulator", LAYOUTS[layout](state.user, state.task_text, state.history),
                                          params=params, schema=SimulatorReply)
                text = outcome.parsed.text if outcome.parsed is not None else (outcome.text or "")
                kind = outcome.parsed.feedback_type if outcome.parsed is not None else "-"
            # A line the product cannot use (no label, no text) is asked for again there; here it counts as missed.
            reason = out_of_role_reason(text) if not kind.startswith("unusable") else kind
            total += 1
            in_voice += reason is None
            print(f"[{'ok ' if reason is None else 'OUT'}] {state.name} ({outcome.latency_s:.0f} s"
                  f"{', cached' if outcome.cache_hit else ''})\n      {kind}: {text!r}", flush=True)
    finally:
        await chat.aclose()
        writer.close()
    print(f"{layout}: {in_voice} of {total} first replies usable and in the user's voice by the detector "
          f"({in_voice / max(1, total):.0%})")


async def disclosure(recording: Path, record: Path) -> None:
    """Attribution stage 1 on every task of a live recording, whatever its score: the run asks it only
    for a failed case whose task stage 0 passed, so the recording alone says little per task."""
    from memprobe_engine.recovery.config import framing_of
    from memprobe_engine.recovery.schemas import DisclosureVerdict

    with open_recording(recording) as reader:
        config = reader.header.config
    built = prompts_embedded if framing_of(config) == "embedded" else prompts
    users = {u.user_id: u for u in load_users(Path(config["sessions"]), config.get("users"))}
    dimension_of = {}
    with open_recording(recording) as reader:
        for event in reader.iter_events(kinds=["message"]):
            dimension_of[(str(event.user_id), str(event.system), int(event.task_index or 0))] = str(event.dimension)
    chat_config = load_llm_config(ROOT / "sessions" / "quick.toml", os.environ, {})
    writer = open_writer(record / f"disclosure-{time.strftime('%H%M%S')}", new_header("simulator-voice", "recovery",
                                                           {"suite": "recovery", "source": str(recording)}))
    chat = ChatClient(chat_config, recorder=Recorder(writer))
    params = SamplingParams(temperature=0.0, max_tokens=config.get("judge_max_tokens"))
    disclosed = total = 0
    try:
        for (user_id, system, task_index), turns in sorted(_dialogues(recording).items()):
            entry = users[user_id].bank.entry(dimension_of[(user_id, system, task_index)])
            assert entry is not None
            schema = prompts_embedded.quoted_disclosure(turns) if built is prompts_embedded else DisclosureVerdict
            out = await chat.chat("attribution_judge", built.disclosure_messages(turns[0][1], turns, entry),
                                  params=params, schema=schema)
            verdict = out.parsed
            total += 1
            disclosed += bool(verdict is not None and verdict.disclosed)
            print(f"{system:13} task {task_index} {entry.dimension:30} "
                  f"{'-' if verdict is None else 'disclosed' if verdict.disclosed else 'not disclosed'}: "
                  f"{verdict.evidence if verdict is not None else out.excluded!r}", flush=True)
    finally:
        await chat.aclose()
        writer.close()
    print(f"stage 1 says disclosed in {disclosed} of {total} tasks (system × task)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layout", choices=sorted([*LAYOUTS, "embedded"]), default="embedded")
    parser.add_argument("--record", type=Path, default=Path("/tmp/simulator-voice"))
    parser.add_argument("--limit", type=int)
    parser.add_argument("--also", type=Path, action="append", default=[],
                        help="another live recording of sim_01 whose states to add")
    parser.add_argument("--list", action="store_true", help="print the states and stop")
    parser.add_argument("--focus", action="store_true",
                        help="embedded layout: name the bank entries closest to the moment (recovery/simulator_focus.py)")
    parser.add_argument("--seeds", type=int, default=1, help="lines per state, seeds 0..N-1")
    parser.add_argument("--live-only", action="store_true", help="only the live quick recording's states")
    parser.add_argument("--disclosure", type=Path, metavar="RECORDING",
                        help="instead: attribution stage 1 on every task of this live recording")
    args = parser.parse_args()
    if args.disclosure is not None:
        asyncio.run(disclosure(args.disclosure, args.record))
        return
    if args.list:
        for state in states(args.also):
            print(state.name, "→", state.history[-1][1][:80].replace("\n", " "))
        return
    asyncio.run(run(args.layout, args.record, args.limit, args.also, args.focus, args.seeds, args.live_only))


if __name__ == "__main__":
    main()
