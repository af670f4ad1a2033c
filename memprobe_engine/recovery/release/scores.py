"""One user's recovery scoring and attribution of a release run (and its retrieve twin) as events.

Layout (the one :mod:`memprobe_engine.recovery.unit` records): span ``recovery`` → per bank
dimension a span ``dimension`` (attrs category) → per access mode a span ``mode`` (attrs mode and the
source files) holding, for retrieve, a ``retrieval`` (purpose retrieve_mode), then ``slot_fill``,
``judge_score``, one span ``stage`` per attribution stage, and ``attribution_label``.

Decisions:

* Scores, labels and reasons are the release's, verbatim: a prediction of "unknown" keeps the
  judge's 0 and reason. A missing or non-numeric score becomes ``score=None`` with ``excluded`` set,
  so it is left out of B rather than counted as 0.
* The release does not store the retrieve query; the retrieval carries the paper's axis-only query
  (``retrieve_query``). Retrieved memories are matched to final-store items by id, then by content
  and write position, then by content alone. A retrieved memory that matches no item is *not*
  added to the store (the snapshot stays the release's final store and the footprint its size): it
  gets the id ``unmatched:<hash>`` in the retrieval, the item itself goes to the mode span's
  ``attrs.unmatched_retrieved``, and the import report says so.
* Stage 0 comes from the attribution file; where a failed case lacks it, the stage-0 cache
  (``output/_task_design_oracle``) supplies it as a ``cached`` stage. Subclass "A" is
  agent_elicitation_failure and "B" simulator_too_strict (the release's labels confirm the mapping).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import orjson

from memprobe_engine.imports.emitter import DictEmitter
from memprobe_engine.imports.problems import ProblemLog
from memprobe_engine.recovery.release.files import Release
from memprobe_engine.recovery.release.rollout import Store, item_key
from memprobe_engine.recovery.release.sessions import ImportedUser
from memprobe_engine.recovery.input_rules import Category, retrieve_query

RETRIEVE_K = 5
LABELS = frozenset({"ok", "task_design_failure", "memory_failure", "agent_elicitation_failure",
                    "simulator_too_strict", "excluded"})
SUBCLASS = {"A": "agent_elicitation_failure", "B": "simulator_too_strict"}
STAGE_NAMES = {0: "stage 0: task design", 1: "stage 1: disclosure", 2: "stage 2: elicitation vs strictness"}
STAGES = {"oracle": 0, "disclosure": 1, "disclosure_subclass": 2}


@dataclass
class ModeFiles:
    """One access mode's release files for one user: parsed details by dimension, and their paths."""

    mode: str
    recon_rel: str
    attribution_rel: str
    recon: dict[str, dict[str, Any]] = field(default_factory=dict)
    attribution: dict[str, dict[str, Any]] = field(default_factory=dict)
    aggregates: dict[str, Any] | None = None
    unmatched: dict[str, int] = field(default_factory=dict)


@dataclass
class RecoveryStats:
    scores: Counter[str] = field(default_factory=Counter)
    labels: Counter[str] = field(default_factory=Counter)
    unmatched_retrieved: int = 0


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _details(data: dict[str, Any] | None, rel: str, uid: str, bank: set[str], log: ProblemLog) -> dict[str, Any]:
    found: dict[str, dict[str, Any]] = {}
    details = data.get("details") if data is not None else None
    if data is not None and not isinstance(details, list):
        log.add("error", rel, "has no 'details' list; nothing imported from it", user_id=uid)
    for detail in details if isinstance(details, list) else []:
        dim = detail.get("dimension") if isinstance(detail, dict) else None
        if not isinstance(dim, str) or dim not in bank:
            log.add("warning", rel, f"an entry names dimension {dim!r}, which is not in the user's bank; "
                                    f"skipped", user_id=uid)
        elif dim in found:
            log.add("warning", rel, f"{dim} appears twice; the first entry is kept", user_id=uid)
        else:
            found[dim] = detail
    return found


def load_mode(release: Release, output_run: str, mode: str, user: ImportedUser, log: ProblemLog) -> ModeFiles:
    """Read the recon_judge and attribution files of one user under one access mode."""
    uid = user.user_id
    bank = {e["dimension"] for e in user.entries()}
    files = ModeFiles(mode, Release.recon(output_run, uid), Release.attribution(output_run, uid))
    recon = release.read(files.recon_rel, log, user_id=uid)
    files.recon = _details(recon, files.recon_rel, uid, bank, log)
    if recon is not None:
        files.aggregates = {"per_category": recon.get("per_category"), "overall": recon.get("overall")}
        for dim in sorted(bank - set(files.recon)):
            log.add("warning", files.recon_rel, f"no entry for bank dimension {dim}; it has no {mode} score",
                    user_id=uid)
    files.attribution = _details(release.read(files.attribution_rel, log, user_id=uid), files.attribution_rel,
                                 uid, bank, log)
    return files


