"""The protocol-B rule scorer: one probe answer against the episode's structured gold, no LLM.

Per probe type (paper App. C.2–C.4, upstream ``src/eval/protocol.py``):

- value probes (current/previous): the gold value is contained in the answer after normalization;
- change detection: the structured ``changed`` flag, else what the text says, against ``has_changed``;
- source: the normalized source class (full credit), or only the accepted/not-accepted verdict
  (half credit); free text by source concepts, then by agent/action/verdict structure;
- conflict value: four sub-scores — value, source, status, applicability. No value credit, no credit;
  three of four is correct; otherwise the fraction of sub-scores right;
- temporal: direction and trigger both for full credit; otherwise the fraction of
  direction / trigger / old value found.

``score`` is 1.0 for a correct answer, 0.0 for a wrong one and in between for partial credit;
:func:`label` turns it into the upstream match labels. An execution error (or no answer) is
``excluded`` with its reason and stays out of every denominator.

Two scoring modes (``mode``): ``upstream`` (the default) gives every probe the label upstream's own
scorer gives it (:mod:`memprobe_engine.paradigms.scoring_upstream`), so our tables are the paper's;
``corrected`` is this module's rules, which fix what we found wrong upstream. Both, and every
difference between them, are in docs/protocol-b-scoring.md.
"""

from __future__ import annotations

import re
from typing import Any, Literal

import orjson

from memprobe_engine.events.paradigms import ProbeScore
from memprobe_engine.paradigms import signals as S
from memprobe_engine.paradigms.normalize import keyword_hits, value_match
from memprobe_engine.paradigms.scoring_upstream import score_upstream
from memprobe_engine.paradigms.suite import Gold, LatentSpec, Probe

ScoringMode = Literal["upstream", "corrected"]
SCORING_MODES: tuple[ScoringMode, ...] = ("upstream", "corrected")
#: The mode a run scores in unless told otherwise: the paper's numbers.
DEFAULT_SCORING: ScoringMode = "upstream"
#: ``scorer_version`` of a probe score names its mode. Recordings made before the modes carry
#: ``b1-rules-1``: the corrected rules without the ``{"changed": null}`` fix.
SCORER_VERSIONS: dict[ScoringMode, str] = {"upstream": "b1-upstream-1", "corrected": "b1-corrected-1"}
SCORER_VERSION = SCORER_VERSIONS[DEFAULT_SCORING]


def mode_of_version(version: str | None) -> ScoringMode:
    """The mode a recorded score was made in: ``b1-upstream-1`` is upstream's; anything else (the
    corrected mode, or ``b1-rules-1`` from before the modes) is scored again by the corrected rules,
    so a re-run or a second reader meets the scorer the run's own scores met."""
    return "upstream" if version == SCORER_VERSIONS["upstream"] else "corrected"


def mode_layer(mode: ScoringMode) -> str | None:
    """Where a run records a scoring mode: the default mode is the run's own scores, another mode a
    layer beside them (``scoring:corrected``)."""
    return None if mode == DEFAULT_SCORING else f"scoring:{mode}"


#: An upstream label as a score: partial credit is a half (upstream counts only "correct").
_UPSTREAM_SCORE = {"correct": 1.0, "partial": 0.5, "incorrect": 0.0}
Label = Literal["correct", "partial", "incorrect", "excluded"]
_ERROR_PREFIXES = ("[error:",)
_FENCE_OPEN = re.compile(r"^```(?:json)?\s*")
_FENCE_CLOSE = re.compile(r"\s*```$")


class _Verdict:
    """What one rule found; turned into a :class:`ProbeScore` by :func:`score_probe`."""

    __slots__ = ("reason", "score", "subscores")

    def __init__(self, score: float, reason: str, subscores: dict[str, float] | None = None) -> None:
        self.score = score
        self.reason = reason
        self.subscores = subscores or {}


def label(score: ProbeScore) -> Label:
    """The upstream match label of a score: correct / partial / incorrect, or excluded."""
    if score.excluded:
        return "excluded"
    if score.score >= 1.0:
        return "correct"
    return "partial" if score.score > 0.0 else "incorrect"


