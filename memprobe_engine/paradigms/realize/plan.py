"""Latent spec → the ordered plan of sessions the realizer writes, and the probes with their gold.

The plan fixes, before any model call, what each session is (phase, session type, what it is
about) and which values it must and must not contain, so generation only fills in the wording and
the rule checks (:mod:`realize_rules`) know exactly what to enforce. The order follows the paper
(App. B.5): encoding sessions (one per mention context), the pre-perturbation fillers by the
plan's counts and types (shuffled), the perturbation — or, when the spec splits it, P1 (trigger /
source), the interleaving fillers, P2 (accepted value) — then the post-perturbation fillers.

Post-perturbation fillers of an *update* episode are written against the new state: the value the
user now holds is ``canonical_new`` and the one that must only appear in a wrong relation is the
old one, so a filler never contradicts the gold (a decoy after a switch considers going back).
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from memprobe_engine.paradigms.suite import FactType, Gold, LatentSpec, SplitPlan

SessionKind = Literal["encoding", "weakly_related_background", "near_miss", "confusable", "decoy_nonupdate",
                      "stale_reference", "perturbation", "perturbation_p1", "perturbation_p2"]
Phase = Literal["encoding", "filler", "perturbation", "post_perturbation"]

FILLER_KINDS: tuple[SessionKind, ...] = ("weakly_related_background", "near_miss", "confusable", "decoy_nonupdate",
                                         "stale_reference")
#: Session type written into the episode, as in the upstream episodes.
SESSION_TYPES: dict[str, str] = {
    "encoding": "encoding", "weakly_related_background": "filler_weakly_related", "near_miss": "filler_near_miss",
    "confusable": "filler_confusable", "decoy_nonupdate": "filler_decoy_nonupdate",
    "stale_reference": "filler_stale_reference", "perturbation": "perturbation",
    "perturbation_p1": "perturbation_p1", "perturbation_p2": "perturbation_p2",
}
UPDATE = "should_update"

# Generic background topics per domain (our own list): sessions that stay in the user's domain but
# say nothing about the target fact.
_BACKGROUND: dict[str, tuple[str, ...]] = {
    "personal": ("planning meals for a busy week", "a good stretching routine for desk workers",
                 "tips for sleeping better before an early start", "budgeting for a weekend trip",
                 "picking a gift for a friend's birthday", "staying hydrated on hot days",
                 "organising a small apartment closet", "finding a beginner-friendly hiking trail"),
    "work": ("structuring a weekly status report", "running a shorter retrospective",
             "writing clearer tickets for the backlog", "preparing slides for a quarterly review",
             "onboarding a new teammate", "handling too many calendar invites",
             "giving constructive code-review feedback", "estimating tasks for the next sprint"),
    "agentic": ("speeding up a slow unit-test suite", "adding structured logging to a service",
                "cleaning up stale git branches", "writing a Dockerfile with smaller images",
                "setting up a pre-commit hook for linting", "debugging a flaky CI job",
                "rotating credentials stored in CI secrets", "adding a health-check endpoint"),
}
# Discourse patterns for near-miss sessions (same topic area, a different entity).
_NEAR_MISS: tuple[str, ...] = (
    "the user asks for a recommendation on behalf of a friend or colleague",
    "the user compares two options for someone else",
    "the user checks the schedule or details of a different entity",
    "the user reads a review or article about a related but different entity",
    "the user asks for a summary of a discussion about a different project or person",
)
# Ways a value can turn up without being the user's own (confusable sessions).
_CONFUSABLE: tuple[str, ...] = (
    "a friend or colleague has {other} for themselves and talks about it",
    "the user reads an article or review that mentions {other}",
    "{other} belongs to a different project, person or service that the user is helping with",
)
_DECOY: tuple[str, ...] = (
    "the user briefly considers {other} after seeing a suggestion, but decides to keep {current}",
    "someone suggests {other} to the user, who declines in one sentence and keeps {current}",
)


@dataclass(frozen=True)
class SessionPlan:
    """One session to realize: what it is, what it is about, and the values the rules enforce.

    ``current`` is the user's value at this point of the episode and ``other`` the competing one;
    ``must`` values have to appear, ``forbid`` values must not, ``distractors_ok`` says whether
    the spec's distractor values may appear."""

    index: int
    kind: SessionKind
    phase: Phase
    brief: str
    current: str
    other: str
    must: tuple[str, ...] = ()
    forbid: tuple[str, ...] = ()
    distractors_ok: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def session_type(self) -> str:
        return SESSION_TYPES[self.kind]


