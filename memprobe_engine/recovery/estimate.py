"""What a protocol-A run will ask of its models, before it runs: calls and tokens per role, as a range.

The estimate follows the protocol's shape over the selected inputs and builds the real prompts
wherever their content is known before the run:

* **slot_filler** — one call per (user, system with memory, dimension, mode); ``nomem`` needs none
  (an empty memory is "unknown" without a call). The prompt is the real slot-fill prompt around the
  store: for a fixed-dialogue run and ``longctx_full`` the store is known exactly (every recorded
  turn of the selected tasks, in that system's item layout); top-k reads the k shortest to the k
  longest items. Other systems write their own notes: 0.3× to 1.5× of the verbatim store.
* **recovery_judge** — one call per slot-fill that is not "unknown"; the real judge prompt with the
  bank entry and a label.
* **attribution_judge** — for a case scored below 0.75: stage 0 once per (user, dimension) (shared by
  systems and modes), stage 1 when the task could invite the evidence, stage 2 when it was not
  disclosed; stages 1 and 2 read the task's dialogue.
* a live rollout adds **agent**, **simulator** (1 to the turn cap per task; twice that under the
  embedded framing, whose focus pick is a simulator call before each line) and, when on, the
  **preference_judge** (one per assistant turn); the memory systems' own **memory_writer** calls are
  the system's ``expected_writes`` over a fixed dialogue's turns where it declares them (amem), else
  one to three per observation (mem0, memt…).

Tokens are characters / 3.8 expected (``llm/usage_estimate.py``). The expected number of judge and
attribution calls follows the runner's branches — a fill that is "unknown" goes to no judge, a case
scored ≥ 0.75 is not attributed, stage 1 runs only where stage 0 said the task can invite the
evidence, stage 2 only where stage 1 found it not disclosed — with each branch's share measured on
earlier recordings made with the same models (:mod:`.outcome_shares`; one half when none is
measured). The range holds whatever the models do: no judge or attribution call beyond stage 0 (low)
to every stage for every case (high).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

import orjson

from memprobe_engine.llm.usage_estimate import CostEstimate, answer_tokens
from memprobe_engine.recovery import prompts, prompts_embedded
from memprobe_engine.recovery.config import RecoveryConfig
from memprobe_engine.recovery.input_rules import CATEGORY_GUIDE
from memprobe_engine.recovery.inputs import BankEntry, SimUser, load_users
from memprobe_engine.recovery.outcome_shares import OutcomeShares
from memprobe_engine.recovery.scoring import RETRIEVE_K
from memprobe_engine.recovery.simulator_focus import CHOICE_MAX_TOKENS, FOCUS_SIZE
from memprobe_engine.recovery.unit import tasks_for

if TYPE_CHECKING:
    from memprobe_engine.recovery.runner import RecoveryPlan

#: A label the slot-filler writes (the judge's prompt holds it).
_LABEL = "prefers short, structured step-by-step plans with clear checklists"
#: Writing systems' store size against the verbatim store (notes are shorter or carry extra fields).
_WRITER_STORE = (0.3, 1.0, 1.5)
#: Characters of one live message when the dialogue is not known in advance.
_LIVE_MESSAGE_CHARS = (150, 500, 1500)
_TIMESTAMP = "2026-01-01T09:00:00"
_NO_MEMORY = frozenset({"nomem"})
_VERBATIM = frozenset({"longctx_full"})


def _chars(messages: Sequence[Any]) -> int:
    return sum(len(m.content) for m in messages)


def _verbatim_store(turns: Sequence[tuple[int, int, str, str]]) -> list[dict[str, Any]]:
    """longctx_full's items for (task_index, turn, kind, text) observations (its native layout)."""
    items = []
    for n, (task_index, turn, kind, text) in enumerate(turns):
        if kind == "task":
            items.append({"id": f"m{n}", "content": f"[Task {task_index}] {text}", "category": "task",
                          "task_index": task_index, "timestamp": _TIMESTAMP})
        else:
            prefix, category = ("User: ", "user_reply") if kind == "user" else ("Agent: ", "agent_reply")
            items.append({"id": f"m{n}", "content": prefix + text, "category": category, "task_index": task_index,
                          "turn": turn, "timestamp": _TIMESTAMP})
    return items


