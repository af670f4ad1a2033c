"""Recovery scoring: slot-fill one dimension from the memory under one access mode, then judge it.

dump_all gives the reader the whole store (each system's native fields, JSON); retrieve gives it
the system's own ``search(query, k=5)`` for an axis-only query. A store too large for the reader's
context is never truncated: it is recorded as an overflow (``overflow=True``) and then, by the
exclusion policy (:mod:`.policy`), either scored as the release scored it (``paper``: unknown = 0)
or excluded with the size diagnostic (``audit``). Unparseable slot-fill or judge output follows
the same policy. A prediction of "unknown" scores 0 by the rubric without a judge call.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson
from pydantic import BaseModel

from memprobe_engine.errors import ContextOverflow
from memprobe_engine.events.memory import Retrieval
from memprobe_engine.events.recorder import Recorder
from memprobe_engine.events.scoring import JudgeScore, SlotFill
from memprobe_engine.llm.types import SamplingParams
from memprobe_engine.memory.base import MemorySystem
from memprobe_engine.recovery import prompts, prompts_embedded
from memprobe_engine.recovery.cross_judge import cross_judge
from memprobe_engine.recovery.config import Mode
from memprobe_engine.recovery.framing import DEFAULT_FRAMING, Framing
from memprobe_engine.recovery.inputs import CATEGORY_GUIDE, BankEntry, PoolDimension, retrieve_query
from memprobe_engine.recovery.judge_kind import MODEL_JUDGE, calibrated_name
from memprobe_engine.recovery.policy import DEFAULT_POLICY, ExclusionPolicy, release_label
from memprobe_engine.recovery.schemas import JudgeVerdict, SlotFillAnswer

if TYPE_CHECKING:
    from memprobe_engine.llm.call import ChatOutcome
    from memprobe_engine.llm.client import ChatClient

RETRIEVE_K = 5
#: Characters per token assumed when checking whether a store fits the reader's context. English
#: JSON runs near 4; 3 errs on the side of calling a borderline store an overflow.
CHARS_PER_TOKEN = 3.0


@dataclass
class DimensionScore:
    mode: Mode
    label: str | None
    score: float | None
    excluded: str | None = None
    overflow: bool = False
    judge_seq: int | None = None


TextSink = Callable[[str, str], None]
"""Receives (stage, text piece) as a model generates: the TUI's live re-run view."""


async def ask(chat: ChatClient, role: str, messages: list[Any], *, params: SamplingParams, schema: type[BaseModel],
              stage: str, on_text: TextSink | None = None) -> ChatOutcome:
    """One structured call; streamed piece by piece into ``on_text`` when given."""
    if on_text is None:
        return await chat.chat(role, messages, params=params, schema=schema)
    stream = chat.stream(role, messages, params=params, schema=schema)
    async for piece in stream:
        on_text(stage, piece)
    assert stream.outcome is not None, "a stream read to its end always carries an outcome"
    return stream.outcome


def estimate_tokens(messages: list[Any]) -> int:
    return math.ceil(sum(len(m.content) for m in messages) / CHARS_PER_TOKEN)


async def read_memory(system: MemorySystem, recorder: Recorder, entry: BankEntry, mode: Mode) -> list[dict[str, Any]]:
    """What the slot-filler gets to see under ``mode``."""
    if mode == "dump_all":
        return system.dump()
    query = retrieve_query(entry.dimension, entry.category)
    hits = await system.search(query, RETRIEVE_K)
    recorder.emit(Retrieval(query=query, k=RETRIEVE_K, item_ids=[h.id for h in hits], scores=[h.score for h in hits],
                            purpose="retrieve_mode"))
    return [hit.item for hit in hits]