def readable_fact(spec: LatentSpec, fact_types: list[FactType]) -> str:
    """How prompts name the fact: the fact-type registry's ``readable`` text, else the type's name.

    A version tag (``"… (v2)"``, ``current_gym_v2``) only tells the registry's variants apart; the
    models copied it into the dialogue ("the port the database service runs on (v2)"), so it is cut."""
    by_name = {f.fact_type: f for f in fact_types}
    base = str(getattr(spec, "base_fact_type", "") or "")
    entry = by_name.get(spec.fact_type) or by_name.get(base)
    text = entry.readable if entry is not None and entry.readable else re.sub(r"_v\d+$", "", spec.fact_type).replace("_", " ")
    return re.sub(r"\s*\(v\d+\)\s*$", "", text)


def build_plan(spec: LatentSpec, *, seed: int = 0, filler_cap: int | None = None) -> list[SessionPlan]:
    """The ordered sessions for ``spec``; deterministic in (seed, episode id), so a resumed run
    sends exactly the requests the interrupted one did.

    ``filler_cap`` scales the filler plan down where compute is short: at most that many
    pre-perturbation fillers of each type, interleaving fillers and post-perturbation fillers (every
    planned type keeps at least one session). ``None`` keeps the plan's counts."""
    def cap(n: int) -> int:
        return n if filler_cap is None else min(n, filler_cap)
    # Only the order of the pre-perturbation block depends on the episode (see _filler for topics).
    order = random.Random(f"{seed}:{spec.episode_id}")
    initial, new = spec.canonical_initial, spec.canonical_new
    update = spec.expected_behavior == UPDATE
    plans: list[dict[str, Any]] = []
    contexts = list(spec.encoding.mention_contexts)
    for i in range(spec.num_encoding_sessions or len(contexts) or 1):
        context = contexts[i] if i < len(contexts) else f"another everyday situation ({i + 1}) involving {initial}"
        plans.append({"kind": "encoding", "phase": "encoding", "brief": context, "current": initial, "other": new,
                          "metadata": {"context_theme": context}})
    pre = spec.filler_plan.pre_perturbation
    counters: dict[str, int] = {}
    block = [_filler(kind, "filler", initial, new, spec, counters)
             for kind in FILLER_KINDS for _ in range(cap(int(pre.get(kind, 0) or 0)))]
    order.shuffle(block)
    plans.extend(block)
    split = spec.split_perturbation
    if isinstance(split, SplitPlan):
        plans.append({"kind": "perturbation_p1", "phase": "perturbation", "brief": split.p1_hint,
                          "current": initial, "other": new, "metadata": {"split_role": "p1_trigger_reason"}})
        kinds = list(split.interleave_types or ["confusable", "near_miss"])
        for kind in kinds[:cap(split.interleave_fillers)]:
            plans.append(_filler(kind, "filler", initial, new, spec, counters, interleave=True))
        plans.append({"kind": "perturbation_p2", "phase": "perturbation", "brief": split.p2_hint,
                          "current": new, "other": initial, "metadata": {"split_role": "p2_new_value"}})
    else:
        plans.append({"kind": "perturbation", "phase": "perturbation", "brief": spec.perturbation.wording_hint,
                          "current": initial, "other": new, "metadata": {}})
    post = spec.filler_plan.post_perturbation
    post_types = list(post.types or ["weakly_related_background", "near_miss"])
    total = cap(post.total)
    after_current, after_other = (new, initial) if update else (initial, new)
    for j in range(total):
        kind = post_types[j] if j < len(post_types) else "near_miss"
        plans.append(_filler(kind, "post_perturbation", after_current, after_other, spec, counters))
    return [_finish(i, p, spec) for i, p in enumerate(plans)]


def _filler(kind: str, phase: str, current: str, other: str, spec: LatentSpec, counters: dict[str, int], *,
            interleave: bool = False) -> dict[str, Any]:
    """One filler's plan entry. Topics depend only on the domain / fact type and the running count,
    so matched episodes (same fact type) plan identical filler requests."""
    n = counters.get(kind, 0)
    counters[kind] = n + 1
    domain = spec.domain
    if kind == "weakly_related_background":
        topics = _BACKGROUND.get(domain, _BACKGROUND["work"])
        brief = topics[n % len(topics)]
    elif kind == "near_miss":
        offset = int(hashlib.sha256(spec.fact_type.encode()).hexdigest(), 16) % len(_NEAR_MISS)
        brief = _NEAR_MISS[(offset + n) % len(_NEAR_MISS)]
    elif kind == "confusable":
        brief = _CONFUSABLE[n % len(_CONFUSABLE)].format(other=other)
    elif kind == "decoy_nonupdate":
        brief = _DECOY[n % len(_DECOY)].format(other=other, current=current)
    elif kind == "stale_reference":
        brief = f"an outdated document, tracker or cached record still shows {other}; the user notices it is old"
    else:
        raise ValueError(f"{spec.episode_id}: unknown filler type {kind!r} in filler_plan "
                         f"(known: {', '.join(FILLER_KINDS)})")
    meta: dict[str, Any] = {"filler_idx": n, "topic": brief}
    if interleave:
        meta["interleaved"] = True
    return {"kind": kind, "phase": phase, "brief": brief, "current": current, "other": other, "metadata": meta}