def _store_json_chars(items: Sequence[dict[str, Any]]) -> int:
    return len(orjson.dumps(list(items), option=orjson.OPT_INDENT_2))


def estimate_recovery(plan: RecoveryPlan, shares: OutcomeShares | None = None) -> CostEstimate:
    """The calls and tokens per role a run of ``plan`` is expected to need (see the module docstring);
    ``shares``: the branch shares measured on earlier recordings (none: one half each)."""
    from memprobe_engine.memory.registry import load_system_class, system_needs
    from memprobe_engine.recovery.fixed_dialogues import load_dialogues

    s = plan.settings
    built = prompts_embedded if s.framing == "embedded" else prompts
    users = load_users(plan.sessions_dir, plan.users)
    dialogues = load_dialogues(plan.dialogues) if plan.dialogues is not None else None
    estimate = CostEstimate(roles={})
    shares = shares if shares is not None else OutcomeShares()
    judge_answer = answer_tokens(s.judge_max_tokens)
    writers = [name for name in plan.systems if "memory_writer" in system_needs(name).model_roles]
    for user in users:
        tasks = tasks_for(user, plan.dimensions)
        entries = {e.dimension: e for e in user.bank.entries}
        turns: list[tuple[int, int, str, str]] = []
        histories: dict[str, tuple[float, float, float]] = {}
        for index, task in enumerate(tasks):
            if dialogues is not None:
                dialogue = dialogues.get(user.user_id, task.dimension)
                own = [(index, 0, "task", dialogue.opening or task.task)]
                exchanges = dialogue.exchanges[:s.max_turns]
                for turn, exchange in enumerate(exchanges, 1):
                    # As the fixed-dialogue feed observes them: a reply only when the episode goes on.
                    if turn < len(exchanges):
                        own.append((index, turn, "assistant", exchange.reply))
                    if exchange.answer is not None:
                        own.append((index, turn, "user", exchange.answer))
                    if exchange.answer is None or exchange.is_done:
                        break
                turns += own
                chars = float(sum(len(text) + 12 for *_, text in own))
                histories[task.dimension] = (chars, chars, chars)
            else:
                low, mid, high = _LIVE_MESSAGE_CHARS
                expected_turns = sum(shares.expected_turns(s.max_turns))
                histories[task.dimension] = (2 * low + len(task.task), 2 * expected_turns * mid + len(task.task),
                                             2 * s.max_turns * high + len(task.task))
                _live_roles(estimate, plan, user, task.task, index, shares.expected_turns(s.max_turns))
        store = _verbatim_store(turns) if turns else []
        for dimension in [t.dimension for t in tasks]:
            entry = entries[dimension]
            shell = _chars(built.slot_fill_messages(entry.dimension, entry.category, CATEGORY_GUIDE[entry.category],
                                                    "[]"))
            _score_dimension(estimate, plan, built, entry, shell, store, histories[dimension], shares,
                             judge_answer, [t.task for t in tasks if t.dimension == dimension][0])
        if writers:
            # Observations: the known turns of fixed dialogues, else 1 turn to the cap per live task.
            seen = (float(len(turns)),) * 3 if turns else \
                (2.0 * len(tasks), (2.0 * sum(shares.expected_turns(s.max_turns)) + 1) * len(tasks),
                 (2.0 * s.max_turns + 1) * len(tasks))
            chars = float(sum(len(t[3]) for t in turns)) / max(1, len(turns)) if turns else 500.0
            for name in writers:
                expected_writes = getattr(load_system_class(name), "expected_writes", None)
                if turns and expected_writes is not None:  # the system's own calls over the known turns
                    calls, _ = expected_writes([(kind, text) for _, _, kind, text in turns])
                    for prompt_chars, cap in calls:
                        estimate.role("memory_writer").add_calls((1, 1, 1), (prompt_chars,) * 3, answer_tokens(cap))
                    continue
                estimate.role("memory_writer").add_calls(
                    (seen[0], 2 * seen[1], 3 * seen[2]), (1500 + chars, 3000 + chars, 6000 + chars),
                    answer_tokens(None))
    estimate.notes.append(shares.describe(plan.systems, live=dialogues is None))
    if dialogues is None:
        estimate.notes.append("live rollout: dialogue lengths are not known before the run (1 turn to the cap "
                              "per task, messages of 150–1,500 characters), so agent, simulator and attribution "
                              "ranges are wide")
    if any(name not in _VERBATIM | _NO_MEMORY for name in plan.systems):
        estimate.notes.append("systems that write their own notes: store size taken as 0.3×–1.5× of the verbatim "
                              "turns")
    return estimate


