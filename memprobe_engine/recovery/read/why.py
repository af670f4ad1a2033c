"""Why a dimension was (not) recovered, as a chain a person can check link by link, per access mode:
was the trait **disclosed** (the user's turn, quoted), **written** (which items hold it, by which
turn), **reachable** (retrieve: the relevant items' ranks in the top-k, or "not in the top k; best
relevant item ranked N"), what the **slot-filler** said, what the **judge** said, the attribution's
stage-1 evidence — and a mark where a recorded label contradicts the chain (the label stays as
recorded).

Which items are *relevant* (hold the trait) is found without a model call, from what the run itself
says, in this order: items that name the target's proper names (``Ponte Vedra Beach``), items that
quote the attribution judge's stage-1 evidence, and — once an embedder is given — items the run's
embedder (the header's ``embeddings``, else ``st:minilm``) finds close to the target. Never id order.
Ranking the whole store against retrieve's query (where the top-k missed every relevant item) needs
the embedder too; without it the chain says that rank is still to come.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from memprobe_engine.recovery.case_material import EvidenceTurn
from memprobe_engine.recovery.read.dimension import DimensionDetail, ModeDetail
from memprobe_engine.recovery.read.steps import step_labeller
from memprobe_engine.recovery.read.trait import names_in, trait_names
from memprobe_engine.replay.describe import one_line
from memprobe_engine.replay.memory_view import item_text, item_writes
from memprobe_engine.replay.queries import turn_short
from memprobe_engine.replay.session import ReplaySession

#: texts → L2-normalized rows (one per text).
Embed = Callable[[list[str]], npt.NDArray[np.float32]]

#: Cosine to the target at which the embedder alone calls an item relevant (all-MiniLM-L6-v2: a
#: paraphrase scores above it, a same-topic item that does not state the trait below).
SIMILAR = 0.5
#: A stage-1 quote identifies items only when it says something (≥ this many content words).
QUOTE_WORDS = 5
#: A judge's score from which a mode counts as having recovered the trait.
RECOVERED = 0.5

_WORD = re.compile(r"[a-z0-9']+")


@dataclass(frozen=True)
class Relevant:
    """The store items at the fill that hold the trait, best first, and how they were found."""

    item_ids: list[str]
    how: str
    store_size: int
    #: Per item, its cosine to the target (when the embedder ran): the order of ``item_ids``.
    similarity: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class ModeChain:
    mode: str
    reach: str
    fill: str
    judge: str
    label: str | None
    stages: str
    #: A recorded label the chain contradicts (the label is still shown as recorded).
    flag: str | None = None


@dataclass(frozen=True)
class WhyChain:
    user_id: str
    system: str
    dimension: str
    disclosed: str
    written: str
    modes: list[ModeChain]
    #: The embedder still has to run (ranks beyond the top-k, semantic relevance).
    pending: bool
    embedder: str
    #: The store items at the fill that hold the trait, best first (what a read list shows first).
    relevant: list[str] = field(default_factory=list)


def embedder_name(session: ReplaySession) -> str:
    """The embedder the run used (its header's ``embeddings``), else the default ``st:minilm``."""
    from memprobe_engine.llm.embeddings import DEFAULT_EMBEDDING_SPEC
    from memprobe_engine.recovery.config import RecoveryConfig

    return RecoveryConfig.of(session.header).embeddings or DEFAULT_EMBEDDING_SPEC


@lru_cache(maxsize=4)
def make_embed(spec: str) -> Embed:
    """A blocking ``Embed`` over the run's embedder (vectors cached on disk; nothing is recorded)."""
    from memprobe_engine.llm.embeddings import Embedder

    embedder = Embedder.from_spec(spec)

    def embed(texts: list[str]) -> npt.NDArray[np.float32]:
        return np.asarray(asyncio.run(embedder.embed(texts)), dtype=np.float32)
    return embed


def _quotes(detail: DimensionDetail) -> list[str]:
    out = []
    for mode in detail.modes.values():
        for stage in mode.stages:
            if stage.stage == 1 and stage.evidence and len(_WORD.findall(stage.evidence.lower())) >= QUOTE_WORDS:
                out.append(" ".join(stage.evidence.lower().split()).strip(" .\"'“”"))
    return list(dict.fromkeys(out))


def relevant_items(detail: DimensionDetail, store: dict[str, dict[str, object]], embed: Embed | None,
                   embedder: str) -> Relevant:
    """Which items of ``store`` hold the trait (see the module's docstring)."""
    names, quotes = trait_names(detail.target), _quotes(detail)
    texts = {item_id: item_text(item) for item_id, item in store.items()}
    ids: list[str] = []
    how: list[str] = []
    if names:
        hits = [i for i, t in texts.items() if names_in(t, names)]
        if hits:
            ids += hits
            how.append("naming " + ", ".join(f"“{n}”" for n in names[:2]))
    if quotes:
        hits = [i for i, t in texts.items() if any(q[:80] in " ".join(t.lower().split()) for q in quotes)]
        if hits:
            ids += [i for i in hits if i not in ids]
            how.append("quoting the stage-1 evidence")
    similarity: dict[str, float] = {}
    if embed is not None and detail.target is not None and texts:
        order = list(texts)
        vectors = embed([f"{detail.target.short}. {detail.target.explanation}", *(texts[i] for i in order)])
        cosines = vectors[1:] @ vectors[0]
        similarity = {item_id: float(c) for item_id, c in zip(order, cosines, strict=True)}
        close = [i for i in order if similarity[i] >= SIMILAR and i not in ids]
        if close:
            ids += close
            how.append(f"{embedder} cos ≥ {SIMILAR:g} to the target")
        ids.sort(key=lambda i: -similarity[i])
    return Relevant(ids, " or ".join(how) or "by name, stage-1 quote or embedder", len(store), similarity)


def _turn_name(turn: EvidenceTurn) -> str:
    return turn_short(turn.task_index, turn.turn)


def _held_turn(item: dict[str, object]) -> str | None:
    """The turn an item quotes, from its native ``task_index``/``turn`` (longctx_full keeps them)."""
    task_index, turn = item.get("task_index"), item.get("turn")
    if not isinstance(task_index, int):
        return None
    return turn_short(task_index, turn if isinstance(turn, int) else 0)


def _disclosed(detail: DimensionDetail) -> str:
    names = trait_names(detail.target)
    users = sorted((t for t in detail.evidence_turns if t.role == "user"), key=lambda t: not names_in(t.text, names))
    if users:
        first = users[0]
        more = f" (+{len(users) - 1} more)" if len(users) > 1 else ""
        return f"{_turn_name(first)} user: “{one_line(first.text, 52)}”{more}"
    if detail.evidence_turns:
        return f"no user turn carries it; only {len(detail.evidence_turns)} assistant turn(s)"
    return "no turn of the task's dialogue carries it"


def _written(session: ReplaySession, detail: DimensionDetail, relevant: Relevant | None,
             store: dict[str, dict[str, object]] | None = None) -> str:
    if relevant is None or detail.fill_seq is None:
        return "no store at a slot-fill to look in"
    if not relevant.item_ids:
        return f"in none of the {relevant.store_size} items at the fill ({relevant.how})"
    writes = item_writes(session, detail.user_id, detail.system, detail.fill_seq)
    label = step_labeller(session, detail.user_id, detail.system)
    steps = list(dict.fromkeys(label(seq) for i in relevant.item_ids for seq in writes.of(i)[:1]))
    by = ", ".join(steps[:3]) + (f" +{len(steps) - 3}" if len(steps) > 3 else "")
    when = f"in {by}" if by.startswith("T") else (by or "?")
    # An item that quotes a turn may be written a turn later (the user's reply is stored when the next
    # turn starts): name the turn it holds too, so "T2.1" above and "T2.2" here do not seem to disagree.
    held = list(dict.fromkeys(h for i in relevant.item_ids[:3] if (h := _held_turn((store or {}).get(i, {})))))
    holds = f" (holding {', '.join(held)})" if held and held != steps[:len(held)] else ""
    return f"{len(relevant.item_ids)} of {relevant.store_size} items ({relevant.how}) · written {when}{holds}"


def _reach(mode: ModeDetail, relevant: Relevant | None, rank_of: Callable[[ModeDetail], int | None] | None,
           embedder: str) -> tuple[str, list[int]]:
    if relevant is None:
        return "no slot-fill recorded", []
    if not relevant.item_ids:
        return "no item holds it: nothing to read", []
    wanted = set(relevant.item_ids)
    if mode.mode == "dump_all":
        its = "its relevant item" if len(wanted) == 1 else f"all {len(wanted)} relevant items"
        return f"read the whole store, {its}", [0]
    k = len(mode.retrieved)
    ranks = [rank for rank, (item_id, _, _) in enumerate(mode.retrieved, 1) if item_id in wanted]
    if ranks:
        plural = "s" if len(ranks) > 1 else ""
        return f"relevant item{plural} at rank{plural} {', '.join(map(str, ranks))} of the top {k}", ranks
    head = f"the trait is in {len(wanted)} item{'s' if len(wanted) != 1 else ''}, none in the top {k}"
    if rank_of is None:
        return f"{head}; ranking the store with {embedder}…", []
    best = rank_of(mode)
    return (f"{head}; best relevant item ranked {best} ({embedder})" if best else head), []


def _stages(mode: ModeDetail) -> str:
    parts = []
    for stage in mode.stages:
        quoted = f" “{one_line(stage.evidence, 30)}”" if stage.stage == 1 and stage.evidence else ""
        parts.append(f"s{stage.stage} {stage.verdict}{quoted}")
    return ", ".join(parts) or "no attribution stage recorded"


def _score(mode: ModeDetail) -> float | None:
    if mode.judge is not None:
        return mode.judge.score
    return mode.pair.original.score if mode.pair and mode.pair.original else None


def _flag(mode: ModeDetail, detail: DimensionDetail, ranks: list[int]) -> str | None:
    label = mode.label.label if mode.label is not None else None
    if label == "memory_failure" and ranks:
        where = "the whole store with them" if ranks == [0] else f"rank {ranks[0]}"
        return f"⚠ recorded memory_failure, yet the slot-filler read a relevant item ({where})"
    if label == "task_design_failure":
        other = next((m for m in detail.modes.values() if m is not mode and (_score(m) or 0) >= RECOVERED), None)
        if other is not None:
            return (f"⚠ recorded task_design_failure, yet {other.mode} recovered it ({_score(other):g}) "
                    "from the same dialogue")
        if any(t.role == "user" for t in detail.evidence_turns):
            return "⚠ recorded task_design_failure, yet a user turn carries it"
    return None


def why_chain(session: ReplaySession, detail: DimensionDetail, embed: Embed | None = None,
              embedder: str | None = None) -> WhyChain:
    """The chain for every mode of ``detail``; ``embed`` None: what needs no model (``pending``)."""
    name = embedder or embedder_name(session)
    store: dict[str, dict[str, object]] | None = None
    if detail.fill_seq is not None:
        store = session.store_at(detail.user_id, detail.system, detail.fill_seq)
    relevant = relevant_items(detail, store, embed, name) if store is not None else None
    vectors: dict[str, float] = {}

    def rank_of(mode: ModeDetail) -> int | None:
        """The best relevant item's rank when the whole store is ranked against the mode's query."""
        if embed is None or relevant is None or mode.retrieval is None or store is None:
            return None
        order = list(store)
        rows = embed([mode.retrieval.query, *(item_text(store[i]) for i in order)])
        cosines = rows[1:] @ rows[0]
        vectors.update({i: float(c) for i, c in zip(order, cosines, strict=True)})
        ranked = sorted(order, key=lambda i: -vectors[i])
        found = [ranked.index(i) + 1 for i in relevant.item_ids if i in vectors]
        return min(found) if found else None

    modes = []
    for mode_name in sorted(detail.modes, key=lambda m: (m != "dump_all", m != "retrieve", m)):
        mode = detail.modes[mode_name]
        reach, ranks = _reach(mode, relevant, rank_of if embed is not None else None, name)
        fill = mode.slot_fill
        said = "no slot-fill" if fill is None else (
            f"“{one_line(fill.label, 40)}”" if fill.label is not None else f"— ({one_line(fill.excluded or 'none', 30)})")
        if fill is not None and fill.reason:
            said += f" — {fill.reason}"
        score = _score(mode)
        judged = "not judged" if score is None else f"{score:g}"
        if mode.judge is not None and mode.judge.reason:
            judged += f" — {mode.judge.reason}"
        modes.append(ModeChain(mode_name, reach, said, judged, mode.label.label if mode.label else None,
                               _stages(mode), _flag(mode, detail, ranks)))
    pending = embed is None and relevant is not None
    return WhyChain(detail.user_id, detail.system, detail.dimension, _disclosed(detail),
                    _written(session, detail, relevant, store), modes, pending, name,
                    relevant.item_ids if relevant is not None else [])
