"""Judged cases — a fill, the hidden value it was judged against, and the reference score — read
from a protocol-A release folder or from a recording, in one shape.

A release folder keeps its strong judge's work in ``output/<run>[_retrieve]/recon_judge/user_XXX.json``
(``details``: dimension, category, explanation, ground_truth, predicted, score, judge_reason,
scoring_mode). A recording keeps the fills and scores as events and the hidden bank in each unit's
recorded inputs; its reference is the run's own judgment, or a named layer (``memprobe rescore
--layer``). Fills of "unknown" are left out by the callers that measure judges: the rubric scores
them 0 without asking a judge.
"""

from __future__ import annotations

import ast
import random
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import orjson

from memprobe_engine.errors import ConfigError
from memprobe_engine.events.reader import open_recording
from memprobe_engine.events.run import SpanBegin
from memprobe_engine.events.scoring import JudgeScore, SlotFill
from memprobe_engine.report.compare_stats import level_index
from memprobe_engine.recovery.outcomes import OutcomeFold

#: Where a release keeps its judge's work, under each run of ``output/``.
RECON_DIR = "recon_judge"
_RETRIEVE_SUFFIX = "_retrieve"


@dataclass(frozen=True)
class JudgedCase:
    """One judged slot-fill: what a judge sees, and what the reference judge said."""

    user_id: str
    system: str
    mode: str
    category: str
    dimension: str
    #: The hidden value's short form (the release's ``ground_truth``) and its explanation.
    truth: str
    explanation: str
    predicted: str
    reference: float
    reference_reason: str = ""
    #: What the release's slot-filler read (retrieve mode: its top-k; dump_all: the run's store), when
    #: read from a release folder; None for a recording.
    memory: tuple[dict[str, object], ...] | None = None


def system_of_run(run: str) -> str:
    """``memt_memonly_pooled_50_retrieve`` → ``memt``: the release run's memory system."""
    base = run.removesuffix(_RETRIEVE_SUFFIX).split("_pooled_")[0]
    return {"memt_memonly": "memt"}.get(base, base)


def release_cases(root: Path, users: Iterable[str] | None = None) -> list[JudgedCase]:
    """Every judged case in the release folder ``root`` (optionally only ``users``), in file order.

    ConfigError when the folder holds no ``output/*/recon_judge`` file at all."""
    wanted = set(users) if users else None
    files = sorted((root / "output").glob(f"*/{RECON_DIR}/user_*.json"))
    if not files:
        raise ConfigError(f"{root}: no output/<run>/{RECON_DIR}/user_XXX.json files; give a protocol-A release "
                          f"folder (its README describes the layout) or a recording.")
    cases: list[JudgedCase] = []
    for path in files:
        user_id = path.stem
        if wanted is not None and user_id not in wanted:
            continue
        run = path.parent.parent.name
        try:
            data = orjson.loads(path.read_bytes())
        except (OSError, orjson.JSONDecodeError) as err:
            raise ConfigError(f"{path}: unreadable ({err}); restore the file from the release.") from None
        retrieve_run = run.endswith(_RETRIEVE_SUFFIX)
        store = _store(root, run)
        for row in data.get("details", []) if isinstance(data, dict) else []:
            try:
                cases.append(JudgedCase(
                    user_id=user_id, system=system_of_run(run),
                    mode=row.get("scoring_mode") or ("retrieve" if run.endswith(_RETRIEVE_SUFFIX) else "dump_all"),
                    category=row["category"], dimension=row["dimension"], truth=row["ground_truth"],
                    explanation=row.get("explanation") or "", predicted=str(row["predicted"]),
                    reference=float(row["score"]), reference_reason=row.get("judge_reason") or "",
                    memory=_retrieved(row) if retrieve_run else store(user_id)))
            except (KeyError, TypeError, ValueError) as err:
                raise ConfigError(f"{path}: a detail row lacks {err}; restore the file from the release.") from None
    return cases