def parse_answer_json(text: str) -> dict[str, Any] | None:
    """The JSON object inside a reader's reply: code fences removed, the outermost braces taken,
    and a reply cut off mid-object closed the ways a truncation usually needs."""
    if not text:
        return None
    cleaned = text.strip()
    if cleaned[:1] == "{" and cleaned[-1:] == "}":  # the common case: a bare JSON object
        try:
            whole = orjson.loads(cleaned)
        except orjson.JSONDecodeError:
            whole = None
        if isinstance(whole, dict):
            return whole
    if "```" in cleaned:
        cleaned = _FENCE_CLOSE.sub("", _FENCE_OPEN.sub("", cleaned))
    start, end = cleaned.find("{"), cleaned.rfind("}")
    candidates: list[str] = []
    if start != -1 and end > start:
        candidates.append(cleaned[start:end + 1])
    if start != -1:
        fragment = cleaned[start:]
        candidates += [fragment + tail for tail in ('"}', "null}", "}", '"}\n}', "}\n}")]
        comma = fragment.rfind(",")
        if comma > 0:
            candidates.append(fragment[:comma] + "}")
    for candidate in candidates:
        try:
            parsed = orjson.loads(candidate)
        except orjson.JSONDecodeError:
            continue
        if isinstance(parsed, dict):
            return parsed
    return None