async def slot_fill(chat: ChatClient, recorder: Recorder, entry: BankEntry, pool_entry: PoolDimension | None,
                    memory: list[dict[str, Any]], mode: Mode, *, context_tokens: int,
                    max_tokens: int | None = 200, on_text: TextSink | None = None,
                    policy: ExclusionPolicy = DEFAULT_POLICY, framing: Framing = DEFAULT_FRAMING) -> SlotFill:
    """One slot-fill, recorded; overflow and empty memory are decided without a model call.
    ``pool_entry`` is accepted for callers' convenience but deliberately not shown: the release's
    slot-filler sees neither the axis question nor example answers."""
    del pool_entry
    if not memory:
        return recorder.emit(SlotFill(mode=mode, label="unknown", reason="the memory returned nothing to read"))
    memory_json = orjson.dumps(memory, option=orjson.OPT_INDENT_2).decode()
    build = prompts_embedded.slot_fill_messages if framing == "embedded" else prompts.slot_fill_messages
    messages = build(entry.dimension, entry.category, CATEGORY_GUIDE[entry.category], memory_json)
    needed = estimate_tokens(messages) + (max_tokens or 0)
    if needed > context_tokens:
        return _overflow(recorder, mode, policy, f"store of {len(memory)} items needs about {needed:,} tokens; "
                                                 f"the reader's context holds {context_tokens:,}")
    try:
        outcome = await ask(chat, "slot_filler", messages,
                            params=SamplingParams(temperature=0.0, max_tokens=max_tokens),
                            schema=SlotFillAnswer, stage="slot_fill", on_text=on_text)
    except ContextOverflow as err:  # the estimate let it through, the server counted more tokens
        return _overflow(recorder, mode, policy, f"store of {len(memory)} items: {err}")
    if outcome.parsed is None:
        if policy == "paper":
            return recorder.emit(SlotFill(mode=mode, label=release_label(outcome.text), call_seq=outcome.call_seq,
                                          reason=f"unparseable ({outcome.excluded}); paper policy: the raw "
                                                 f"answer is the label, as in the release"))
        return recorder.emit(SlotFill(mode=mode, label=None, call_seq=outcome.call_seq, excluded=outcome.excluded))
    answer: SlotFillAnswer = outcome.parsed
    return recorder.emit(SlotFill(mode=mode, label=answer.label.strip(), reason=answer.reason,
                                  call_seq=outcome.call_seq))


def _overflow(recorder: Recorder, mode: Mode, policy: ExclusionPolicy, size: str) -> SlotFill:
    """A store too large for the reader, as the policy records it: never truncated, never the end of
    the run."""
    if policy == "paper":
        return recorder.emit(SlotFill(
            mode=mode, label="unknown", overflow=True,
            reason=f"{size}. Paper policy: the release sent it anyway, the call failed and the answer "
                   f"was scored as unknown"))
    return recorder.emit(SlotFill(mode=mode, label=None, overflow=True, excluded=size,
                                  reason="not truncated: auditability diagnostic (audit policy)"))


def is_unknown(label: str) -> bool:
    return label.strip().strip(".").lower() in {"unknown", "none", "n/a", "no evidence", ""}


#: Words that evaluate without naming a trait. A label made of nothing else ("good", "very helpful")
#: says nothing about the person on any dimension; with the dimension's own words ("has some regional
#: geography knowledge", which the 1.5B judge scored 0.75 on the live quick job) it restates the axis.
GENERIC_WORDS = frozenset({
    "good", "great", "fine", "ok", "okay", "helpful", "positive", "negative", "nice", "average", "normal", "decent",
    "excellent", "bad", "poor", "strong", "weak", "high", "low", "moderate", "medium", "basic", "adequate", "well",
    "very", "quite", "fairly", "pretty", "generally", "overall", "competent", "capable", "skilled", "proficient",
    "satisfactory", "typical", "standard", "somewhat", "rather", "is", "are", "and", "or", "the", "a", "user",
    "person", "they", "he", "she", "appropriate", "solid", "clear", "effective", "good-natured", "knows", "can",
    "has", "does", "skill", "knowledge", "preference", "view", "self", "event", "some", "about", "of", "lot",
    "little", "bit"})


def names_no_trait(label: str, dimension: str = "") -> bool:
    """Whether ``label`` is only evaluative filler ("good", "very helpful") or the dimension's own
    name restated ("writing_skill", "knows" for geographic_knowledge, "direct" for
    directness_preference): it names no trait of the person."""
    words = [w for w in re.split(r"[^a-z'-]+", label.lower().replace("_", " ")) if w]
    axis = [w for w in dimension.lower().split("_") if len(w) >= 4]
    return bool(words) and all(w in GENERIC_WORDS or any(_same_stem(w, a) for a in axis) for w in words)


#: Letters two long words must share at their start to count as one stem ("geograph-ic", "geograph-y").
STEM_LETTERS = 7


def _same_stem(word: str, axis_word: str) -> bool:
    """"direct" for directness, "geography" for geographic: one begins the other, or both share
    their first seven letters."""
    return (axis_word.startswith(word) or word.startswith(axis_word)
            or (min(len(word), len(axis_word)) >= STEM_LETTERS and word[:STEM_LETTERS] == axis_word[:STEM_LETTERS]))



