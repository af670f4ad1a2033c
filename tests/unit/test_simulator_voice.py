"""Out-of-role detection of simulated-user replies, on replies real runs recorded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from memprobe_engine.events.reader import open_recording
from memprobe_engine.recovery import prompts, prompts_embedded
from memprobe_engine.recovery.inputs import load_users
from memprobe_engine.recovery.schemas import InRoleSimulatorReply, SimulatorReply
from memprobe_engine.recovery.simulator_voice import out_of_role_reason
from tests.doubles import BagOfWordsEmbedder

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


def test_the_shipped_live_run_speaks_as_the_user_and_discloses_a_third_of_its_tasks() -> None:
    """recordings/sample-quick-live-sim_01 (`make demo-live` on 2026-12-04: chat log with the focus
    pick, stage 1 with quoted evidence): every simulated-user line passes the detector (13 of 14 are
    hers by reading; one speaks of "RENEE" in the third person), and stage 1 finds the user's own
    words disclosing the target on the geography task in both systems, 2 of the 6 tasks."""
    recording = ROOT / "recordings" / "sample-quick-live-sim_01"
    events = list(open_recording(recording).iter_events(kinds=["message", "attribution_stage"]))
    lines = [e.content for e in events if e.kind == "message" and e.role == "user" and (e.turn or 0) > 0]
    assert len(lines) == 14 and not [text for text in lines if out_of_role_reason(text)]
    disclosed = {(e.system, e.dimension) for e in events
                 if e.kind == "attribution_stage" and e.stage == 1 and e.verdict == "disclosed"}
    assert disclosed == {("nomem", "regional_geography_knowledge"), ("longctx_full", "regional_geography_knowledge")}
    evidence = {e.evidence for e in events if e.kind == "attribution_stage" and e.verdict == "disclosed"}
    assert evidence and all(quote in lines for quote in evidence)


def test_user_phrasing_and_quoted_messages_are_in_role() -> None:
    for text in ("Hmm, still too long. Let me know if you need the teacher's name.",
                 "Yeah, that works. I’d probably say: “Sorry, I can’t send it, but I can help you with a couple "
                 "problems if you want.”", "Great, but can you make it shorter?"):
        assert out_of_role_reason(text) is None, text


#: A reply of the live quick job (in-role chat framing, 2026-12-03) that the first detector missed: the
#: 1.5B went on with the assistant's own instructions and asked how they worked for "you".
MISSED_SLIP = ("sit for 15 minutes before running the cycle again. The vinegar and baking soda are effective in "
               "breaking down the mildew and can also help freshen the air. Let me know if either method works "
               "best for you.")


#: A first line of the chat-log framing on a paper user's state (bench/simulator_voice.py, 2026-12-03).
LOG_SLIP = "It seems like you’re already on your way to get everything back on track. Any updates?"


def test_a_reply_that_asks_how_the_advice_works_for_you_is_out_of_role() -> None:
    reason = out_of_role_reason(MISSED_SLIP)
    assert reason is not None and "works best for you" in reason
    assert out_of_role_reason(LOG_SLIP) is not None
    # The live quick job's last line under the chat-log framing (2026-12-03), and a user's own question.
    assert out_of_role_reason("Is there anything else you would like to know about laundry?") is not None
    assert out_of_role_reason("Is there anything else I should know before I start washing?") is None
    assert out_of_role_reason("ok, I'll try the vinegar first and see if it works for me") is None


def _log(history: list[tuple[str, str]]) -> prompts_embedded.SimulatorLog:
    user = load_users(ROOT / "sessions", ["sim_01"])[0]
    return prompts_embedded.simulator_log(user, history[0][1], history)


def test_the_embedded_simulator_continues_a_chat_log_as_the_user() -> None:
    """The dialogue is a trailing assistant message the server continues, ending where Renee's next
    line opens; persona, bank and the release's rules (without their JSON reply shape) are the system."""
    log = _log([("user", "Plan my trip"), ("assistant", "Here is a plan."), ("user", "Shorter please."),
                ("assistant", "Shorter plan.")])
    assert [m.role for m in log.messages] == ["system", "user", "assistant"]
    assert log.prefill == ("RENEE: Plan my trip\n\nASSISTANT: Here is a plan.\n\nRENEE: Shorter please.\n\n"
                           "ASSISTANT: Shorter plan.\n\nRENEE (")
    system = log.messages[0].content
    assert system.startswith(prompts.SIMULATOR_SYSTEM.split("\n")[0]) and "MEMORY BANK" in system
    assert "satisfied: you HAVE the concrete result" in system and "Reply with one JSON object" not in system
    assert "Do not reuse the opening" in log.messages[1].content
    assert "\nASSISTANT:" in log.stop and "\nRENEE (" in log.stop
    paper_user = load_users(ROOT / "sessions" / "release-a", ["user_001"])[0]
    assert prompts_embedded.simulator_log(paper_user, "Hi", [("user", "Hi"), ("assistant", "Hello")]).prefill.endswith(
        "\n\nUSER (")  # the paper's users are named by their id only


