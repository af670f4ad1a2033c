"""Out-of-role detection of simulated-user replies, on replies real runs recorded."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from memprobe_engine.events.reader import open_recording
from memprobe_engine.recovery import prompts_embedded
from memprobe_engine.recovery.inputs import load_users
from memprobe_engine.recovery.schemas import InRoleSimulatorReply, SimulatorReply
from memprobe_engine.recovery.simulator_voice import out_of_role_reason

ROOT = Path(__file__).resolve().parents[2]
#: The two replies issue 20 quotes from the embedded 1.5B playing the user in `make demo`.
QUOTED = ("Great choices! Let me know if there's anything else you need. I'll be happy to help plan your trip.",
          "Sure! I can help you write a note … How can I assist you today?")


#: The first simulator reply of the live quick job with the in-role framing (2026-12-03): the 1.5B
#: still suggested things to the person it was supposed to be.
IN_ROLE_SLIP = "It sounds like you'd enjoy exploring the city. Have you thought about visiting any of these places?"


@pytest.mark.parametrize("text", [*QUOTED, IN_ROLE_SLIP])
def test_the_quoted_replies_are_out_of_role(text: str) -> None:
    reason = out_of_role_reason(text)
    assert reason is not None and "speaks as the assistant" in reason
    with pytest.raises(ValidationError, match="speaks as the assistant"):
        InRoleSimulatorReply(feedback_type="satisfied", text=text)
    assert SimulatorReply(feedback_type="satisfied", text=text).text == text  # the release framing keeps it


def test_recorded_replies_of_the_shipped_quick_run() -> None:
    """recordings/sample-quick-sim_01 (release framing on the 1.5B): 5 of its 12 simulated-user replies
    speak as the assistant ("Great choices! … Don't hesitate to reach out", "You're welcome! … feel free
    to ask"); the others, and every reply of the paper's own users, are the user's."""
    replies = [e.content for e in open_recording(ROOT / "recordings" / "sample-quick-sim_01").iter_events(
        kinds=["message"]) if e.role == "user" and (e.turn or 0) > 0]
    flagged = [text for text in replies if out_of_role_reason(text)]
    assert len(replies) == 12 and len(flagged) == 5
    assert all(t.startswith(("Great choices!", "You're welcome!")) for t in flagged)
    paper = [e.content for e in open_recording(ROOT / "sessions" / "release-a" / "dialogues").iter_events(
        kinds=["message"]) if e.role == "user" and (e.turn or 0) > 0]
    assert len(paper) > 100 and not [t for t in paper if out_of_role_reason(t)]


def test_user_phrasing_and_quoted_messages_are_in_role() -> None:
    for text in ("Hmm, still too long. Let me know if you need the teacher's name.",
                 "Yeah, that works. I’d probably say: “Sorry, I can’t send it, but I can help you with a couple "
                 "problems if you want.”", "Great, but can you make it shorter?"):
        assert out_of_role_reason(text) is None, text


def test_in_role_framing_puts_the_user_in_the_assistant_seat() -> None:
    user = load_users(ROOT / "sessions", ["sim_01"])[0]
    history = [("user", "Plan my trip"), ("assistant", "Here is a plan."), ("user", "Shorter please."),
               ("assistant", "Shorter plan.")]
    messages = prompts_embedded.simulator_messages(user, "Plan my trip", history)
    assert [m.role for m in messages] == ["system", "assistant", "user", "assistant", "user"]
    assert messages[1].content == "Plan my trip" and messages[-1].content == "Shorter plan."
    assert "MEMORY BANK" in messages[0].content and "never the assistant's reply" in messages[0].content


def test_an_out_of_role_reply_is_an_unusable_simulator_reply_with_its_reason(tmp_path: Path) -> None:
    """Embedded framing on a scripted backend whose simulator always answers as the assistant: the
    repair round asks again, then the reply is unusable and the reason is in the recording."""
    import asyncio

    import orjson

    from memprobe_engine.recovery.rollout import RolloutSettings
    from memprobe_engine.recovery.runner import RecoveryPlan, run_recovery
    from tests.functional.recovery_oracle import RecoveryOracle, plan_for
    from tests.functional.test_recovery_run import config, dims

    class Assistantish(RecoveryOracle):
        def answer(self, request):  # type: ignore[no-untyped-def]
            role, text = super().answer(request)
            if role == "simulator":
                return role, orjson.dumps({"feedback_type": "satisfied", "text": QUOTED[0]}).decode()
            return role, text

    chosen = dims(1)
    plan_for(chosen)
    oracle = Assistantish()
    plan = RecoveryPlan(sessions_dir=ROOT / "sessions", users=["sim_01"], dimensions=chosen, systems=["nomem"],
                        modes=["dump_all"], settings=RolloutSettings(max_turns=2, framing="embedded", policy="audit"))
    record = asyncio.run(run_recovery(plan, tmp_path / "rec", llm_config=config(),
                                      backend_factory=lambda spec: oracle))
    reader = open_recording(record)
    errors = [e for e in reader.iter_events(kinds=["error"]) if e.error_type == "SimulatorReplyUnusable"]
    assert errors and "speaks as the assistant" in (errors[0].message or "")
    assert oracle.by_role["simulator"] > 1  # the repair round asked again
    ends = [e.end_reason for e in reader.iter_events(kinds=["episode_end"])]
    assert ends == ["excluded"]
    assert reader.header.config["framing"] == "embedded"