async def judge(chat: ChatClient, recorder: Recorder, entry: BankEntry, fill: SlotFill, *, max_tokens: int | None = 200,
                rescore_of: int | None = None, on_text: TextSink | None = None,
                policy: ExclusionPolicy = DEFAULT_POLICY, framing: Framing = DEFAULT_FRAMING,
                judge_kind: str = MODEL_JUDGE) -> JudgeScore:
    """Score a slot-fill against the hidden target on the five-level rubric: by the
    ``recovery_judge`` model (temperature 0) or, for ``calibrated:NAME``, by the calibrated
    cross-encoder (:mod:`.judge_kind`)."""
    mode = fill.mode
    if fill.label is None:
        return recorder.emit(JudgeScore(mode=mode, score=None, excluded=fill.excluded or "no prediction",
                                        rescore_of=rescore_of))
    if is_unknown(fill.label):
        return recorder.emit(JudgeScore(mode=mode, score=0.0, reason="rubric: a prediction of unknown scores 0",
                                        rescore_of=rescore_of))
    if framing == "embedded" and names_no_trait(fill.label, entry.dimension):
        # The rubric's 0 for "unknown" holds for a label that names nothing either: a small judge
        # reads "good" as agreeing with any favourable truth (docs/protocol-a.md).
        return recorder.emit(JudgeScore(mode=mode, score=0.0, rescore_of=rescore_of,
                                        reason=f"rubric: {fill.label!r} names no trait of the person, which scores 0 "
                                               f"like unknown (embedded framing)"))
    weights = calibrated_name(judge_kind)
    if weights is not None:
        return await _calibrated(recorder, entry, fill, weights, rescore_of, on_text)
    embedded = framing == "embedded"
    outcome = await ask(chat, "recovery_judge",
                        (prompts_embedded.judge_messages if embedded else prompts.judge_messages)(entry, fill.label),
                        params=SamplingParams(temperature=0.0, max_tokens=max_tokens),
                        schema=prompts_embedded.StatedJudgeVerdict if embedded else JudgeVerdict,
                        stage="judge", on_text=on_text)
    if outcome.parsed is None:
        if policy == "paper":
            return recorder.emit(JudgeScore(mode=mode, score=0.0, call_seq=outcome.call_seq, rescore_of=rescore_of,
                                            reason=f"unparseable ({outcome.excluded}); paper policy: 0, as in "
                                                   f"the release"))
        return recorder.emit(JudgeScore(mode=mode, score=None, call_seq=outcome.call_seq, excluded=outcome.excluded,
                                        rescore_of=rescore_of))
    verdict = outcome.parsed
    reason = verdict.reason if not embedded else f"prediction says: {verdict.prediction_says}. {verdict.reason}"
    return recorder.emit(JudgeScore(mode=mode, score=float(verdict.score), reason=reason,
                                    call_seq=outcome.call_seq, rescore_of=rescore_of))


async def _calibrated(recorder: Recorder, entry: BankEntry, fill: SlotFill, weights: str, rescore_of: int | None,
                      on_text: TextSink | None) -> JudgeScore:
    """One score by the calibrated judge (a forward pass on the CPU, off the event loop)."""
    assert fill.label is not None
    scorer = await asyncio.to_thread(cross_judge, weights)
    level, output = await asyncio.to_thread(scorer.score, entry.dimension, entry.short, entry.explanation, fill.label)
    reason = (f"calibrated judge {weights} (trained on the paper's judgments): output {output:.3f} on "
              f"{entry.short!r} vs {fill.label!r} gives level {level:g}")
    if on_text is not None:
        on_text("judge", reason)
    return recorder.emit(JudgeScore(mode=fill.mode, score=level, reason=reason, rescore_of=rescore_of,
                                    judge=scorer.model_id))


async def score_dimension(chat: ChatClient, recorder: Recorder, system: MemorySystem, entry: BankEntry,
                          pool_entry: PoolDimension | None, mode: Mode, *, context_tokens: int,
                          max_tokens: int | None = 200, policy: ExclusionPolicy = DEFAULT_POLICY,
                          framing: Framing = DEFAULT_FRAMING, judge_kind: str = MODEL_JUDGE) -> DimensionScore:
    memory = await read_memory(system, recorder, entry, mode)
    fill = await slot_fill(chat, recorder, entry, pool_entry, memory, mode, context_tokens=context_tokens,
                           max_tokens=max_tokens, policy=policy, framing=framing)
    score = await judge(chat, recorder, entry, fill, max_tokens=max_tokens, policy=policy, framing=framing,
                        judge_kind=judge_kind)
    return DimensionScore(mode=mode, label=fill.label, score=score.score, excluded=score.excluded,
                          overflow=fill.overflow, judge_seq=score.seq)