def emit_recovery(em: DictEmitter, user: ImportedUser, modes: list[ModeFiles], store: Store | None,
                  oracle: dict[str, Any] | None, log: ProblemLog, stats: RecoveryStats) -> None:
    """Emit the recovery span of one user over the given access modes."""
    with em.span("recovery", "recovery"):
        for entry in user.entries():
            dim = entry["dimension"]
            present = [m for m in modes if dim in m.recon]
            if not present:
                continue
            with em.span(f"recover {dim}", "dimension", dimension=dim, category=entry["category"]):
                for files in present:
                    _mode(em, user, entry, files, store, oracle, log, stats)
    for files in modes:
        if files.unmatched:
            why = "the final store could not be read" if store is None else "they match no item of the final store"
            log.add("warning", files.recon_rel, f"{sum(files.unmatched.values())} retrieved memories of "
                                                f"{len(files.unmatched)} dimension(s) are not linked to store items: "
                                                f"{why}; they are kept in the mode spans' attrs.unmatched_retrieved "
                                                f"({', '.join(files.unmatched)})", user_id=user.user_id)


def _mode(em: DictEmitter, user: ImportedUser, entry: dict[str, Any], files: ModeFiles, store: Store | None,
          oracle: dict[str, Any] | None, log: ProblemLog, stats: RecoveryStats) -> None:
    dim, mode, uid = entry["dimension"], files.mode, user.user_id
    detail = files.recon[dim]
    attribution = files.attribution.get(dim)
    attrs: dict[str, Any] = {"mode": mode, "source": files.recon_rel}
    if attribution is not None:
        attrs["attribution_source"] = files.attribution_rel
    hits: list[tuple[str, float | None]] = []
    if mode == "retrieve":
        hits, unmatched = _match_retrieved(detail.get("retrieved_memories"), store)
        if unmatched:
            attrs["unmatched_retrieved"] = unmatched
            stats.unmatched_retrieved += len(unmatched)
            files.unmatched[dim] = len(unmatched)
    with em.span(mode, "mode", **attrs):
        if mode == "retrieve":
            em.emit("retrieval", query=retrieve_query(dim, Category(entry["category"])), k=RETRIEVE_K,
                    item_ids=[h[0] for h in hits], scores=[h[1] for h in hits], purpose="retrieve_mode")
        predicted = detail.get("predicted")
        reason = detail.get("slot_fill_reason")
        em.emit("slot_fill", mode=mode, label=predicted.strip() if isinstance(predicted, str) else None,
                reason=reason if isinstance(reason, str) else None,
                excluded=None if isinstance(predicted, str) else "the release holds no prediction", overflow=False)
        score = _number(detail.get("score"))
        if score is None:
            log.add("warning", files.recon_rel, f"{dim}: score {detail.get('score')!r} is not a number; imported "
                                                f"as excluded", user_id=uid)
        judge_reason = detail.get("judge_reason")
        em.emit("judge_score", mode=mode, score=score, reason=judge_reason if isinstance(judge_reason, str) else None,
                excluded=None if score is not None else f"the release score is {detail.get('score')!r}")
        stats.scores[mode] += 1
        if attribution is not None:
            _attribution(em, uid, dim, mode, attribution, files.attribution_rel, oracle, log, stats)


def _match_retrieved(retrieved: object, store: Store | None) -> tuple[list[tuple[str, float | None]], list[Any]]:
    """(item id, score) per retrieved memory, best first, and the memories that match no item."""
    hits: list[tuple[str, float | None]] = []
    unmatched: list[Any] = []
    used: set[str] = set()
    for memory in retrieved if isinstance(retrieved, list) else []:
        item_id = _find(memory, store, used) if isinstance(memory, dict) else None
        if item_id is None:
            blob = orjson.dumps(memory, option=orjson.OPT_SORT_KEYS)
            item_id = "unmatched:" + hashlib.sha256(blob).hexdigest()[:16]
            unmatched.append(memory)
        used.add(item_id)
        hits.append((item_id, _number(memory.get("score")) if isinstance(memory, dict) else None))
    return hits, unmatched