def _truthy(value: object) -> bool | None:
    """A reader's boolean: JSON true/false, or the strings "true"/"yes"/"false"/"no"; else None."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        lowered = value.strip().lower()
        if lowered in ("true", "yes", "y"):
            return True
        if lowered in ("false", "no", "n"):
            return False
    if value is None:
        return None
    return bool(value)


def _text(value: object) -> str:
    return "" if value is None else str(value)


def _has_word(word: str, text: str) -> bool:
    return re.search(r"\b" + re.escape(word) + r"\b", text) is not None


# --- value and change detection ---------------------------------------------------------------------

def _score_value(gold_value: str, parsed: dict[str, Any] | None, raw: str) -> _Verdict:
    predicted = _text(parsed.get("answer", raw)) if parsed is not None else raw
    found = value_match(gold_value, predicted)
    return _Verdict(1.0 if found.matched else 0.0, found.how, {"value": 1.0 if found.matched else 0.0})


def says_changed(text: str) -> bool:
    """Does a free-text answer say the value changed? A leading yes (without an early no), or a
    change word with no phrase denying the change."""
    lowered = text.lower().strip()
    if re.match(r"^\W*no\b", lowered):
        return False
    leading_yes = _has_word("yes", lowered[:30]) and not _has_word("no", lowered[:15])
    denied = any(phrase in lowered for phrase in S.NO_CHANGE_PHRASES)
    return leading_yes or (("changed" in lowered or "switched" in lowered) and not denied)


def _score_change(gold: Gold, parsed: dict[str, Any] | None, raw: str) -> _Verdict:
    expected = "changed" if gold.has_changed else "unchanged"
    if parsed is not None and "changed" in parsed and parsed["changed"] is None:
        # The reader took no side; read as text, the key "changed" itself would say "changed".
        return _Verdict(0.0, f"structured: gold {expected}, answer changed=null (no side taken)", {"status": 0.0})
    flag = _truthy(parsed.get("changed")) if parsed is not None and "changed" in parsed else None
    if flag is not None:
        route, said = "structured", flag
    else:
        route, said = "text", says_changed(raw)
    ok = said == gold.has_changed
    return _Verdict(1.0 if ok else 0.0, f"{route}: gold {expected}, answer "
                    f"{'changed' if said else 'unchanged'}", {"status": 1.0 if ok else 0.0})


# --- source ---------------------------------------------------------------------------------------

def gold_source_class(spec: LatentSpec | None, gold: Gold) -> str:
    """The source class the gold expects: from the conflict gold, else from the episode condition."""
    if gold.conflict_gold is not None:
        return S.GOLD_SOURCE_CLASS.get(gold.conflict_gold.source, "unknown")
    if spec is None:
        return "unknown"
    return S.CONDITION_SOURCE_CLASS.get(spec.condition, "unknown")


def normalize_source_class(value: object) -> str:
    cls = _text(value).strip().lower() or "unknown"
    return S.SOURCE_CLASS_ALIASES.get(cls, cls)


def _entity_named(spec: LatentSpec | None, text: str) -> bool:
    if spec is None:
        return False
    return any(v and v.lower() in text for v in (spec.canonical_initial, spec.canonical_new))


def _score_source(probe: Probe, gold: Gold, spec: LatentSpec | None, parsed: dict[str, Any] | None,
                  raw: str) -> _Verdict:
    expected = gold_source_class(spec, gold)
    if parsed is not None and "source_class" in parsed:
        said = normalize_source_class(parsed.get("source_class"))
        gold_accepted = gold.conflict_gold.applies_to_target if gold.conflict_gold is not None else True
        accepted = _truthy(parsed.get("accepted"))
        accepted_ok = None if accepted is None else accepted == gold_accepted
        subs = {"source_class": 1.0 if said == expected else 0.0}
        if accepted_ok is not None:
            subs["accepted"] = 1.0 if accepted_ok else 0.0
        if said == expected:
            return _Verdict(1.0, f"source class {said} = gold", subs)
        if accepted_ok and said != "unknown":
            return _Verdict(0.5, f"source class {said} != gold {expected}, accepted verdict right", subs)
        return _Verdict(0.0, f"source class {said} != gold {expected}", subs)
    return _score_source_text(probe.gold_answer, spec, raw.lower())


def _score_source_text(gold_text: str, spec: LatentSpec | None, pred: str) -> _Verdict:
    gold_l = gold_text.lower()
    if gold_l and gold_l in pred:
        return _Verdict(1.0, "gold source text present", {"concepts": 1.0})
    concepts = [c for c in S.SOURCE_EQUIVALENCES if c in gold_l]
    hits = sum(1 for c in concepts if c in pred or any(s in pred for s in S.SOURCE_EQUIVALENCES[c]))
    entity = _entity_named(spec, pred)
    if concepts and hits:
        subs = {"concepts": hits / len(concepts), "entity": 1.0 if entity else 0.0}
        if hits == len(concepts):
            return _Verdict(1.0, f"all {hits} source concepts found", subs)
        if entity:
            return _Verdict(1.0, f"{hits}/{len(concepts)} source concepts and the value found", subs)
        return _Verdict(0.5, f"{hits}/{len(concepts)} source concepts found", subs)
    agent = any(w in pred for w in S.SOURCE_AGENT_WORDS)
    action = any(w in pred for w in S.SOURCE_ACTION_WORDS)
    verdict = any(w in pred for w in S.SOURCE_VERDICT_WORDS)
    parts = sum((agent, action, verdict))
    subs = {"agent": float(agent), "action": float(action), "verdict": float(verdict), "entity": float(entity)}
    why = f"agent={agent}, action={action}, verdict={verdict}, value named={entity}"
    if parts >= 2:
        return _Verdict(1.0 if entity else 0.5, f"source structure {why}", subs)
    return _Verdict(0.0, f"source not identified ({why})", subs)


# --- conflict value -------------------------------------------------------------------------------

_CONFLICT_PARTS = ("value", "source", "status", "applicability")


def _conflict_verdict(subs: dict[str, float], route: str) -> _Verdict:
    right = int(sum(subs.values()))
    if not subs["value"]:
        score = 0.0
    elif right >= 3:
        score = 1.0
    else:
        score = right / len(_CONFLICT_PARTS)
    reason = f"{route}: " + ", ".join(f"{k}={'ok' if subs[k] else 'wrong'}" for k in _CONFLICT_PARTS)
    return _Verdict(score, reason, subs)


def _score_conflict(probe: Probe, gold: Gold, spec: LatentSpec | None, parsed: dict[str, Any] | None,
                    raw: str) -> _Verdict:
    cg = gold.conflict_gold
    has_conflict = cg.mentioned if cg is not None else probe.gold_answer.lower().strip().startswith("yes")
    conflict_value = cg.conflict_value if cg is not None else (spec.canonical_new if spec else "")
    applies = cg.applies_to_target if cg is not None else False
    remains = cg.target_remains if cg is not None and cg.target_remains else (spec.canonical_initial if spec else "")
    if parsed is not None and "conflict_value_mentioned" in parsed:
        return _conflict_structured(parsed, gold, spec, has_conflict, conflict_value, applies, remains)
    return _conflict_text(raw.lower(), has_conflict, conflict_value, applies, remains)


def _conflict_structured(parsed: dict[str, Any], gold: Gold, spec: LatentSpec | None, has_conflict: bool,
                         conflict_value: str, applies: bool, remains: str) -> _Verdict:
    subs = dict.fromkeys(_CONFLICT_PARTS, 0.0)
    mentioned = _truthy(parsed.get("conflict_value_mentioned"))
    named = _text(parsed.get("conflict_value")).strip()
    if has_conflict:
        # Mentioned, and the value it names (if any) is the gold conflict value.
        if mentioned and (not named or named.lower() in ("null", "none")
                          or not conflict_value or value_match(conflict_value, named).matched):
            subs["value"] = 1.0
    elif mentioned is False:
        subs["value"] = 1.0
    if normalize_source_class(parsed.get("source_class")) == gold_source_class(spec, gold):
        subs["source"] = 1.0
    said_status = _text(parsed.get("status_class")).strip().lower() or "unknown"
    said_status = S.STATUS_CLASS_ALIASES.get(said_status, said_status)
    expected_status = S.GOLD_STATUS_CLASS.get(gold.conflict_gold.status, "unknown") if gold.conflict_gold else "unknown"
    if said_status == expected_status:
        subs["status"] = 1.0
    said_applies = _truthy(parsed.get("applies_to_target"))
    if said_applies is not None and said_applies == applies:
        subs["applicability"] = 1.0
    current = _text(parsed.get("current_value"))
    if not applies and remains and current and value_match(remains, current).matched:
        subs["applicability"] = 1.0
    return _conflict_verdict(subs, "structured")


def _conflict_text(pred: str, has_conflict: bool, conflict_value: str, applies: bool,
                   remains: str) -> _Verdict:
    subs = dict.fromkeys(_CONFLICT_PARTS, 0.0)
    if has_conflict:
        if (conflict_value and value_match(conflict_value, pred).matched) or pred.strip().startswith("yes"):
            subs["value"] = 1.0
    elif any(s in pred for s in S.NO_CONFLICT_SIGNALS):
        subs["value"] = 1.0
    # Upstream credits the expected class's words and, failing those, any class's words: in free
    # text the source and status parts only ask that *some* provenance / status is stated.
    for part, table in (("source", S.CONFLICT_SOURCE_SIGNALS), ("status", S.CONFLICT_STATUS_SIGNALS)):
        if any(w in pred for ws in table.values() for w in ws):
            subs[part] = 1.0
    if not applies:
        if any(s in pred for s in S.NOT_APPLICABLE_SIGNALS) or (remains and value_match(remains, pred).matched):
            subs["applicability"] = 1.0
    elif any(s in pred for s in S.APPLICABLE_SIGNALS):
        subs["applicability"] = 1.0
    return _conflict_verdict(subs, "text")


# --- temporal -------------------------------------------------------------------------------------

def _temporal_verdict(checks: dict[str, bool], route: str) -> _Verdict:
    subs = {k: float(v) for k, v in checks.items()}
    why = f"{route}: " + ", ".join(f"{k}={'ok' if v else 'missing'}" for k, v in checks.items())
    if checks["direction"] and checks["trigger"]:
        return _Verdict(1.0, why, subs)
    if checks["direction"] or checks["trigger"]:
        counted = [v for k, v in checks.items() if k in ("direction", "trigger", "old_value")]
        return _Verdict(min(sum(counted) / len(counted), 2 / 3), why, subs)
    return _Verdict(0.0, why, subs)


def _score_temporal(probe: Probe, gold: Gold, parsed: dict[str, Any] | None, raw: str) -> _Verdict:
    tg = gold.temporal_gold
    pred = raw.lower()
    if tg is None:
        # No structured temporal gold: who caused the change (from the gold text) and a change word.
        gold_text = probe.gold_answer.lower()
        if "user" in gold_text:
            agent = any(w in pred for w in ("user", "they", "the person", "their"))
        elif "assistant" in gold_text:
            agent = "assistant" in pred
        elif "third" in gold_text or "party" in gold_text:
            agent = any(w in pred for w in ("third", "someone else", "colleague", "friend"))
        else:
            agent = True
        if parsed is not None and "changed" in parsed:
            # A structured answer states the direction; its key "changed" must not count as a change word.
            direction = _truthy(parsed.get("changed")) is True
        else:
            direction = any(w in pred for w in S.CHANGE_WORDS_LOOSE)
        subs = {"source_agent": float(agent), "direction": float(direction)}
        score = 1.0 if agent and direction else (0.5 if agent or direction else 0.0)
        route = "structured" if parsed is not None and "changed" in parsed else "text"
        return _Verdict(score, f"{route}, no temporal gold: source_agent={agent}, direction={direction}", subs)
    checks = {"direction": False, "trigger": False, "old_value": False}
    if parsed is not None:
        new_value = _text(parsed.get("new_value"))
        changed = _truthy(parsed.get("changed"))
        if tg.changed:
            checks["direction"] = bool(tg.new_value and new_value and value_match(tg.new_value, new_value).matched) \
                or changed is True
        else:
            checks["direction"] = changed is False
        said_trigger = _text(parsed.get("trigger"))
        if tg.trigger and said_trigger:
            hits, total = keyword_hits(tg.trigger, said_trigger)
            checks["trigger"] = bool(total) and hits >= max(1, total * 0.3)
        old_value = _text(parsed.get("old_value"))
        checks["old_value"] = bool(tg.old_value and old_value and value_match(tg.old_value, old_value).matched)
        return _temporal_verdict(checks, "structured")
    checks["direction"] = bool(tg.new_value and value_match(tg.new_value, pred).matched) \
        or any(w in pred for w in S.CHANGE_WORDS)
    if tg.trigger:
        hits, total = keyword_hits(tg.trigger, pred)
        checks["trigger"] = (bool(total) and hits >= max(1, total * 0.4)) or any(
            key in tg.trigger.lower() and any(s in pred for s in synonyms)
            for key, synonyms in S.TRIGGER_SYNONYMS.items())
    checks["old_value"] = bool(tg.old_value and value_match(tg.old_value, pred).matched)
    return _temporal_verdict(checks, "text")


# --- entry point ----------------------------------------------------------------------------------

def _value_gold(probe: Probe, gold: Gold) -> str | None:
    value: str | None
    if probe.probe_type == "current_value":
        value = gold.current_value
    else:
        value = gold.previous_value or (gold.original_value if gold.has_changed else None)
    value = value or probe.gold_answer
    return None if not value or value == "None" else value


def score_probe(probe: Probe, answer: dict[str, Any] | str | None, *, error: str | None = None,
                spec: LatentSpec | None = None, episode_id: str = "", probe_index: int = -1,
                system: str | None = None, mode: ScoringMode = DEFAULT_SCORING,
                text: str | None = None) -> ProbeScore:
    """Score one answer (structured dict, free text, or JSON text) to ``probe`` in ``mode``.

    ``spec`` defaults to the probe's episode spec (set by :func:`load_suite`); the conflict and
    source rules use its condition and canonical values. ``text`` is the reply as the reader wrote
    it, when ``answer`` is its parsed form: the upstream mode reads the text, as upstream did. The
    returned event is ready to emit once ``episode_id``/``probe_index``/``system`` are set.
    """
    spec = spec if spec is not None else probe.spec
    gold = probe.gold if probe.gold is not None else (spec.gold if spec is not None else None)

    def result(verdict: _Verdict | None, exclusion: str | None = None) -> ProbeScore:
        return ProbeScore(
            episode_id=episode_id, probe_index=probe_index, probe_type=probe.probe_type, system=system,
            score=verdict.score if verdict else 0.0, subscores=verdict.subscores if verdict else {},
            reason=verdict.reason if verdict else (exclusion or ""), excluded=exclusion is not None,
            exclusion_reason=exclusion, scorer_version=SCORER_VERSIONS[mode])

    if mode == "upstream":
        if error is not None:
            return result(None, f"execution error: {error}")
        if answer is None and text is None:
            return result(None, "no answer recorded")
        said = text if text is not None else (answer if isinstance(answer, str) else _flatten(answer or {}))
        # Only these probe types read the spec; dumping it for every answer was a third of this scoring's time.
        reads_spec = probe.probe_type in ("temporal", "source", "conflict_value")
        found = score_upstream(said, probe.gold_answer, probe.probe_type,
                               spec.model_dump(mode="json") if spec is not None and reads_spec else None)
        if found.label in ("skip", "execution_error"):
            return result(None, found.reason)
        return result(_Verdict(_UPSTREAM_SCORE[found.label], found.reason,
                               {k: float(v) for k, v in found.checks.items()}))

    raw = answer if isinstance(answer, str) else ""
    if error is None and raw.strip().lower().startswith(_ERROR_PREFIXES):
        error = raw.strip()[:200]
    if error is not None:
        return result(None, f"execution error: {error}")
    if answer is None:
        return result(None, "no answer recorded")
    if gold is None:
        return result(None, "no structured gold for this probe")
    parsed = answer if isinstance(answer, dict) else parse_answer_json(raw)
    if isinstance(answer, dict):
        raw = _flatten(answer)
    kind = probe.probe_type
    if kind in ("current_value", "previous_value"):
        gold_value = _value_gold(probe, gold)
        if gold_value is None:
            return result(None, "no gold answer (no previous value in this episode)")
        return result(_score_value(gold_value, parsed, raw))
    if kind == "change_detection":
        return result(_score_change(gold, parsed, raw))
    if kind == "source":
        return result(_score_source(probe, gold, spec, parsed, raw))
    if kind == "conflict_value":
        return result(_score_conflict(probe, gold, spec, parsed, raw))
    return result(_score_temporal(probe, gold, parsed, raw))


def _flatten(answer: dict[str, Any]) -> str:
    """A structured answer as text, for the rules that fall back to reading text."""
    return orjson.dumps(answer).decode()