def _score_dimension(estimate: CostEstimate, plan: RecoveryPlan, built: ModuleType, entry: BankEntry, shell: int,
                     store: list[dict[str, Any]], history: tuple[float, float, float], shares: OutcomeShares,
                     judge_answer: tuple[float, float, float], task_text: str) -> None:
    """Slot-fill, judge and attribution of one (user, dimension) over every system and mode, as
    ``unit.run_unit`` and ``attribution.attribute`` branch."""
    s = plan.settings
    full = _store_json_chars(store) if store else None
    sizes = sorted(_store_json_chars([item]) for item in store)
    judge_chars = float(_chars(built.judge_messages(entry, _LABEL)))
    below = 0.0  # expected cases scored below 0.75 (each is attributed)
    below_high = 0
    all_recovered = 1.0  # the chance that no case of this dimension needs attribution
    for system in plan.systems:
        for mode in plan.modes:
            if system in _NO_MEMORY:  # an empty memory fills "unknown": scored 0 without a call
                below += 1
                below_high += 1
                all_recovered = 0.0
                continue
            if mode == "dump_all":
                base = (full, full, full) if full is not None else (500.0, 3000.0, 40_000.0)
            else:
                k = min(RETRIEVE_K, len(sizes)) if sizes else RETRIEVE_K
                low, high = (float(sum(sizes[:k])), float(sum(sizes[-k:]))) if sizes else (300.0, 5000.0)
                base = (low, (low + 3 * high) / 4, high)  # retrieval favours the longer, richer turns
            if system not in _VERBATIM:
                base = (base[0] * _WRITER_STORE[0], base[1] * _WRITER_STORE[1], base[2] * _WRITER_STORE[2])
            chars = (shell + base[0], shell + base[1], shell + base[2])
            estimate.role("slot_filler").add_calls((0, 1, 1), chars, answer_tokens(s.judge_max_tokens))
            if s.recovery_judge == "model":  # a calibrated judge makes no model call
                estimate.role("recovery_judge").add_calls((0, shares.of_system(shares.judged, system).share, 1),
                                                          (judge_chars,) * 3, judge_answer)
            recovered = shares.of_system(shares.recovered, system).share
            below += 1 - recovered
            below_high += 1
            all_recovered *= recovered
    # Stage 0: once per (user, dimension) when any case failed (shared by systems and modes).
    attribution = estimate.role("attribution_judge")
    stage0_chars = float(_chars(built.task_design_messages(task_text, entry)))
    stage0 = (1.0 if any(name in _NO_MEMORY for name in plan.systems) else 0.0, 1 - all_recovered,
              1.0 if below_high else 0.0)
    attribution.add_calls(stage0, (stage0_chars,) * 3, judge_answer)
    # Stages 1 and 2 read the task's dialogue, per failed case: stage 1 when the task can invite the
    # evidence, stage 2 when stage 1 found it not disclosed.
    history_turns = [("user", "x" * int(history[1]))]
    for stage_messages, share in ((built.disclosure_messages, shares.can_invite.share),
                                  (built.elicitation_messages,
                                   shares.can_invite.share * (1 - shares.disclosed.share))):
        stage_chars = float(_chars(stage_messages(task_text, history_turns, entry)))
        attribution.add_calls((0, below * share, below_high),
                              (stage_chars - history[1] + history[0], stage_chars,
                               stage_chars - history[1] + history[2]), judge_answer)