def test_the_user_line_is_parsed_from_what_the_server_returned() -> None:
    log = _log([("user", "My cousin is flying into Dayton."), ("assistant", "Here are a few day trips.")])
    # What llama.cpp returned on the fixed set (bench/simulator_voice.py): the prefill, then the line.
    reply = log.reply(log.prefill + "followup): What's the best way to get to these places?\n")
    assert (reply.feedback_type, reply.text) == ("followup", "What's the best way to get to these places?")
    assert log.reply("satisfied): Good, that's it.").is_done  # a server that returns only the continuation
    for bad, why in ((log.prefill + "followup): \n", "at least 1 character"),
                     (log.prefill + "Great choices!", "no reaction label"),
                     (log.prefill + "pleased): Thanks.", "feedback_type"),
                     (log.prefill + "satisfied): Great choices! Let me know if there's anything else you need.",
                      "speaks as the assistant")):
        with pytest.raises(ValueError, match=why):
            log.reply(bad)
    assert log.said(log.prefill + "followup): Let me know if you need anything else.") == \
        "Let me know if you need anything else."


def _embedded_run(tmp_path: Path, oracle: Any, max_turns: int) -> Any:
    """One sim_01 unit on nomem under the embedded framing, answered by ``oracle``; its reader."""
    import asyncio

    from memprobe_engine.recovery.rollout import RolloutSettings
    from memprobe_engine.recovery.runner import RecoveryPlan, run_recovery
    from tests.functional.recovery_oracle import plan_for
    from tests.functional.test_recovery_run import config, dims

    chosen = dims(1)
    plan_for(chosen)
    plan = RecoveryPlan(sessions_dir=ROOT / "sessions", users=["sim_01"], dimensions=chosen, systems=["nomem"],
                        modes=["dump_all"],
                        settings=RolloutSettings(max_turns=max_turns, framing="embedded", policy="audit"))
    record = asyncio.run(run_recovery(plan, tmp_path / "rec", llm_config=config(),
                                      backend_factory=lambda spec: oracle, embedder=BagOfWordsEmbedder(hashed=True)))
    return open_recording(record)


def test_an_out_of_role_reply_is_an_unusable_simulator_reply_with_its_reason(tmp_path: Path) -> None:
    """Embedded framing on a scripted backend whose simulator always answers as the assistant: the
    line is asked for again with the next seeds, then the reply is unusable and the reason is in the
    recording."""
    from tests.functional.recovery_oracle import RecoveryOracle

    class Assistantish(RecoveryOracle):
        def answer(self, request):  # type: ignore[no-untyped-def]
            role, text = super().answer(request)
            if role == "simulator":
                return role, f"{request.messages[-1].content}satisfied): {QUOTED[0]}"
            return role, text

    oracle = Assistantish()
    reader = _embedded_run(tmp_path, oracle, max_turns=2)
    errors = [e for e in reader.iter_events(kinds=["error"]) if e.error_type == "SimulatorReplyUnusable"]
    assert errors and "speaks as the assistant" in (errors[0].message or "")
    seeds = [r.params.seed for r in oracle.requests if r.messages[-1].role == "assistant"]
    assert seeds == [0, 1, 2]  # asked again twice, each a fresh sample
    ends = [e.end_reason for e in reader.iter_events(kinds=["episode_end"])]
    assert ends == ["excluded"]
    assert reader.header.config["framing"] == "embedded"


def test_an_in_role_line_ends_the_episode_as_the_user_said(tmp_path: Path) -> None:
    """Embedded framing on the scripted backend: the user's lines are read from the continued log, the
    second one is ``satisfied`` and ends the episode; no line is unusable and none is asked for twice."""
    from tests.functional.recovery_oracle import RecoveryOracle

    oracle = RecoveryOracle()
    reader = _embedded_run(tmp_path, oracle, max_turns=4)
    said = [(e.feedback_type, e.content) for e in reader.iter_events(kinds=["message"])
            if e.role == "user" and (e.turn or 0) > 0]
    assert said == [("followup", "I usually do this after my night shift, and I like short checklists."),
                    ("satisfied", "Good, that works for me.")]
    assert [e.end_reason for e in reader.iter_events(kinds=["episode_end"])] == ["satisfied"]
    assert not [e for e in reader.iter_events(kinds=["error"])]
    logs = [r for r in oracle.requests if r.messages[-1].role == "assistant"]
    assert {r.params.seed for r in logs} == {0}
    picks = [r for r in oracle.requests if r.messages[0].content.startswith("You decide what a message brings")]
    assert picks and all("\n- " in r.messages[1].content for r in picks)  # the focus entries were shown