def _find(memory: dict[str, Any], store: Store | None, used: set[str]) -> str | None:
    if store is None:
        return None
    ident = memory.get("id")
    if ident is not None and str(ident) in store.items:
        return str(ident)
    content = memory.get("content")
    if not isinstance(content, str):
        return None
    for candidates in (store.by_key.get(item_key(memory), []), store.by_content.get(content, [])):
        choice = next((c for c in candidates if c not in used), None)
        if choice is not None:
            return choice
    return None


def _attribution(em: DictEmitter, uid: str, dim: str, mode: str, detail: dict[str, Any], rel: str,
                 oracle: dict[str, Any] | None, log: ProblemLog, stats: RecoveryStats) -> None:
    block = detail.get("attribution")
    if not isinstance(block, dict):
        log.add("warning", rel, f"{dim}: no attribution block; no stages or label imported", user_id=uid)
        return
    label = block.get("category")
    stages = [s for s in block.get("stages") or [] if isinstance(s, dict)]
    has_oracle = any(s.get("stage") == "oracle" for s in stages)
    if label not in ("ok", "excluded") and not has_oracle:
        cached = (oracle or {}).get(dim)
        if isinstance(cached, dict) and isinstance(cached.get("can_invite"), bool):
            _stage(em, 0, mode, Release.oracle(uid), verdict="can_invite" if cached["can_invite"] else "cannot_invite",
                   reason=cached.get("reason"), cached=True)
        else:
            log.add("warning", rel, f"{dim}: stage 0 is in neither the attribution file nor the stage-0 cache",
                    user_id=uid)
    for stage in stages:
        number = STAGES.get(str(stage.get("stage")))
        if number is None:
            log.add("warning", rel, f"{dim}: unknown attribution stage {stage.get('stage')!r}; skipped", user_id=uid)
            continue
        if number == 0:
            verdict = "can_invite" if stage.get("can_invite") else "cannot_invite"
            cached = (oracle or {}).get(dim)
            if isinstance(cached, dict) and cached.get("can_invite") is not None and \
                    bool(cached["can_invite"]) != bool(stage.get("can_invite")):
                log.add("notice", rel, f"{dim}: stage 0 differs from the stage-0 cache; the attribution file's "
                                       f"verdict is imported", user_id=uid)
        elif number == 1:
            verdict = "disclosed" if stage.get("disclosed") else "not_disclosed"
        else:
            sub = stage.get("category")
            verdict = SUBCLASS.get(str(sub), str(sub))
        _stage(em, number, mode, rel, verdict=verdict, evidence=stage.get("evidence"), reason=stage.get("reason"))
    if label in LABELS:
        em.emit("attribution_label", mode=mode, label=label, score=_number(block.get("score")))
        stats.labels[mode] += 1
    else:
        log.add("warning", rel, f"{dim}: attribution category {label!r} is not a known label; no label imported",
                user_id=uid)


def _stage(em: DictEmitter, number: int, mode: str, source: str, *, verdict: str, evidence: object = None,
           reason: object = None, cached: bool = False) -> None:
    with em.span(STAGE_NAMES[number], "stage", stage=number, mode=mode, source=source):
        em.emit("attribution_stage", mode=mode, stage=number, verdict=verdict,
                evidence=evidence if isinstance(evidence, str) else None,
                reason=reason if isinstance(reason, str) else None, cached=cached)


def release_b(scores: dict[str, list[float]]) -> tuple[dict[str, float], float | None]:
    """The release's aggregation: per category the mean of numeric scores, overall the plain mean of
    the category means (categories in first-seen order, summed left to right as Python does)."""
    per_category = {cat: sum(values) / len(values) for cat, values in scores.items() if values}
    return per_category, (sum(per_category.values()) / len(per_category) if per_category else None)


def check_aggregates(files: ModeFiles, user: ImportedUser, log: ProblemLog) -> None:
    """Warn where a recon_judge file's per_category/overall disagree with its own details."""
    if files.aggregates is None:
        return
    scores: dict[str, list[float]] = {}
    for detail in files.recon.values():
        category = str(detail.get("category"))
        value = _number(detail.get("score"))
        scores.setdefault(category, [])
        if value is not None:
            scores[category].append(value)
    per_category, overall = release_b(scores)
    stated = files.aggregates
    same_categories = isinstance(stated.get("per_category"), dict) and all(
        _number(stated["per_category"].get(c)) is not None and abs(stated["per_category"][c] - v) < 1e-12
        for c, v in per_category.items())
    same_overall = overall is not None and _number(stated.get("overall")) is not None and \
        abs(stated["overall"] - overall) < 1e-12
    if not (same_categories and same_overall):
        log.add("warning", files.recon_rel, "per_category/overall differ from the mean of its own details "
                                            "(category means, then their plain mean)", user_id=user.user_id)
