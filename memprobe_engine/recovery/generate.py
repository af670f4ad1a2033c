"""Generation pipeline for new simulated users: persona → hidden bank → leak-controlled tasks.

Per user: a persona profile; a bank generator that picks dimensions verbatim from the pool and fills
each with a target phrase and explanation (validated, retried with the validation errors shown to
the model); per dimension a task generator, a *blind* anti-fishing critic that sees only the task
statement, and an editor that rewrites flagged tasks, within a retry budget. Verdicts are kept in
each task and recorded as ``task_verdict`` events. Output is an ordinary sessions tree that
``memprobe sessions validate`` accepts.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import orjson
from pydantic import BaseModel, Field, ValidationError

from memprobe_engine.errors import MemProbeError
from memprobe_engine.events.recorder import Recorder
from memprobe_engine.events.recovery import TaskVerdict
from memprobe_engine.llm.types import ChatMessage, SamplingParams
from memprobe_engine.recovery.input_rules import CATEGORY_DISPLAY, CATEGORY_SLOTS, Category, leak_reason
from memprobe_engine.recovery.inputs import BankEntry, DimensionPool, PersonaProfile, Task, UserBank, UserTasks

if TYPE_CHECKING:
    from memprobe_engine.llm.client import ChatClient

_SEEDS: dict[str, list[Any]] = {
    "age": [19, 24, 29, 33, 38, 44, 51, 58, 63, 70, 76],
    "region": ["rural Georgia", "Minneapolis, Minnesota", "El Paso, Texas", "Tucson, Arizona", "Queens, New York",
               "Spokane, Washington", "Dayton, Ohio", "Baton Rouge, Louisiana", "Portland, Maine", "Boise, Idaho"],
    "work": ["long-haul trucker", "dental hygienist", "high-school chemistry teacher", "line cook",
             "freelance bookkeeper", "retired postal carrier", "warehouse shift lead", "graduate student in ecology",
             "small-town pharmacist", "home daycare owner", "union electrician", "church administrator"],
}


class _Picks(BaseModel):
    entries: list[dict[str, str]]


class _TaskDraft(BaseModel):
    task: str = Field(min_length=10)
    rationale: str = Field(min_length=10)


class _CriticVerdict(BaseModel):
    reason: str
    verdict: str = Field(pattern="^(neutral|fishing)$")


@dataclass(frozen=True)
class GenerationSettings:
    bank_retries: int = 3
    task_retries: int = 3
    temperature: float = 0.8
    max_tokens: int = 900
    seed: int = 0


class GenerationError(MemProbeError):
    """The model could not produce a valid artifact within the retry budget."""


async def generate_user(chat: ChatClient, recorder: Recorder, pool: DimensionPool, user_id: str,
                        settings: GenerationSettings) -> tuple[PersonaProfile, UserBank, UserTasks]:
    rng = random.Random(f"{settings.seed}:{user_id}")
    with recorder.span(f"generate {user_id}", "user", user_id=user_id):
        profile = await _persona(chat, rng, settings)
        bank = await _bank(chat, pool, user_id, profile, settings)
        tasks = [await _task(chat, recorder, user_id, entry, index, settings)
                 for index, entry in enumerate(bank.entries)]
    return profile, bank, UserTasks(user_id=user_id, tasks=tasks)


async def _persona(chat: ChatClient, rng: random.Random, settings: GenerationSettings) -> PersonaProfile:
    hint = f"age {rng.choice(_SEEDS['age'])}, lives in {rng.choice(_SEEDS['region'])}, works as {rng.choice(_SEEDS['work'])}"
    messages = [ChatMessage(role="system", content="You write realistic, specific persona profiles of ordinary "
                            "U.S. residents for a research simulation."),
                ChatMessage(role="user", content=f"Write one persona ({hint}). JSON fields: name, age, gender, "
                            "location, occupation, background (3-5 sentences of concrete life history), values "
                            "(list of 3-5 short phrases), communication_style (one sentence).")]
    out = await chat.chat("task_generator", messages, schema=PersonaProfile,
                          params=SamplingParams(temperature=settings.temperature, max_tokens=settings.max_tokens,
                                                seed=settings.seed))
    if out.parsed is None:
        raise GenerationError(f"persona generation failed: {out.excluded}. Try a stronger model for the "
                              f"task_generator role (--model task_generator=SPEC).")
    return cast(PersonaProfile, out.parsed)


async def _bank(chat: ChatClient, pool: DimensionPool, user_id: str, profile: PersonaProfile,
                settings: GenerationSettings) -> UserBank:
    categories: dict[str, list[dict[str, Any]]] = {}
    for category in Category:
        need = CATEGORY_SLOTS[category]
        options = "\n".join(f"- {d.name}: {d.axis} (e.g. {', '.join(d.answer_space)})" for d in pool.categories[category])
        feedback = ""
        for attempt in range(settings.bank_retries + 1):
            messages = [
                ChatMessage(role="system", content="You build the hidden ground truth of a simulated user: facts a "
                            "memory system should later be able to recover."),
                ChatMessage(role="user", content=(
                    f"PERSONA\n{profile.model_dump_json()}\n\nCATEGORY: {CATEGORY_DISPLAY[category]}\nPick exactly "
                    f"{need} different dimensions from this list, copying names verbatim, choosing ones on which this "
                    f"person has a clear, non-generic stance:\n{options}\n\nFor each give `short` (a target phrase of "
                    f"at most 12 words stating the person's stance) and `explanation` (2-4 sentences grounding it in "
                    f"the persona{'; for episodic dimensions a concrete dated event and its consequence' if category == Category.EPISODIC else ''}).\n"
                    f'Reply with JSON: {{"entries": [{{"dimension": "...", "short": "...", "explanation": "..."}}]}}'
                    f"{feedback}"))]
            out = await chat.chat("task_generator", messages, schema=_Picks,
                                  params=SamplingParams(temperature=settings.temperature, max_tokens=settings.max_tokens,
                                                        seed=settings.seed + attempt))
            problems = _bank_problems(out.parsed, pool, category, need) if out.parsed else [out.excluded or "no JSON"]
            if not problems:
                categories[category.value] = out.parsed.entries
                break
            feedback = "\n\nYour previous answer was rejected: " + "; ".join(problems) + ". Fix these."
        else:
            raise GenerationError(f"{user_id}: the bank generator gave no valid {category.value} entries in "
                                  f"{settings.bank_retries + 1} attempts (last problems: {'; '.join(problems)}).")
    try:
        return UserBank.model_validate({"user_id": user_id, "categories": categories}, context={"pool": pool})
    except ValidationError as err:
        raise GenerationError(f"{user_id}: generated bank failed validation: {err.errors()[0]['msg']}") from None


def _bank_problems(picks: _Picks | None, pool: DimensionPool, category: Category, need: int) -> list[str]:
    if picks is None:
        return ["no entries"]
    names = [e.get("dimension", "") for e in picks.entries]
    problems = []
    if len(names) != need:
        problems.append(f"expected {need} entries, got {len(names)}")
    allowed = set(pool.names(category))
    problems += [f"{n!r} is not a pool name in this category" for n in names if n not in allowed]
    if len(set(names)) != len(names):
        problems.append("duplicate dimensions")
    for entry in picks.entries:
        try:
            BankEntry.model_validate({**entry, "category": category.value})
        except ValidationError as err:
            problems.append(f"{entry.get('dimension')}: {err.errors()[0]['msg']}")
    return problems


async def _task(chat: ChatClient, recorder: Recorder, user_id: str, entry: BankEntry, index: int,
                settings: GenerationSettings) -> Task:
    params = SamplingParams(temperature=settings.temperature, max_tokens=400, seed=settings.seed + index)
    draft_msgs = [ChatMessage(role="system", content="You write the opening request a person sends an AI assistant."),
                  ChatMessage(role="user", content=(
                      f"Hidden fact about the person ({entry.dimension}): {entry.short}. {entry.explanation}\n\n"
                      "Write an everyday help request (1-3 sentences, first person) on a topic next to this fact, "
                      "so that a natural conversation gives the person room to reveal it — but the request itself "
                      "must NOT state or hint the fact. Also give a one-sentence rationale. JSON: "
                      '{"task": "...", "rationale": "..."}'))]
    with recorder.span(f"task for {entry.dimension}", "stage", dimension=entry.dimension):
        out = await chat.chat("task_generator", draft_msgs, schema=_TaskDraft, params=params)
        if out.parsed is None:
            raise GenerationError(f"{user_id}/{entry.dimension}: task generation failed: {out.excluded}")
        draft: _TaskDraft = out.parsed
        first_verdict: str | None = None
        revised = False
        for attempt in range(settings.task_retries + 1):
            verdict = await _critic(chat, draft.task)
            first_verdict = first_verdict or verdict.verdict
            leak = leak_reason(draft.task, entry.short)
            fishing = verdict.verdict == "fishing" or leak is not None
            reason = verdict.reason + (f" (rule check: {leak})" if leak else "")
            if not fishing:
                recorder.emit(TaskVerdict(attempt=attempt, task=draft.task, verdict="neutral", reason=reason))
                break
            if attempt == settings.task_retries:
                raise GenerationError(f"{user_id}/{entry.dimension}: task still flagged after {attempt + 1} "
                                      f"critic rounds: {reason}")
            edited = await _edit(chat, draft, entry, reason, params)
            recorder.emit(TaskVerdict(attempt=attempt, task=draft.task, verdict="fishing", reason=reason,
                                      revised_task=edited.task))
            draft, revised = edited, True
    return Task(task_id=f"{user_id}-t{index + 1:02d}", dimension=entry.dimension, category=entry.category,
                task=draft.task, rationale=draft.rationale, critic_verdict="fishing" if revised else first_verdict,
                revised=revised, pipeline_note="generated; critic rounds recorded as task_verdict events")


async def _critic(chat: ChatClient, task: str) -> _CriticVerdict:
    """Blind: sees only the task statement, never the hidden fact."""
    messages = [ChatMessage(role="system", content="You review benchmark tasks. A task is 'fishing' if it asks the "
                            "person to state a personal trait, preference or past event directly, or if the statement "
                            "itself already reveals one. Otherwise it is 'neutral'."),
                ChatMessage(role="user", content=f'TASK: "{task}"\nJSON: {{"reason": "...", "verdict": "neutral"}}')]
    out = await chat.chat("critic", messages, schema=_CriticVerdict, params=SamplingParams(temperature=0.0, max_tokens=200))
    if out.parsed is None:
        raise GenerationError(f"critic output unusable: {out.excluded}")
    return cast(_CriticVerdict, out.parsed)


async def _edit(chat: ChatClient, draft: _TaskDraft, entry: BankEntry, reason: str, params: SamplingParams) -> _TaskDraft:
    messages = [ChatMessage(role="system", content="You rewrite benchmark tasks so they stay ordinary requests."),
                ChatMessage(role="user", content=(
                    f"TASK: \"{draft.task}\"\nIt was flagged: {reason}\nHidden fact it must not reveal or ask about "
                    f"directly: {entry.short}.\nRewrite it as an everyday request (1-3 sentences, first person) that "
                    'still leaves room for the fact to come up naturally. JSON: {"task": "...", "rationale": "..."}'))]
    out = await chat.chat("editor", messages, schema=_TaskDraft, params=params)
    if out.parsed is None:
        raise GenerationError(f"editor output unusable: {out.excluded}")
    return cast(_TaskDraft, out.parsed)


def write_user(out_dir: Path, user_id: str, profile: PersonaProfile, bank: UserBank, tasks: UserTasks) -> Path:
    folder = out_dir / "users" / user_id
    folder.mkdir(parents=True, exist_ok=True)
    categories = {str(c): [e.model_dump(mode="json", exclude={"category"}) for e in entries]
                  for c, entries in bank.categories.items()}
    (folder / "profile.json").write_bytes(orjson.dumps(profile.model_dump(mode="json"), option=orjson.OPT_INDENT_2))
    (folder / "bank.json").write_bytes(orjson.dumps({"user_id": user_id, "categories": categories},
                                                    option=orjson.OPT_INDENT_2))
    (folder / "tasks.json").write_bytes(orjson.dumps(tasks.model_dump(mode="json"), option=orjson.OPT_INDENT_2))
    return folder