def test_a_focus_pick_opens_the_line_and_the_log_model_finishes_it(tmp_path: Path) -> None:
    """When the pick names a memory, the log ends ``RENEE (label): first words`` and the recorded user
    message is those words and the model's continuation, under the pick's label."""
    import orjson

    from tests.functional.recovery_oracle import RecoveryOracle

    class Picking(RecoveryOracle):
        def answer(self, request):  # type: ignore[no-untyped-def]
            role, text = super().answer(request)
            if role == "focus_choice":
                first = request.messages[1].content.split("\n- ", 1)[1].split(": ", 1)[0]  # a dimension name
                return role, orjson.dumps({"reason": "r", "memory": first, "feedback_type": "add_context",
                                           "opening": "I did this for years on nights."}).decode()
            if role == "simulator" and request.messages[-1].role == "assistant":
                return role, request.messages[-1].content + " Keep it to a short list."
            return role, text

    oracle = Picking()
    reader = _embedded_run(tmp_path, oracle, max_turns=1)
    said = [(e.feedback_type, e.content) for e in reader.iter_events(kinds=["message"])
            if e.role == "user" and (e.turn or 0) > 0]
    assert said == [("add_context", "I did this for years on nights. Keep it to a short list.")]
    log = next(r for r in oracle.requests if r.messages[-1].role == "assistant")
    assert log.messages[-1].content.endswith("\n\nRENEE (add_context): I did this for years on nights.")


def test_the_focus_names_the_bank_entries_the_moment_touches() -> None:
    """On the real embeddings (MiniLM) and the shipped live recording's first assistant replies: the
    cousin's day trips touch sim_01's knowledge of Dayton's roads, the note to a grieving nurse her own
    worst night. The ranking reads the moment only; the task's target is never an input."""
    import asyncio

    from bench.simulator_voice import states
    from memprobe_engine.llm.embeddings import Embedder, SentenceTransformerBackend
    from memprobe_engine.recovery.simulator_focus import FOCUS_SIZE, focus_entries

    embedder = Embedder(SentenceTransformerBackend(), use_cache=False)
    wanted = {"My cousin is flying": "regional_geography_knowledge", "A younger nurse": "low_point_episode"}
    checked = 0
    for state in states():
        target = next((dim for opening, dim in wanted.items() if state.task_text.startswith(opening)), None)
        if state.source != "live" or target is None:
            continue
        focus = asyncio.run(focus_entries(embedder, state.user, state.task_text, state.history))
        assert len(focus) == FOCUS_SIZE and target in [entry.dimension for entry in focus], state.name
        checked += 1
    assert checked == 3


def test_a_picked_opening_that_is_not_the_users_own_words_is_dropped() -> None:
    """Openings the 1.5B's focus pick wrote on the live quick job (2026-12-03): the first line of the
    note the assistant had drafted, a bank explanation word for word, the pick's own instruction. Its
    own statement stays."""
    from memprobe_engine.recovery.simulator_focus import opening_problem

    user = load_users(ROOT / "sessions", ["sim_01"])[0]
    history = [("user", "A younger nurse on my unit is struggling."),
               ("assistant", "Sure! Here's a simple note:\n\nDear Younger Nurse,\n\nI hope this message finds you "
                             "well. I wanted to take a moment to share something I learned.")]
    assert "repeats the assistant's message" in (opening_problem("I hope this message finds you well.", user,
                                                                 history) or "")
    copied = "I remember when I was eight, a pan caught fire in my family's kitchen in Springfield."
    assert "copies the bank entry early_childhood_scene" in (opening_problem(copied, user, history) or "")
    own = "I know the region well and can plan day trips based on my knowledge of the area."
    assert opening_problem(own, user, history) is None
    from memprobe_engine.recovery.prompts_embedded import focus_choice_messages
    instructions = focus_choice_messages(user, history[0][1], history, user.bank.entries[:4])[-1].content
    leaked = ("RENEE types back, in the first person and RENEE's own casual words, bringing that memory up (not "
              "copying it); empty when the memory is nothing. The chat ends there.")
    assert "repeats its instructions" in (opening_problem(leaked, user, history, instructions) or "")
    assert opening_problem(own, user, history, instructions) is None


def test_a_line_that_repeats_the_assistants_message_is_asked_for_again() -> None:
    """The live quick job's longctx_full line at turn 3 was the assistant's previous reply, reworded
    by one word; naming a place from the reply is still the user's."""
    reply = ("Managing a trauma can be challenging, but it's important to stay calm and focused. One effective "
             "approach is to take deep breaths and count to 10 before taking action.")
    log = _log([("user", "How do I get the mildew smell out?"), ("assistant", reply)])
    echoed = ("followup): Managing a trauma can be challenging, but it's important to stay calm and focused. One "
              "approach is to take deep breaths and count to 10 before taking action.")
    with pytest.raises(ValueError, match="repeats the assistant's message"):
        log.reply(log.prefill + echoed)
    assert log.reply(log.prefill + "followup): Count to 10? I've run codes, I stay calm fine.").text.startswith("Count")