def _store(root: Path, run: str) -> Callable[[str], tuple[dict[str, object], ...] | None]:
    """The final store of ``run`` for a user (``memory/<run>/<user>/memories.json``), read once."""
    seen: dict[str, tuple[dict[str, object], ...] | None] = {}

    def read(user_id: str) -> tuple[dict[str, object], ...] | None:
        if user_id not in seen:
            seen[user_id] = _read_store(root / "memory" / run / user_id / "memories.json")
        return seen[user_id]
    return read


def _read_store(path: Path) -> tuple[dict[str, object], ...] | None:
    """A store file's items (None when it is missing or unreadable: such a case has no fill material)."""
    try:
        data = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    items = data.get("memories") if isinstance(data, dict) else data
    return tuple(i for i in items if isinstance(i, dict)) if isinstance(items, list) else None


def _retrieved(row: dict[str, object]) -> tuple[dict[str, object], ...] | None:
    """The top-k a retrieve-mode row's slot-filler read; the release writes it as a Python literal."""
    value = row.get("retrieved_memories")
    if isinstance(value, str):
        try:
            value = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            return None
    return tuple(i for i in value if isinstance(i, dict)) if isinstance(value, list) else None


def recording_cases(path: Path, *, layer: str | None = None) -> list[JudgedCase]:
    """The current judged cases of a protocol-A recording: the latest fill each judge score judged,
    against the hidden value in the unit's recorded inputs; the reference is ``layer``'s score (the
    run's own when None). Excluded and unjudged cases are left out."""
    with open_recording(path) as reader:
        banks: dict[str, dict[str, dict[str, str]]] = {}
        for span in reader.iter_of(SpanBegin):
            ref = span.attrs.get("inputs_ref") if span.span_kind == "unit" else None
            if ref and span.user_id and span.user_id not in banks:
                inputs = reader.payload(ref)
                banks[span.user_id] = {e["dimension"]: e for e in inputs.get("bank", [])}
        fold = OutcomeFold(layer)
        for event in reader.iter_events(kinds=["span_begin", "slot_fill", "judge_score"]):
            if isinstance(event, (SpanBegin, SlotFill, JudgeScore)):
                fold.add(event)
    cases: list[JudgedCase] = []
    for (system, user_id, dimension, mode), outcome in fold.scored_cases():
        entry = banks.get(user_id, {}).get(dimension)
        if outcome.label is None or entry is None or outcome.score is None or not outcome.usable:
            continue
        cases.append(JudgedCase(
            user_id=user_id, system=system, mode=mode, category=entry.get("category", ""), dimension=dimension,
            truth=entry.get("short") or "", explanation=entry.get("explanation") or "",
            predicted=outcome.label, reference=outcome.score))
    if not cases:
        raise ConfigError(f"{path}: no judged protocol-A case{f' in layer {layer!r}' if layer else ''}; give a "
                          f"recording with judge scores (memprobe recording info lists its layers).")
    return cases


def stratified(cases: Sequence[JudgedCase], limit: int | None, seed: int) -> list[JudgedCase]:
    """At most ``limit`` cases, as evenly spread over the reference's five levels as they allow
    (a level with fewer cases gives all it has; the rest is shared by the others), drawn with
    ``seed``; the order is the input's. None: all."""
    if limit is None or limit >= len(cases):
        return list(cases)
    by_level: dict[int, list[int]] = defaultdict(list)
    for index, case in enumerate(cases):
        by_level[level_index(case.reference)].append(index)
    rng = random.Random(seed)
    for indices in by_level.values():
        rng.shuffle(indices)
    chosen: list[int] = []
    levels = sorted(by_level)
    while len(chosen) < limit and any(by_level[level] for level in levels):
        for level in levels:
            if by_level[level] and len(chosen) < limit:
                chosen.append(by_level[level].pop())
    return [cases[i] for i in sorted(chosen)]
