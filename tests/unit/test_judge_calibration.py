"""The judge on recorded embedded-model outputs: generic or off-target fills score at most 0.25.

tests/fixtures/judge-embedded is a recording of the real local:1.5b judge on (fill, ground truth)
pairs of the paper's user_001 (made by tests/fixtures/make_judge_fixture.py). Each pair goes through
the product's judge path — prompt, request hash, structured parsing, scoring rule — with every role
on ``replay:`` that recording, so a changed prompt or schema misses it and fails, and a changed
parse or rule changes a score. The first pair is the issue's case: under the release framing the
1.5B scored "good" 1.0 against "Writes clearly in school assignments".
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from memprobe_engine.events.recorder import NULL_RECORDER
from memprobe_engine.events.scoring import SlotFill
from memprobe_engine.llm.client import ChatClient
from memprobe_engine.llm.config import load_llm_config
from memprobe_engine.recovery.inputs import load_users
from memprobe_engine.recovery.scoring import judge, names_no_trait
from tests.fixtures.make_judge_fixture import MAX_TOKENS, OUT, PAIRS, SESSIONS, USER

#: The score each recorded pair gets; generic and off-target fills at most 0.25, specific ones 0.75.
EXPECTED = {
    ("release", "writing_skill", "good"): 1.0,  # the paper's framing on the 1.5B: the leniency the issue quotes
    ("embedded", "writing_skill", "good"): 0.0,
    ("embedded", "directness_preference", "helpful"): 0.0,
    ("embedded", "fairness_self_view", "likes basketball"): 0.25,
    ("embedded", "writing_skill", "good at math"): 0.0,
    ("embedded", "geographic_knowledge",
     "knows Ponte Vedra Beach spots like Mickler's Landing and Sawgrass Village"): 0.75,
    ("embedded", "directness_preference", "wants short, plain messages, not long or fancy"): 0.75,
}


def test_recorded_pairs_score_as_recorded() -> None:
    assert set(EXPECTED) == set(PAIRS)
    user = load_users(SESSIONS, [USER])[0]

    async def scores() -> dict[tuple[str, str, str], float | None]:
        chat = ChatClient(load_llm_config(None, {}, [f"default=replay:{OUT}"]))
        try:
            out = {}
            for framing, dimension, fill in PAIRS:
                entry = user.bank.entry(dimension)
                assert entry is not None
                score = await judge(chat, NULL_RECORDER, entry, SlotFill(mode="dump_all", label=fill, reason="t"),
                                    max_tokens=MAX_TOKENS, framing=framing)  # type: ignore[arg-type]
                out[(framing, dimension, fill)] = score.score
            return out
        finally:
            await chat.aclose()

    got = asyncio.run(scores())
    assert got == EXPECTED
    generic_or_off = [k for k in PAIRS if k[0] == "embedded" and EXPECTED[k] < 0.75]
    assert generic_or_off and all((got[k] or 0) <= 0.25 for k in generic_or_off)


@pytest.mark.parametrize(("label", "dimension", "empty"), [
    ("good", "writing_skill", True), ("very helpful", "directness_preference", True),
    ("writing_skill", "writing_skill", True), ("knows", "geographic_knowledge", True),
    ("direct", "directness_preference", True), ("can write short messages", "writing_skill", False),
    ("knows about geographic locations near Ponte Vedra Beach", "geographic_knowledge", False),
    ("likes direct communication", "directness_preference", False),
    # The live quick job's longctx_full fills (2026-12-03), both scored 0.75 by the 1.5B judge:
    ("has some regional geography knowledge", "regional_geography_knowledge", True),
    ("knows about regional geography", "regional_geography_knowledge", True),
    ("knows a lot about Dayton's back roads", "regional_geography_knowledge", False),
    ("knows about geography", "geographic_knowledge", True),  # make demo's fill, scored 0.5 (2026-12-03)
    ("knows about short beach-day trips and their stops", "geographic_knowledge", False)])
def test_labels_that_name_no_trait(label: str, dimension: str, empty: bool) -> None:
    assert names_no_trait(label, dimension) is empty


def test_fixture_is_a_real_model_recording() -> None:
    from memprobe_engine.events.reader import open_recording

    calls = list(open_recording(Path(OUT)).iter_events(kinds=["llm_call"]))
    assert len(calls) == 5 and {c.model for c in calls} == {calls[0].model} and "1.5b" in calls[0].model.lower()
