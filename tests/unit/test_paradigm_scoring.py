"""The protocol-B rule scorer's corrected mode, probe type by probe type, including every
partial-credit case (the upstream mode: test_paradigm_scoring_upstream.py).

Gold comes from the shipped upstream specs (sessions/paradigms/suite56-specs); the answers are the
shapes the paper's App. C and the upstream reports show (structured JSON and free text).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memprobe_engine.paradigms.normalize import (
    leading_number,
    normalize_value,
    value_match,
)
from memprobe_engine.paradigms.scoring import label, parse_answer_json, score_probe
from memprobe_engine.paradigms.suite import LatentSpec, Probe, ProbeType, load_suite

ROOT = Path(__file__).resolve().parents[2]
SPECS = {s.episode_id: s for s in load_suite(ROOT / "sessions" / "paradigms" / "suite56-specs").specs}


def probe(episode_id: str, probe_type: ProbeType, gold_answer: str = "") -> Probe:
    spec: LatentSpec = SPECS[episode_id]
    made = Probe(probe_type=probe_type, question="?", expected_behavior=spec.expected_behavior,
                 gold_answer=gold_answer)
    made.attach_spec(spec)
    return made


def scored(p: Probe, answer: dict[str, Any] | str | None, **kw: Any) -> tuple[str, float]:
    result = score_probe(p, answer, **{"mode": "corrected", **kw})
    return label(result), result.score


# --- normalization --------------------------------------------------------------------------------

@pytest.mark.parametrize(("gold", "predicted"), [
    ("CrossFit Central", "crossfit central"),                           # case
    ("CrossFit Central", "The user's gym is CrossFit Central."),        # sentence frame, punctuation
    ("the subway", "Subway"),                                           # article
    ("10 PM", "around 10 PM"),                                          # optional preposition
    ("Monday noon", "on Monday noon"),
    ("5 retries", "5"),                                                 # unit dropped
    ("5 retries", "The limit is five retries now"),                     # number word
    ("60 seconds", "a 60s timeout"),                                    # number decides
    ("30 seconds", "30"),
])
def test_values_match_after_normalization(gold: str, predicted: str) -> None:
    assert value_match(gold, predicted).matched, value_match(gold, predicted).how


@pytest.mark.parametrize(("gold", "predicted"), [
    ("CrossFit Central", "FitLife"),
    ("5 retries", "3 retries"),
    ("10 PM", "11 PM"),
    ("5 retries", "15 retries"),          # 5 is not a whole number inside 15
    ("3 retries", "3.5 retries"),
])
def test_different_values_do_not_match(gold: str, predicted: str) -> None:
    assert not value_match(gold, predicted).matched


def test_normalize_and_number_helpers() -> None:
    assert normalize_value("  The deadline is at 5 PM. ") == "5 pm"
    assert leading_number("5 retries") == "5" and leading_number("twelve") == "12"
    assert leading_number("CrossFit") is None


# --- value probes ---------------------------------------------------------------------------------

def test_current_value_structured_and_free_text() -> None:
    p = probe("PILOT-01A", "current_value")
    assert scored(p, {"answer": "CrossFit Central", "reason": "user switched"}) == ("correct", 1.0)
    assert scored(p, "CrossFit Central currently.") == ("correct", 1.0)
    assert scored(p, '```json\n{"answer": "FitLife", "reason": "x"}\n```') == ("incorrect", 0.0)


def test_previous_value_and_no_previous_value_is_excluded() -> None:
    assert scored(probe("PILOT-01A", "previous_value"), {"answer": "FitLife"}) == ("correct", 1.0)
    result = score_probe(probe("PILOT-01B", "previous_value"), {"answer": "FitLife"})
    assert result.excluded and "no gold" in (result.exclusion_reason or "")


# --- change detection -----------------------------------------------------------------------------

def test_change_detection_structured_flag_wins_over_text() -> None:
    p = probe("PILOT-01A", "change_detection")
    assert scored(p, {"changed": True, "current_value": "FitLife"}) == ("correct", 1.0)
    assert scored(p, {"changed": "false", "reason": "it changed"}) == ("incorrect", 0.0)
    assert scored(probe("PILOT-01B", "change_detection"), {"changed": False}) == ("correct", 1.0)


@pytest.mark.parametrize(("text", "changed"), [
    ("Yes, the user's own gym membership changed.", True),
    ("The user switched gyms after it got crowded.", True),
    ("No. The user consistently said they were sticking with FitLife.", False),
    ("It remains FitLife; nothing changed for the user.", False),
    ("Not that I know of — now and before it was FitLife.", False),
])
def test_change_detection_free_text(text: str, changed: bool) -> None:
    update, decoy = probe("PILOT-01A", "change_detection"), probe("PILOT-01B", "change_detection")
    assert scored(update, text)[0] == ("correct" if changed else "incorrect")
    assert scored(decoy, text)[0] == ("incorrect" if changed else "correct")


# --- source ---------------------------------------------------------------------------------------

def test_source_class_full_half_and_no_credit() -> None:
    p = probe("PILOT-01B", "source")   # third party (Jamie); not accepted
    assert scored(p, {"source_class": "third-party", "accepted": False}) == ("correct", 1.0)
    # Upstream PILOT-01B amem: class wrong but "not accepted" right -> partial.
    assert scored(p, {"source_class": "user", "accepted": False}) == ("partial", 0.5)
    assert scored(p, {"source_class": "user", "accepted": True}) == ("incorrect", 0.0)
    assert scored(p, {"source_class": "unknown", "accepted": False}) == ("incorrect", 0.0)
    assert scored(probe("PILOT-02B", "source"), {"source_class": "hallucination", "accepted": False})[0] == "correct"
    assert scored(probe("PILOT-16A", "source"), {"source_class": "stale", "accepted": False})[0] == "correct"


def test_source_class_from_condition_when_no_conflict_gold() -> None:
    p = probe("PILOT-02A", "source")   # user_explicit update
    assert scored(p, {"source_class": "user", "accepted": True}) == ("correct", 1.0)
    assert scored(p, {"source_class": "other_entity", "accepted": True}) == ("partial", 0.5)


def test_source_free_text_concepts_and_structure() -> None:
    gold = "user explicitly stated after reactivating the old memory"
    p = probe("PILOT-04A", "source", gold)
    both = "The user told me directly, after explicitly recalling the previous owner first."
    assert scored(p, both) == ("correct", 1.0)
    assert scored(p, "The user said so.") == ("partial", 0.5)            # 1 of 2 concepts, no value
    assert scored(p, "The user said David Chen owns it.") == ("correct", 1.0)   # 1 of 2 + the value
    third = probe("PILOT-01B", "source", "CrossFit Central was mentioned by a third party (Jamie) as their gym.")
    assert scored(third, "Jamie's friend mentioned CrossFit Central, user still at FitLife")[0] == "correct"
    assert scored(third, "I do not know.") == ("incorrect", 0.0)


# --- conflict value -------------------------------------------------------------------------------

BASE_CONFLICT = {"conflict_value_mentioned": True, "conflict_value": "CrossFit Central",
                 "source_class": "third_party", "status_class": "other_entity", "applies_to_target": False,
                 "current_value": "FitLife"}


def conflict(**changes: Any) -> dict[str, Any]:
    return {**BASE_CONFLICT, **changes}


def test_conflict_four_subscores_and_partial_credit() -> None:
    p = probe("PILOT-01B", "conflict_value")   # third_party, different_entity, not applicable
    full = score_probe(p, conflict(), mode="corrected")
    assert label(full) == "correct" and full.subscores == {"value": 1, "source": 1, "status": 1, "applicability": 1}
    assert scored(p, conflict(status_class="not_accepted")) == ("correct", 1.0)          # 3 of 4
    # Upstream PILOT-01B amem: value ok, source wrong, status wrong, applicability ok -> partial.
    assert scored(p, conflict(source_class="assistant", status_class="not_accepted")) == ("partial", 0.5)
    assert scored(p, conflict(source_class="assistant", status_class="stale",
                              applies_to_target=True, current_value="CrossFit Central")) == ("partial", 0.25)
    # No value credit, no credit, whatever else is right.
    assert scored(p, conflict(conflict_value_mentioned=False)) == ("incorrect", 0.0)
    assert scored(p, conflict(conflict_value="Planet Fitness")) == ("incorrect", 0.0)


def test_conflict_applicability_rescued_by_the_remaining_current_value() -> None:
    # Upstream PILOT-02B amem: applies_to_target wrong, but current_value names the kept value.
    p = probe("PILOT-02B", "conflict_value")
    answer = conflict(conflict_value="April 15", source_class="hypothetical", status_class="not_accepted",
                      applies_to_target=True, current_value="March 28")
    result = score_probe(p, answer, mode="corrected")
    assert (label(result), result.subscores["applicability"], result.subscores["source"]) == ("correct", 1.0, 0.0)


def test_conflict_free_text() -> None:
    p = probe("PILOT-03C", "conflict_value", "Yes — \"Mediterranean diet\" was mentioned, but from an invalid source.")
    text = "Yes, the Mediterranean diet was suggested by the user's friend, but the user did not adopt it."
    assert scored(p, text) == ("correct", 1.0)
    assert scored(p, "The user eats vegetarian food.")[0] == "incorrect"


# --- temporal -------------------------------------------------------------------------------------

def test_temporal_structured_direction_trigger_old_value() -> None:
    p = probe("PILOT-10A", "temporal")   # YMCA Downtown -> Summit Climbing Gym; cancelled membership
    full = {"changed": True, "trigger": "user cancelled the YMCA Downtown membership", "old_value": "YMCA Downtown",
            "new_value": "Summit Climbing Gym", "timing": "two weeks ago"}
    assert scored(p, full) == ("correct", 1.0)
    no_trigger = {**full, "trigger": "a friend's guest pass"}
    assert scored(p, no_trigger) == pytest.approx(("partial", 2 / 3))          # direction + old value
    assert scored(p, {**no_trigger, "old_value": "FitLife"}) == pytest.approx(("partial", 1 / 3))
    nothing = {"changed": False, "trigger": "", "old_value": "", "new_value": "YMCA Downtown"}
    assert scored(p, nothing) == ("incorrect", 0.0)


def test_temporal_free_text_with_structured_gold_and_without() -> None:
    p = probe("PILOT-11A", "temporal")   # trigger: team agreed in retro
    assert scored(p, "The team agreed in the retro to move standup to 10:00 AM.") == ("correct", 1.0)
    assert scored(p, "It moved to 10:00 AM.")[0] == "partial"
    legacy = probe("PILOT-01A", "temporal", "user explicitly stated the switch")
    assert scored(legacy, "The user switched gyms because FitLife got crowded.") == ("correct", 1.0)
    assert scored(legacy, "It happened in January.") == ("incorrect", 0.0)
    assert scored(legacy, "Someone said there was a new gym.") == ("partial", 0.5)
    # A structured "changed": false is no change direction, even though its key reads like a change word.
    kept = {"changed": False, "trigger": "", "old_value": "FitLife", "reason": "The user stuck with FitLife."}
    assert scored(legacy, kept) == ("partial", 0.5)
    assert scored(legacy, {"changed": True, "reason": "the user switched"}) == ("correct", 1.0)


# --- exclusions and parsing -----------------------------------------------------------------------

def test_execution_errors_and_missing_answers_are_excluded_not_wrong() -> None:
    p = probe("PILOT-01A", "current_value")
    for result in (score_probe(p, None, error="LLMError: endpoint unreachable"),
                   score_probe(p, "[ERROR: Timeout]"), score_probe(p, None)):
        assert result.excluded and label(result) == "excluded" and result.exclusion_reason
    assert "endpoint unreachable" in (score_probe(p, None, error="LLMError: endpoint unreachable").exclusion_reason or "")


def test_truncated_json_is_repaired() -> None:
    assert parse_answer_json('{"answer": "FitLife", "reason": "cut of') == {"answer": "FitLife", "reason": "cut of"}
    assert parse_answer_json("no json here") is None
    result = score_probe(probe("PILOT-01A", "current_value"), '{"answer": "CrossFit Central", "reason": "x',
                         mode="corrected")
    assert label(result) == "correct"


def test_score_event_carries_identity_and_version() -> None:
    result = score_probe(probe("PILOT-01A", "current_value"), "CrossFit Central", episode_id="PILOT-01A",
                         probe_index=0, system="amem")
    assert (result.episode_id, result.probe_index, result.system, result.kind) == ("PILOT-01A", 0, "amem", "probe_score")
    assert result.scorer_version and result.reason