def _finish(index: int, plan: dict[str, Any], spec: LatentSpec) -> SessionPlan:
    """Attach the rule sets: which values must and must not appear in this kind of session."""
    kind, current, other = plan["kind"], plan["current"], plan["other"]
    initial, new = spec.canonical_initial, spec.canonical_new
    condition = spec.condition
    must: tuple[str, ...] = ()
    forbid: tuple[str, ...] = ()
    distractors_ok = False
    if kind == "encoding":
        must, forbid = (initial,), (new,)
    elif kind == "weakly_related_background":
        forbid = (initial, new)
    elif kind == "near_miss":
        forbid, distractors_ok = (initial, new), True
    elif kind == "confusable":
        must, forbid = (other,), (current,)
    elif kind == "decoy_nonupdate":
        must = (other, current)
    elif kind == "stale_reference":
        must, forbid = (other,), (current,)
    elif kind == "perturbation_p1":
        must, forbid = (initial,), (new,)
    elif kind == "perturbation_p2":
        must, forbid = (new,), (initial,)
    elif kind == "perturbation":
        if condition in ("direct", "direct_weak"):
            must, forbid = (new,), ()
        else:
            must = (initial, new)
    metadata = dict(plan["metadata"])
    if kind.startswith("perturbation"):
        metadata.update({"perturbation_type": spec.perturbation_type, "condition": condition,
                         "source_type": spec.perturbation.source_type})
    return SessionPlan(index=index, kind=kind, phase=plan["phase"], brief=plan["brief"], current=current,
                       other=other, must=must, forbid=forbid, distractors_ok=distractors_ok, metadata=metadata)


def build_probes(spec: LatentSpec) -> list[dict[str, Any]]:
    """One probe per spec probe: the spec's question and the gold answer text, worded as upstream
    episodes word it (the structured gold is the spec's, attached by ``load_suite``)."""
    probes = []
    for entry in spec.probes:
        question = entry.question_hint or _default_question(spec, entry.type)
        gold_text = entry.gold_hint if entry.type == "source" and entry.gold_hint else _gold_text(spec, entry.type)
        probes.append({"probe_type": entry.type, "question": question, "expected_behavior": spec.expected_behavior,
                       "gold_answer": gold_text})
    return probes


def _default_question(spec: LatentSpec, ptype: str) -> str:
    fact = spec.fact_type.replace("_", " ")
    return {"current_value": f"What is the user's current {fact}?",
            "previous_value": f"What was the user's {fact} before any change?",
            "change_detection": f"Has the user's {fact} changed?",
            "source": f"Where did the information about the user's {fact} come from?",
            "conflict_value": f"Was any other {fact} mentioned, and does it apply to the user?",
            "temporal": f"When or why did the user's {fact} change?"}.get(ptype, f"What about the user's {fact}?")


def _gold_text(spec: LatentSpec, ptype: str) -> str:
    gold: Gold = spec.gold
    current = gold.current_value
    if ptype == "current_value":
        return current
    if ptype == "previous_value":
        return gold.previous_value or gold.original_value or ""
    if ptype == "change_detection":
        if gold.has_changed:
            return f'Yes — changed from "{gold.original_value or ""}" to "{current}"'
        return f'No — it remains "{current}"'
    if ptype == "temporal":
        tg = gold.temporal_gold
        if tg is not None:
            parts = []
            if tg.old_value and tg.new_value:
                parts.append(f'Changed from "{tg.old_value}" to "{tg.new_value}".')
            if tg.trigger:
                parts.append(f"Trigger: {tg.trigger}.")
            if tg.reason:
                parts.append(f"Reason: {tg.reason}.")
            if parts:
                return " ".join(parts)
        return gold.source_of_change or ""
    if ptype == "source":
        return gold.source_of_change or ""
    if ptype == "conflict_value":
        if gold.invalid_sources:
            return (f'Yes — "{spec.canonical_new}" was mentioned, but from an invalid source '
                    f'({", ".join(gold.invalid_sources)}). The user\'s value remains "{current}".')
        return "No conflicting information."
    return ""
