"""The two scoring modes side by side: the default ``upstream`` mode keeps upstream's quirks, the
``corrected`` mode fixes them — one case per difference listed in docs/protocol-b-scoring.md."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memprobe_engine.paradigms.normalize import value_match
from memprobe_engine.paradigms.scoring import DEFAULT_SCORING, label, score_probe
from memprobe_engine.paradigms.scoring_upstream import parse_json_upstream, value_match_upstream
from memprobe_engine.paradigms.suite import LatentSpec, Probe, ProbeType, load_suite

ROOT = Path(__file__).resolve().parents[2]
SPECS = {s.episode_id: s for s in load_suite(ROOT / "sessions" / "paradigms" / "suite56-specs").specs}


def probe(episode_id: str, probe_type: ProbeType, gold_answer: str) -> Probe:
    spec: LatentSpec = SPECS[episode_id]
    made = Probe(probe_type=probe_type, question="?", expected_behavior=spec.expected_behavior,
                 gold_answer=gold_answer)
    made.attach_spec(spec)
    return made


def both(p: Probe, answer: dict[str, Any] | str) -> tuple[str, str]:
    """(upstream label, corrected label)."""
    return label(score_probe(p, answer, mode="upstream")), label(score_probe(p, answer, mode="corrected"))


CHANGED = ("PILOT-01A", "Yes, the user switched from FitLife to CrossFit Central.")   # should_update
KEPT = ("PILOT-01B", "No, the user still goes to FitLife.")                         # should_preserve


def test_the_default_mode_is_upstreams() -> None:
    assert DEFAULT_SCORING == "upstream"
    scored = score_probe(probe("PILOT-01A", "current_value", "CrossFit Central"), {"answer": "CrossFit Central"})
    assert scored.scorer_version == "b1-upstream-1" and label(scored) == "correct"


def test_changed_null_takes_no_side_in_corrected_mode() -> None:
    # Upstream reads null as False (unchanged); our earlier rules read the JSON text, where the key
    # "changed" itself is a change word, so null counted as "changed".
    answer = {"changed": None, "current_value": "FitLife", "previous_value": None, "reason": "not sure"}
    assert both(probe(*KEPT[:1], "change_detection", KEPT[1]), answer) == ("correct", "incorrect")
    assert both(probe(*CHANGED[:1], "change_detection", CHANGED[1]), answer) == ("incorrect", "incorrect")


@pytest.mark.parametrize(("episode", "answer", "want"), [
    (CHANGED, {"changed": "false"}, ("correct", "incorrect")),        # bool("false") is true upstream
    (CHANGED, "Yes, it is now CrossFit Central.", ("incorrect", "correct")),  # "no" inside "now"
    (CHANGED, "The user switched to CrossFit Central.", ("incorrect", "correct")),  # "switched"
])
def test_change_detection_differences(episode: tuple[str, str], answer: dict[str, Any] | str,
                                      want: tuple[str, str]) -> None:
    assert both(probe(episode[0], "change_detection", episode[1]), answer) == want


@pytest.mark.parametrize(("gold", "answer", "want"), [
    ("5 retries", "15 retries", ("correct", "incorrect")),                 # substring inside a longer number
    ("5 retries", "The limit is five retries now", ("incorrect", "correct")),  # number word not first
    ("the subway", "Subway", ("incorrect", "correct")),                   # leading article
    ("5 retries", "on the 5th attempt", ("incorrect", "correct")),        # "5" read inside "5th" (ours)
])
def test_value_differences(gold: str, answer: str, want: tuple[str, str]) -> None:
    # Value matching alone: the corrected mode also takes the gold value from the structured gold,
    # upstream from the probe's gold text.
    got = tuple("correct" if found else "incorrect"
                for found in (value_match_upstream(gold, answer)[0], value_match(gold, answer).matched))
    assert got == want


def test_source_null_class_and_aliases() -> None:
    p = probe("PILOT-16B", "source", "A stale tool output showed the other value.")   # gold class stale_tool
    # null class with the accepted verdict right: upstream's "none" is not "unknown", so half credit.
    assert both(p, {"source_class": None, "accepted": False}) == ("partial", "incorrect")
    assert both(p, {"source_class": "stale", "accepted": True}) == ("incorrect", "correct")  # our alias


def test_conflict_credits_any_named_value_upstream() -> None:
    p = probe("PILOT-01B", "conflict_value", "Yes: CrossFit Central, a friend's gym.")
    answer = {"conflict_value_mentioned": True, "conflict_value": "Planet Fitness", "source_class": "third_party",
              "status_class": "other_entity", "applies_to_target": False, "current_value": "FitLife"}
    assert both(p, answer) == ("correct", "incorrect")


def test_temporal_without_structured_gold_reads_the_changed_key_upstream() -> None:
    p = probe("PILOT-01B", "temporal", "The user never changed gyms; a friend mentioned CrossFit Central.")
    answer = {"changed": False, "trigger": "", "old_value": "FitLife", "new_value": "", "reason": "the user kept it"}
    assert both(p, answer) == ("correct", "partial")


def test_upstream_helpers_follow_upstream() -> None:
    assert value_match_upstream("10 PM", "around 10 PM")[0] and not value_match_upstream("5 retries", "5th")[0]
    assert parse_json_upstream('```json\n{"answer": "x"}\n```') == {"answer": "x"}
    assert parse_json_upstream('{"answer": "FitLife", "reason": "cut') == {"answer": "FitLife", "reason": "cut"}
    assert parse_json_upstream("[ERROR: Timeout]") is None
