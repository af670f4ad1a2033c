"""The realizer's lead words and turn examples, and value matching inside longer values.

Every session kind with a value in a fixed relation is asked with the reply's first words given
(the value in them); these tests hold that a reply which follows those words (and the outline's
example lines) passes the session's rules for every spec of the upstream suite, so the prompt never
asks for something the rules reject."""

from __future__ import annotations

from pathlib import Path

import pytest

from memprobe_engine.paradigms.realize.leads import session_lead, subject, turn_examples
from memprobe_engine.paradigms.realize.plan import build_plan, readable_fact
from memprobe_engine.paradigms.realize.prompts import LEAD_MARK, reply_opening, session_messages, session_outline
from memprobe_engine.paradigms.realize.rules import check_session, mentions
from memprobe_engine.paradigms.realize.writer import join_reply, session_turns
from memprobe_engine.paradigms.suite import Turn, load_fact_types, load_specs

ROOT = Path(__file__).resolve().parents[2]
SPECS = ROOT / "sessions" / "paradigms" / "suite56-specs" / "latent_specs.json"
ALL = {s.episode_id: s for s in load_specs(SPECS)}
FACTS = load_fact_types(SPECS.parent / "value_pairs.json")


def _follow(lead: str, outline: list[tuple[str, str]], examples: dict[int, str]) -> str:
    """A reply that starts with the lead and says each example line (a neutral line elsewhere)."""
    lines = [lead + " I wanted to mention it."]
    for i, (speaker, _what) in enumerate(outline[1:], start=2):
        said = examples.get(i, "Okay, thanks for letting me know.")
        lines.append(f"{speaker}: {said}" + (" it suits me better." if said.endswith("because") else ""))
    return "\n".join(lines)


@pytest.mark.parametrize("episode_id", sorted(ALL))
def test_a_reply_that_follows_the_lead_passes_the_rules(episode_id: str) -> None:
    spec = ALL[episode_id]
    fact = readable_fact(spec, FACTS)
    led = 0
    for plan in build_plan(spec):
        lead = session_lead(plan, spec, fact)
        if lead is None:
            assert plan.kind == "weakly_related_background"
            continue
        led += 1
        for feedback in ([], ["retry"]):
            prompt = session_messages(plan, spec, fact, feedback)[1].content
            # A near-miss filler's first attempt keeps the plain description (see realize_prompts).
            given = bool(feedback) or plan.kind != "near_miss"
            assert (f'{LEAD_MARK} "{lead.partition(": ")[2]}"' in prompt) == given
            assert reply_opening(plan, spec, fact, feedback) == (lead if given else None)
            reply = _follow(lead, session_outline(plan, spec, fact), turn_examples(plan, spec, fact))
            assert check_session(plan, session_turns(reply), spec, prompt) == [], (plan.kind, reply)
            # Sent as the reply's start (llama.cpp continues it), the opening joins what follows.
            assert session_turns(join_reply(lead, reply[len(lead):])) == session_turns(reply)
    assert led >= (spec.num_encoding_sessions or 1) + 1


def test_subject_speaks_the_fact_in_each_voice() -> None:
    assert subject("the user's paper submission deadline", "me") == "my paper submission deadline"
    assert subject("the user's paper submission deadline", "you") == "your paper submission deadline"
    assert subject("the user's go-to coffee shop", "my friend Sam") == "my friend Sam's go-to coffee shop"
    assert subject("the port the database service runs on (v2)", "me") == "the port our database service runs on"
    assert subject("the port the database service runs on", "another team") == (
        "the port another team's database service runs on")
    assert subject("how the user commutes to work", "me") == "the way I commute to work"
    assert subject("how the user commutes to work", "my sister") == "the way my sister commutes to work"
    assert subject("who owns the billing module (v2)", "me") == "the owner of the billing module"
    assert subject("the team's daily standup time", "me") == "my team's daily standup time"
    assert subject("the team's daily standup time", "another team") == "another team's daily standup time"


def test_the_version_tag_of_a_fact_is_not_in_the_prompts() -> None:
    spec = ALL["PILOT-19C"]
    fact = readable_fact(spec, FACTS)
    assert fact == "the port the database service runs on"
    assert all("(v2)" not in session_messages(p, spec, fact, [])[1].content for p in build_plan(spec, filler_cap=1))


