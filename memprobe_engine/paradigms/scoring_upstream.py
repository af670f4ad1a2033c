"""The protocol-B rule scorer as upstream scored the paper: the default scoring mode (``upstream``).

Same content as jq-ding/MemProbe ``src/eval/protocol.py`` (``score_answer`` and its helpers, commit
4ef09390), written in our words, quirks included, so that a probe gets the label the paper's tables
counted. Each quirk is listed in docs/protocol-b-scoring.md ("The upstream mode's quirks"); the
``corrected`` mode (:mod:`memprobe_engine.paradigms.scoring`) holds our fixes. What upstream reads:
the answer text, the probe's gold *text* (``gold_answer``; change detection and conflict read its
leading "yes"), and the episode's latent spec as a plain dict (its structured gold, condition and
canonical values). Values are compared as Python sees them after ``json.loads`` (``str(None)`` is
``"None"``, a non-empty string is true), which is why this module parses with :mod:`json`.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal, cast

from memprobe_engine.paradigms import signals as S
from memprobe_engine.paradigms.normalize import UNITS

UpstreamLabel = Literal["correct", "partial", "incorrect", "execution_error", "skip"]
#: Optional prepositions upstream drops before a value (no "the": upstream keeps leading articles).
_PREPOSITIONS = re.compile(r"\b(at|on|in|by|around|approximately|about|roughly)\s+", re.I)
_FRAME = re.compile(r"^(?:the|a|an|my|our|their|its)\s+.*?\b(?:is|was|are|were|remains)\s+")
_UNIT_NUMBER = re.compile(r"^(\d+(?:\.\d+)?)\s*(?:" + "|".join(re.escape(u) for u in UNITS) + r")?\.?$")
#: Upstream reads a number word only as the first word, and only up to twelve.
_NUMBER_WORDS = {"zero": "0", "one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6",
                 "seven": "7", "eight": "8", "nine": "9", "ten": "10", "eleven": "11", "twelve": "12"}


class UpstreamVerdict:
    """One upstream label with its reason and the sub-checks (True = passed) behind it."""

    __slots__ = ("label", "reason", "checks")

    def __init__(self, label: UpstreamLabel, reason: str, checks: dict[str, bool] | None = None) -> None:
        self.label = label
        self.reason = reason
        self.checks = checks or {}


def parse_json_upstream(text: str) -> object:
    """The reply's JSON as upstream finds it: fences stripped, first ``{`` to last ``}``; failing
    that, the fragment from the first ``{`` closed by a few suffixes, then cut at its last comma."""
    if not text or text.startswith(("[ERROR:", "[error:")):
        return None
    cleaned = re.sub(r"\s*```$", "", re.sub(r"^```(?:json)?\s*", "", text.strip()))
    whole = re.search(r"\{[\s\S]*\}", cleaned)
    if whole:
        try:
            return cast(object, json.loads(whole.group()))
        except json.JSONDecodeError:
            pass
    start = cleaned.find("{")
    if start == -1:
        return None
    fragment = cleaned[start:]
    for suffix in ('"}', "null}", "}", '"}\n}', "}\n}"):
        try:
            return cast(object, json.loads(fragment + suffix))
        except json.JSONDecodeError:
            continue
    comma = fragment.rfind(",")
    if comma > 0:
        try:
            return cast(object, json.loads(fragment[:comma] + "}"))
        except json.JSONDecodeError:
            pass
    return None


def _normalized(s: str) -> str:
    s = _FRAME.sub("", s.lower().strip()).rstrip(".,;:!?")
    return re.sub(r"\s+", " ", _PREPOSITIONS.sub("", s)).strip()


def _number(s: str) -> str | None:
    s = s.strip().lower()
    found = _UNIT_NUMBER.match(s)
    if found:
        return found.group(1)
    words = s.split()
    return _NUMBER_WORDS.get(words[0]) if words else None


def value_match_upstream(gold: str, pred: str) -> tuple[bool, str]:
    """Upstream's value test: raw substring, normalized substring, then the number checks."""
    gold_l, pred_l = gold.lower().strip(), pred.lower().strip()
    if gold_l in pred_l:  # "" is in everything, and "5" is in "15"
        return True, "value present in answer"
    gold_n, pred_n = _normalized(gold_l), _normalized(pred_l)
    if gold_n and gold_n in pred_n:
        return True, f"normalized value present ({gold_n!r})"
    if pred_n and pred_n in gold_n and _number(pred_n):
        return True, f"numeric answer {pred_n!r} is in the gold"
    gold_num = _number(gold_l)
    if gold_num:
        if re.search(r"\b" + re.escape(gold_num) + r"\b", pred_l):
            return True, f"number {gold_num} present"
        if _number(pred_l) == gold_num:
            return True, f"number {gold_num} is the answer's"
    pred_num = _number(pred_l)
    if pred_num and re.search(r"\b" + re.escape(pred_num) + r"\b", gold_l):
        return True, f"answer's number {pred_num} is in the gold"
    return False, f"expected {gold!r} not found"


def _verdict(checks: dict[str, bool], route: str, required: tuple[str, ...]) -> UpstreamVerdict:
    why = f"{route}: " + ", ".join(f"{k}={'ok' if v else 'missing'}" for k, v in checks.items())
    if all(checks[k] for k in required):
        return UpstreamVerdict("correct", why, checks)
    return UpstreamVerdict("partial" if any(checks[k] for k in required) else "incorrect", why, checks)


def score_upstream(predicted: str, gold: str, probe_type: str, spec: dict[str, Any] | None) -> UpstreamVerdict:
    """The upstream label of one answer (``predicted`` as the reader wrote it)."""
    if not gold or gold == "None":
        return UpstreamVerdict("skip", "no gold answer")
    if predicted.startswith(("[ERROR:", "[error:")):
        return UpstreamVerdict("execution_error", f"execution error: {predicted[:80]}")
    found = parse_json_upstream(predicted)
    parsed = found if isinstance(found, dict) and found else None  # upstream tests `if parsed`
    if probe_type in ("current_value", "previous_value"):
        ok, why = value_match_upstream(gold, str(parsed.get("answer", predicted) if parsed else predicted))
        return UpstreamVerdict("correct" if ok else "incorrect", why, {"value": ok})
    if probe_type == "change_detection":
        return _change(predicted, gold.lower().strip().startswith("yes"), parsed)
    if probe_type == "temporal":
        return _temporal(predicted, gold, spec, parsed)
    if probe_type == "source":
        return _source(predicted, gold, spec, parsed)
    if probe_type == "conflict_value":
        return _conflict(predicted, gold, spec, parsed)
    return UpstreamVerdict("incorrect", f"unhandled probe type: {probe_type}")


def _change(predicted: str, gold_changed: bool, parsed: dict[str, Any] | None) -> UpstreamVerdict:
    if parsed is not None and "changed" in parsed:
        said = bool(parsed["changed"])  # null -> unchanged, "false" -> changed
        ok = said == gold_changed
        return UpstreamVerdict("correct" if ok else "incorrect", f"structured: answer "
                               f"{'changed' if said else 'unchanged'}", {"status": ok})
    text = predicted.lower().strip()
    # Substring tests: "no" also fires inside "now" / "know" / "not"; the JSON key "changed" counts.
    affirm = ("yes" in text[:30] and "no" not in text[:15]) or (
        "changed" in text and not any(p in text for p in S.UPSTREAM_NOT_CHANGED))
    deny = any(p in text for p in S.UPSTREAM_DENY)
    ok = affirm if gold_changed else (deny or not affirm)
    return UpstreamVerdict("correct" if ok else "incorrect", f"text: affirm={affirm}, deny={deny}", {"status": ok})


def _temporal(predicted: str, gold: str, spec: dict[str, Any] | None, parsed: dict[str, Any] | None
              ) -> UpstreamVerdict:
    tg = (spec or {}).get("gold", {}).get("temporal_gold")
    pred = predicted.lower()
    if not (tg and isinstance(tg, dict)):
        return _temporal_legacy(pred, gold.lower())
    old_v, new_v = str(tg.get("old_value") or "").lower(), str(tg.get("new_value") or "").lower()
    trigger = str(tg.get("trigger") or "").lower()
    keywords = [w.strip() for w in re.split(r"[\s,]+", trigger) if len(w.strip()) > 3]
    checks = {"direction": False, "trigger": False, "old_value": False}
    if parsed is not None:
        said_new = str(parsed.get("new_value", ""))
        checks["direction"] = bool(new_v and said_new and value_match_upstream(new_v, said_new)[0]) \
            or parsed.get("changed") is True
        said_trigger = str(parsed.get("trigger", "")).lower()
        if trigger and said_trigger:
            hits = sum(1 for kw in keywords if kw in said_trigger)
            checks["trigger"] = bool(keywords) and hits >= max(1, len(keywords) * 0.3)
        said_old = str(parsed.get("old_value", ""))
        checks["old_value"] = bool(old_v and said_old and value_match_upstream(old_v, said_old)[0])
        return _verdict(checks, "structured", ("direction", "trigger"))
    checks["direction"] = bool(new_v and value_match_upstream(new_v, pred)[0]) or any(w in pred for w in S.CHANGE_WORDS)
    if trigger:
        hits = sum(1 for kw in keywords if kw in pred)
        checks["trigger"] = (bool(keywords) and hits >= max(1, len(keywords) * 0.4)) or any(
            key in trigger and any(s in pred for s in synonyms) for key, synonyms in S.TRIGGER_SYNONYMS.items())
    checks["old_value"] = bool(old_v and value_match_upstream(old_v, pred)[0])
    return _verdict(checks, "text", ("direction", "trigger"))


def _temporal_legacy(pred: str, gold: str) -> UpstreamVerdict:
    if "user" in gold:
        agent = any(w in pred for w in ("user", "they", "the person", "their"))
    elif "assistant" in gold:
        agent = "assistant" in pred
    elif "third" in gold or "party" in gold:
        agent = any(w in pred for w in ("third", "someone else", "colleague", "friend"))
    else:
        agent = True
    # Read from the text, so the JSON key "changed" of a structured answer counts as a change word.
    checks = {"source_agent": agent, "direction": any(w in pred for w in S.UPSTREAM_LEGACY_CHANGE_WORDS)}
    return _verdict(checks, "no temporal gold", ("source_agent", "direction"))


def gold_source_class_upstream(spec: dict[str, Any] | None) -> str:
    if not spec:
        return "unknown"
    cg = spec.get("gold", {}).get("conflict_gold")
    if cg:
        return S.GOLD_SOURCE_CLASS.get(cg.get("source", ""), "unknown")
    return S.CONDITION_SOURCE_CLASS.get(spec.get("condition", ""), "unknown")


def _source(predicted: str, gold: str, spec: dict[str, Any] | None, parsed: dict[str, Any] | None
            ) -> UpstreamVerdict:
    expected = gold_source_class_upstream(spec)
    if parsed is not None and "source_class" in parsed:
        said = str(parsed.get("source_class", "unknown")).lower().strip()  # null -> "none"
        said = S.UPSTREAM_SOURCE_CLASS_ALIASES.get(said, said)
        cg = (spec or {}).get("gold", {}).get("conflict_gold")
        gold_accepted = cg.get("applies_to_target", False) if cg else True
        accepted = parsed.get("accepted")
        accepted_ok = None if accepted is None else accepted == gold_accepted  # "true" != True
        checks = {"source_class": said == expected, "accepted": accepted_ok is True}
        if said == expected:
            return UpstreamVerdict("correct", f"source class {said} = gold", checks)
        if accepted_ok is True and said != "unknown":
            return UpstreamVerdict("partial", f"source class {said} != gold {expected}, accepted right", checks)
        return UpstreamVerdict("incorrect", f"source class {said} != gold {expected}", checks)
    pred, gold_l = predicted.lower(), gold.lower()
    if gold_l in pred:
        return UpstreamVerdict("correct", "gold source text present")
    concepts = [c for c in S.SOURCE_EQUIVALENCES if c in gold_l]
    hits = sum(1 for c in concepts if c in pred or any(s in pred for s in S.SOURCE_EQUIVALENCES[c]))
    values = (str(spec.get("canonical_initial", "")), str(spec.get("canonical_new", ""))) if spec else ()
    entity = any(v and v.lower() in pred for v in values)
    if concepts and hits == len(concepts):
        return UpstreamVerdict("correct", f"all {hits} source concepts found")
    if concepts and hits:
        return UpstreamVerdict("correct" if entity else "partial", f"{hits}/{len(concepts)} source concepts, "
                               f"value named={entity}")
    parts = {"agent": any(w in pred for w in S.SOURCE_AGENT_WORDS),
             "action": any(w in pred for w in S.SOURCE_ACTION_WORDS),
             "verdict": any(w in pred for w in S.SOURCE_VERDICT_WORDS)}
    if sum(parts.values()) >= 2:
        return UpstreamVerdict("correct" if entity else "partial", f"source structure {parts}, value named={entity}",
                               parts)
    return UpstreamVerdict("incorrect", f"source not identified {parts}", parts)


def _conflict(predicted: str, gold: str, spec: dict[str, Any] | None, parsed: dict[str, Any] | None
              ) -> UpstreamVerdict:
    spec = spec or {}
    cg = spec.get("gold", {}).get("conflict_gold")
    has_conflict = gold.lower().strip().startswith("yes")
    initial, new = str(spec.get("canonical_initial", "")), str(spec.get("canonical_new", ""))
    applies = cg.get("applies_to_target", False) if cg else False
    remains = (cg.get("target_remains", "") if cg else initial) or ""
    checks = {"value": False, "source": False, "status": False, "applicability": False}
    if parsed is not None and "conflict_value_mentioned" in parsed:
        if has_conflict:
            checks["value"] = bool(parsed.get("conflict_value_mentioned", False))  # whatever value it names
        else:
            checks["value"] = not parsed.get("conflict_value_mentioned", True)
        said_source = str(parsed.get("source_class", "unknown")).lower().strip()
        checks["source"] = S.UPSTREAM_SOURCE_CLASS_ALIASES.get(said_source, said_source) == \
            gold_source_class_upstream(spec)
        said_status = str(parsed.get("status_class", "unknown")).lower().strip()
        gold_status = S.UPSTREAM_GOLD_STATUS_CLASS.get(cg.get("status", ""), "unknown") if cg else "unknown"
        checks["status"] = S.UPSTREAM_STATUS_CLASS_ALIASES.get(said_status, said_status) == gold_status
        said_applies = parsed.get("applies_to_target")
        checks["applicability"] = said_applies is not None and bool(said_applies) == bool(applies)
        current = str(parsed.get("current_value", "") or "")
        if remains and current and value_match_upstream(remains, current)[0] and not applies:
            checks["applicability"] = True
        return _conflict_verdict(checks, "structured")
    pred = predicted.lower()
    if has_conflict:
        value = (cg.get("conflict_value", "") if cg else new).lower()
        checks["value"] = bool(value and value_match_upstream(value, pred)[0]) or pred.strip().startswith("yes")
    else:
        checks["value"] = any(s in pred for s in S.NO_CONFLICT_SIGNALS)
    # The expected source's / status's words first, then any class's: in effect any of them counts.
    checks["source"] = any(w in pred for ws in S.CONFLICT_SOURCE_SIGNALS.values() for w in ws)
    checks["status"] = any(w in pred for ws in S.CONFLICT_STATUS_SIGNALS.values() for w in ws)
    if not applies:
        checks["applicability"] = any(s in pred for s in S.NOT_APPLICABLE_SIGNALS) or bool(
            remains and value_match_upstream(remains.lower(), pred)[0])
    else:
        checks["applicability"] = any(s in pred for s in S.APPLICABLE_SIGNALS)
    return _conflict_verdict(checks, "text")


def _conflict_verdict(checks: dict[str, bool], route: str) -> UpstreamVerdict:
    why = f"{route}: " + ", ".join(f"{k}={'ok' if v else 'wrong'}" for k, v in checks.items())
    if not checks["value"]:
        return UpstreamVerdict("incorrect", why, checks)
    return UpstreamVerdict("correct" if sum(checks.values()) >= 3 else "partial", why, checks)