def _live_roles(estimate: CostEstimate, plan: RecoveryPlan, user: SimUser, task_text: str, task_index: int,
                reach: list[float]) -> None:
    """Agent, simulator and preference-judge calls of one live task, for every system, each prompt the
    real one (``rollout.run_episode``'s) around placeholder messages: 1 turn of short messages (low),
    each turn weighted by the chance ``reach`` that the episode gets there, with mid-sized messages
    (expected), the turn cap of long ones (high)."""
    s = plan.settings
    built = prompts_embedded if s.framing == "embedded" else prompts
    preferences = [e for e in user.bank.entries if e.category == "assistance_preference"]
    scenarios = [([1.0], _LIVE_MESSAGE_CHARS[0]), (reach, _LIVE_MESSAGE_CHARS[1]),
                 ([1.0] * s.max_turns, _LIVE_MESSAGE_CHARS[2])]
    calls = (1.0, sum(reach), float(s.max_turns))
    for system in plan.systems:
        agent: list[float] = []
        simulator: list[float] = []
        pick: list[float] = []  # the embedded framing's focus pick, one per simulator turn
        judge: list[float] = []
        for weights, size in scenarios:
            reply = "x" * int(min(size, 4 * s.agent_max_tokens) if s.agent_max_tokens else size)
            answer = "x" * int(min(size, 4 * s.simulator_max_tokens) if s.simulator_max_tokens else size)
            turns = sum(weights)
            # What the memory shows the assistant: nothing (nomem), every earlier task verbatim
            # (longctx_full), else up to agent_k items of a message's size.
            if system in _NO_MEMORY:
                memory, prior = "", []
            elif system in _VERBATIM:
                memory = ""
                prior = ([("user", task_text)] + [("assistant", reply), ("user", answer)] * round(turns)) * task_index
            else:
                memory, prior = "\n".join(["• " + answer] * min(s.agent_k, round(task_index * turns) + 1)), []
            history: list[tuple[str, str]] = [("user", task_text)]
            agent_chars = sim_chars = pick_chars = 0.0
            for weight in weights:
                agent_chars += weight * _chars(prompts.agent_messages(memory, history, prior))
                history.append(("assistant", reply))
                sim_chars += weight * _chars(built.simulator_messages(user, task_text, history))
                pick_chars += weight * _chars(prompts_embedded.focus_choice_messages(
                    user, task_text, history, user.bank.entries[:FOCUS_SIZE]))
                history.append(("user", answer))
            agent.append(agent_chars)
            simulator.append(sim_chars)
            pick.append(pick_chars)
            judge.append(turns * float(_chars(prompts.preference_messages(preferences, task_text, reply))))
        estimate.role("agent").add_calls(calls, _per_call(agent, calls), answer_tokens(s.agent_max_tokens))
        estimate.role("simulator").add_calls(calls, _per_call(simulator, calls),
                                             answer_tokens(s.simulator_max_tokens))
        if s.framing == "embedded":
            estimate.role("simulator").add_calls(calls, _per_call(pick, calls), answer_tokens(CHOICE_MAX_TOKENS))
        if s.preference_judge and preferences:
            estimate.role("preference_judge").add_calls(calls, _per_call(judge, calls),
                                                        answer_tokens(s.preference_judge_cap))


def _per_call(totals: list[float], calls: tuple[float, float, float]) -> tuple[float, float, float]:
    return totals[0] / calls[0], totals[1] / calls[1], totals[2] / calls[2]


def plan_from_config(config: RecoveryConfig | Mapping[str, object]) -> RecoveryPlan | None:
    """The plan a protocol-A recording's header describes (for the report's estimate beside the
    actual tokens); None when the header is not a run's (an import) or its inputs are gone."""
    from pathlib import Path

    from memprobe_engine.recovery.dialogue_source import DialogueSource
    from memprobe_engine.recovery.rollout import RolloutSettings
    from memprobe_engine.recovery.runner import RecoveryPlan

    if not isinstance(config, RecoveryConfig):
        config = RecoveryConfig.of(config)
    sessions = config.sessions
    if config.suite != "recovery" or config.imported or sessions is None or not Path(sessions).is_dir():
        return None
    dialogues = config.dialogues
    settings = RolloutSettings(
        max_turns=config.max_turns, judge_max_tokens=config.judge_max_tokens,
        agent_max_tokens=config.agent_max_tokens, simulator_max_tokens=config.simulator_max_tokens,
        preference_judge=config.preference_judge, preference_judge_max_tokens=config.preference_judge_max_tokens,
        framing=config.framing, recovery_judge=config.recovery_judge)
    return RecoveryPlan(sessions_dir=Path(sessions), users=config.users, dimensions=config.dimensions,
                        systems=list(config.systems), modes=list(config.modes), settings=settings,
                        dialogues=DialogueSource(Path(dialogues.recording), dialogues.system)
                        if dialogues is not None else None)
