"""Stage 1 under the embedded framing: a "disclosed" verdict must quote the user's own words."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from memprobe_engine.recovery import prompts_embedded
from memprobe_engine.recovery.prompts_embedded import quoted_disclosure, quoted_from

#: Modelled on the live quick job's regional-geography task: the opening, the assistant's places and the
#: first user line are the recorded ones (its stage 1 said "disclosed", citing the bank's "a detailed map
#: of the Miami Valley in her head"); the last user line is written for this test.
HISTORY = [("user", "My cousin is flying into Dayton for a long weekend and wants to see what's around."),
           ("assistant", "Certainly! Here are a few day trips: the Old Federal Building, Union Market, Gateway Park."),
           ("user", "What's the best way to get to these places?"),
           ("assistant", "Take I-75 north, then Route 35 east."),
           ("user", "Honestly I'd skip 75 at rush hour — I take Wayne Avenue and cut over by the hospital.")]


def test_the_quote_must_be_the_users_words() -> None:
    user_lines = [text for speaker, text in HISTORY[1:] if speaker == "user"]
    assert quoted_from('"I take Wayne Avenue and cut over by the hospital"', user_lines)
    assert quoted_from("User: honestly I'd skip 75 at rush hour", user_lines)  # label dropped, case aside
    assert quoted_from("…skip 75 at rush hour… I take Wayne Avenue", user_lines)
    assert quoted_from("I’d skip 75 at rush hour", user_lines)  # a typographic apostrophe is the same word
    assert not quoted_from("a detailed map of the Miami Valley in her head", user_lines)  # the bank's text
    assert not quoted_from("Take I-75 north, then Route 35 east", user_lines)  # the assistant's words
    assert not quoted_from("flying into Dayton for a long weekend", user_lines)  # the task statement
    assert not quoted_from('"Wayne Avenue"', user_lines)  # too short to show anything
    assert not quoted_from("none", user_lines)


def test_a_disclosed_verdict_without_a_quote_is_invalid_and_says_how_to_mend_it() -> None:
    schema = quoted_disclosure(HISTORY)
    ok = schema.model_validate({"evidence": "I take Wayne Avenue and cut over by the hospital", "reason": "r",
                                "disclosed": True})
    assert ok.disclosed
    assert not schema.model_validate({"evidence": "none", "reason": "r", "disclosed": False}).disclosed
    with pytest.raises(ValidationError, match="copied exactly from the episode"):
        schema.model_validate({"evidence": "a detailed map of the Miami Valley in her head", "reason": "r",
                               "disclosed": True})


def test_the_episode_comes_after_the_target_so_the_quote_is_nearest() -> None:
    from memprobe_engine.recovery.inputs import BankEntry

    entry = BankEntry(dimension="regional_geography_knowledge", short="Knows Dayton-area roads",
                      explanation="Years of commuting. A detailed map of the Miami Valley in her head.", category="knowledge_memory")
    system, case = prompts_embedded.disclosure_messages(HISTORY[0][1], HISTORY, entry)
    assert "copied exactly" in system.content
    assert case.content.index("TRUE VALUE") < case.content.index("EPISODE") < case.content.index("Wayne Avenue")