def test_a_value_inside_a_longer_value_is_not_a_mention() -> None:
    assert not mentions("We deploy bi-weekly now.", "weekly", ("weekly", "bi-weekly"))
    assert mentions("We deploy bi-weekly now, not weekly.", "weekly", ("weekly", "bi-weekly"))
    assert mentions("We deploy bi-weekly now.", "weekly"), "without the spec's values, the words match"
    spec = ALL["PILOT-12B"]  # weekly -> bi-weekly: the new value contains the old one
    fact = readable_fact(spec, FACTS)
    p2 = next(p for p in build_plan(spec, filler_cap=1) if p.kind == "perturbation_p2")
    said = [Turn(role="user", content="Now that we ship bi-weekly, how should I plan the release notes?"),
            Turn(role="assistant", content="Group the notes per bi-weekly release.")]
    assert check_session(p2, said, spec, session_messages(p2, spec, fact, [])[1].content) == []
    both = [said[0], Turn(role="assistant", content="Unlike weekly, bi-weekly gives you more time.")]
    assert any('"weekly" must not appear' in p for p in check_session(p2, both, spec))


def test_the_lead_of_a_preserve_perturbation_keeps_the_value_and_rules_still_apply() -> None:
    spec = ALL["PILOT-02B"]  # assistant noise: the assistant opens with the wrong value
    fact = readable_fact(spec, FACTS)
    pert = next(p for p in build_plan(spec, filler_cap=1) if p.kind == "perturbation")
    prompt = session_messages(pert, spec, fact, [])[1].content
    assert prompt.endswith('\nWrite all 3 turns, the ASSISTANT line first. The ASSISTANT line opens with "Just a '
                           'reminder: your paper submission deadline is April 15." and goes on in the assistant\'s '
                           'own words.'), "the opening words close the prompt, on no line of their own"
    assert 'For example: "No, my paper submission deadline is still March 28."' in prompt
    assert reply_opening(pert, spec, fact, []) == "ASSISTANT: Just a reminder: your paper submission deadline is April 15."
    # Writing the lead but never keeping the old value still fails: the lead is help, not a pass.
    lazy = session_turns("ASSISTANT: Just a reminder: your paper submission deadline is April 15.\n"
                         "USER: Oh, thanks for the reminder!")
    assert any('reaffirm "March 28"' in p for p in check_session(pert, lazy, spec, prompt))


def test_a_copied_placeholder_is_dropped_and_a_placeholder_turn_fails() -> None:
    spec = ALL["PILOT-19A"]
    confusable = next(p for p in build_plan(spec, filler_cap=1) if p.kind == "confusable")
    # The shipped run's first replies to the reply shape: the marker copied after the lead, and
    # an assistant turn that was nothing but the marker.
    turns = session_turns("USER: My friend Sam's go-to coffee shop is Stumptown Coffee ...\nASSISTANT: ...")
    assert [t.content for t in turns] == ["My friend Sam's go-to coffee shop is Stumptown Coffee", ""]
    assert any("only \"...\"" in p for p in check_session(confusable, turns, spec))
    stored = [Turn(role="user", content="My friend Sam's go-to coffee shop is Stumptown Coffee."),
              Turn(role="assistant", content="...")]  # as a written episode holds it (--recheck)
    assert any("only \"...\"" in p for p in check_session(confusable, stored, spec))
    kept = session_turns("USER: My friend Sam's go-to coffee shop is Stumptown Coffee ...\n"
                         "ASSISTANT: Sam has good taste; I hear their pour-over is great.")
    assert check_session(confusable, kept, spec) == []


def test_a_turn_that_loops_fails_and_a_repeated_value_does_not() -> None:
    spec = ALL["PILOT-10A"]
    p1 = next(p for p in build_plan(spec, filler_cap=1) if p.kind == "perturbation_p1")
    said = Turn(role="user", content="My current gym membership is no longer YMCA Downtown: I found a new one that "
                                     "suits me better, because it has a climbing wall.")
    looped = [said, Turn(role="assistant", content="The new place or climbing gym, " * 6)]  # session 5's P1
    assert any("over and over" in p for p in check_session(p1, looped, spec))
    twice = [said, Turn(role="assistant", content="A climbing wall sounds fun; a climbing wall is good training "
                                                  "and a climbing wall is social.")]
    assert check_session(p1, twice, spec) == []
