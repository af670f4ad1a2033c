"""Reference input protocols and the rule heuristics (no model), on the shipped upstream sample."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from memprobe_engine.memory.base import ScoredItem
from memprobe_engine.paradigms.baselines import (
    HEURISTIC_RULES,
    SessionIndex,
    full_context_evidence,
    heuristic_answer,
    oracle_evidence,
)
from memprobe_engine.paradigms.protocol import ordered_sessions
from memprobe_engine.paradigms.reader import (
    ANSWER_MODELS,
    memory_evidence,
    reader_messages,
)
from memprobe_engine.paradigms.scoring import score_probe
from memprobe_engine.paradigms.suite import Episode, Session, Turn, load_suite
from tests.doubles import BagOfWordsEmbedder

SAMPLE = Path(__file__).resolve().parents[2] / "sessions" / "paradigms" / "upstream-sample"


@pytest.fixture(scope="module")
def episodes() -> dict[str, Episode]:
    return {e.episode_id: e for e in load_suite(SAMPLE).episodes}


@pytest.mark.parametrize("name", sorted(HEURISTIC_RULES))
def test_heuristics_answer_every_probe_type_in_the_readers_format(name: str, episodes: dict[str, Episode]) -> None:
    for episode in episodes.values():
        belief = HEURISTIC_RULES[name](episode, ordered_sessions(episode))
        for probe_type, model in ANSWER_MODELS.items():
            answer = heuristic_answer(belief, probe_type, name)
            assert model.model_validate(answer).model_dump(mode="json").keys() == answer.keys()
        for probe in episode.probes:
            score = score_probe(probe, heuristic_answer(belief, probe.probe_type, name), spec=episode.latent_spec)
            assert not score.excluded and 0.0 <= score.score <= 1.0


def test_what_each_heuristic_believes(episodes: dict[str, Episode]) -> None:
    update, decoy = episodes["PILOT-01A"], episodes["PILOT-01B"]
    for episode in (update, decoy):
        sessions = ordered_sessions(episode)
        assert HEURISTIC_RULES["always_update"](episode, sessions).current == "CrossFit Central"
        preserve = HEURISTIC_RULES["always_preserve"](episode, sessions)
        assert preserve.current == "FitLife" and not preserve.changed
    # latest_value: whatever candidate is mentioned last wins, so a late near-miss filler fools it
    sessions = ordered_sessions(update)
    latest = HEURISTIC_RULES["latest_value"](update, sessions)
    last_text = " ".join(t.content for t in sessions[-1].dialogue) + " ".join(t.content for t in sessions[-2].dialogue)
    assert latest.current.lower() in last_text.lower()
    assert latest.changed == (latest.current != "FitLife")


def test_source_preference_ignores_values_only_assistants_and_tools_state(episodes: dict[str, Episode]) -> None:
    episode = episodes["PILOT-01A"]
    sessions = [
        Session(session_idx=0, phase="encoding", session_type="encoding",
                dialogue=[Turn(role="user", content="I train at FitLife on Tuesdays.")]),
        Session(session_idx=1, phase="perturbation", session_type="perturbation",
                dialogue=[Turn(role="user", content="Any stretching tips?"),
                          Turn(role="assistant", content="Since you moved to CrossFit Central, try this.")]),
        Session(session_idx=2, phase="post_perturbation", session_type="filler_near_miss",
                dialogue=[Turn(role="tool_output", content="membership: Planet Fitness (cached 2023)")])]
    belief = HEURISTIC_RULES["source_preference"](episode, sessions)
    assert belief.current == "FitLife" and not belief.changed
    assert belief.conflict == "Planet Fitness" and belief.conflict_source == "stale_tool"
    assert belief.conflict_status == "not_accepted" and not belief.conflict_applies
    latest = HEURISTIC_RULES["latest_value"](episode, sessions)
    assert latest.current == "Planet Fitness" and latest.changed


def test_full_context_and_oracle_evidence_never_show_session_types(episodes: dict[str, Episode]) -> None:
    sessions = ordered_sessions(episodes["PILOT-01A"])
    full = full_context_evidence(sessions)
    assert full.text.count("--- Session ") == 21 and "Session 21 of 21" in full.text
    oracle = oracle_evidence(sessions)
    assert [item.id for item in oracle.retrieved] == ["session-0", "session-1", "session-2", "session-18"]
    assert "Session 19 of 21" in oracle.text
    for text in (full.text, oracle.text):
        assert "perturbation" not in text and "filler" not in text and "encoding" not in text


def test_naive_and_time_aware_rag_retrieve_the_same_sessions_with_different_labels(
        episodes: dict[str, Episode]) -> None:
    sessions = ordered_sessions(episodes["PILOT-01A"])
    index = SessionIndex(sessions, BagOfWordsEmbedder(hashed=True))
    question = "What gym does the user currently go to?"
    naive = asyncio.run(index.evidence(question, 5, time_aware=False))
    aware = asyncio.run(index.evidence(question, 5, time_aware=True))
    assert [i.id for i in naive.retrieved] == [i.id for i in aware.retrieved] and len(naive.retrieved) == 5
    scores = [i.score for i in naive.retrieved]
    assert scores == sorted(scores, reverse=True)  # items best first, blocks in timeline order
    assert "Retrieved session 5" in naive.text and " of 21" not in naive.text
    positions = sorted(int(i.id.split("-")[1]) + 1 for i in aware.retrieved)
    assert [f"Session {p} of 21" in aware.text for p in positions] == [True] * 5


def test_reader_prompt_puts_the_stable_part_first() -> None:
    evidence = memory_evidence([ScoredItem(id="n1", item={"content": "User goes to FitLife"}, score=0.9)])
    first = reader_messages(evidence, "What gym now?", "current_value")
    second = reader_messages(evidence, "Has it changed?", "change_detection")
    assert first[0] == second[0]  # identical system text
    shared = first[1].content.split("QUESTION")[0]
    assert second[1].content.startswith(shared) and '"content":"User goes to FitLife"' in shared


def test_latest_value_keeps_the_upstream_tie_rule(episodes: dict[str, Episode]) -> None:
    """The latest session mentioning a candidate decides; inside it the initial value comes first."""
    episode = episodes["PILOT-01A"]
    switch = [Session(session_idx=0, phase="perturbation", session_type="perturbation", dialogue=[
        Turn(role="user", content="I cancelled FitLife and signed up at CrossFit Central.")])]
    assert HEURISTIC_RULES["latest_value"](episode, switch).current == "FitLife"
    later = [*switch, Session(session_idx=1, phase="post_perturbation", session_type="filler_near_miss",
                              dialogue=[Turn(role="assistant", content="Enjoy CrossFit Central!")])]
    assert HEURISTIC_RULES["latest_value"](episode, later).current == "CrossFit Central"

