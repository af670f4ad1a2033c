"""The exact words a realized session starts with, and example lines for its later turns.

A small model writes a required value far more reliably when the prompt hands it the sentence
that holds it than when it is told to "mention X in passing": in the shipped suite's recording the
0.5B/1.5B models most often failed because the user never said the value (the assistant did, or
nobody did), a confusable filler named the other value without saying whose it was, or a preserve
perturbation never had the user keep the old value. So each prompt (see ``realize_prompts``) now
says how the reply begins — ``USER: My paper submission deadline is March 28, and`` — and gives a
first-person example for each later turn of an outline. The content is the spec's: the values, who
holds them and the relation between them (the user's own value; someone else's; a rejected
suggestion; a stale record; a change) are exactly what the plan's rules require, and the rules
still check every reply.

Fact phrases come from the fact-type registry's ``readable`` text ("the user's paper submission
deadline", "the port the database service runs on"), turned mechanically into the speaker's
words: "my …" (the user), "your …" (the assistant), "my friend Sam's …" (someone else).
"""

from __future__ import annotations

import re

from memprobe_engine.paradigms.realize.plan import UPDATE, SessionPlan
from memprobe_engine.paradigms.suite import LatentSpec

#: Whose value a confusable filler talks about, by domain and the filler's running index (the
#: plan's confusable scenarios: a friend or colleague, [an article: see session_lead], another
#: person or project).
_OWNERS: dict[str, tuple[str, ...]] = {
    "personal": ("my friend Sam", "my sister", "my neighbour Alex"),
    "work": ("my colleague Sam", "another team", "a colleague on another project"),
    "agentic": ("my teammate Sam", "another team", "a different project"),
}
#: Who relays a rumour or suggestion, by domain.
_RELAY = {"personal": "A friend", "work": "A colleague", "agentic": "A teammate"}
#: How an encoding's user line opens, by encoding index (varied so the sessions do not repeat).
_ENCODING = ("{s} is {v}, and", "Since {s} is {v},", "Quick one: {s} is {v}, so", "With {s} being {v},")
#: One-sentence refusals of a decoy filler, by domain (the value the user keeps stays).
_DECLINE = {
    "personal": "A friend keeps telling me to try {other}, but honestly I'm sticking with {cur}.",
    "work": "Someone floated {other} in the meeting, but we decided against it: {cur} stays.",
    "agentic": "A teammate suggested {other}, but we are keeping {cur} for now.",
}


def subject(fact: str, who: str) -> str:
    """The fact as ``who`` would name it: ``"me"`` (the user speaking), ``"you"`` (the assistant
    speaking to the user) or a third party such as ``"my friend Sam"``.

    ``"the user's current gym membership"`` → ``"my current gym membership"`` / ``"your …"`` /
    ``"my friend Sam's …"``; ``"how the user commutes to work"`` → ``"the way I commute to work"``;
    ``"who owns the billing module"`` → ``"the owner of the billing module"``; a phrase with no
    owner (``"the API request timeout setting"``) takes one on its last ``the``."""
    fact = re.sub(r"\s*\(v\d+\)\s*$", "", fact.strip())
    possessive = {"me": "my", "you": "your"}.get(who, f"{who}'s")
    how = re.match(r"how the user (\w+?)s\b(.*)$", fact)
    if how:  # "how the user commutes to work": a verb phrase, not a noun
        person = {"me": "I", "you": "you"}.get(who, who)
        verb = how.group(1) + ("" if who in ("me", "you") else "s")
        return f"the way {person} {verb}{how.group(2)}"
    owns = re.match(r"who owns (the )?(.*)$", fact)
    if owns:  # a module's owner is not the user's: only someone else's module takes an owner
        return f"the owner of {'the' if who in ('me', 'you') else possessive} {owns.group(2)}"
    if "the user's" in fact:
        return fact.replace("the user's", possessive)
    if fact.startswith("the team's"):
        team = "another team's" if who == "another team" else f"{possessive} team's"
        return team + fact[len("the team's"):]
    cut = fact.rfind("the ")
    if cut < 0:
        return f"{possessive} {fact}"
    # No owner in the phrase: the user's team speaks of "our" setting, never "my".
    owner = "our" if who == "me" else possessive
    return fact[:cut] + owner + " " + fact[cut + len("the "):]


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def session_lead(plan: SessionPlan, spec: LatentSpec, fact: str) -> str | None:
    """How the reply must begin (speaker tag included), or None for a background filler (it names
    no value)."""
    initial, new, cur, other = spec.canonical_initial, spec.canonical_new, plan.current, plan.other
    me, you = subject(fact, "me"), subject(fact, "you")
    domain = spec.domain if spec.domain in _OWNERS else "work"
    kind = plan.kind
    if kind == "encoding":
        template = _ENCODING[plan.index % len(_ENCODING)]
        return "USER: " + _cap(template.format(s=me, v=initial))
    if kind == "confusable":
        n = int(plan.metadata.get("filler_idx", 0))
        if n % 3 == 1:  # the plan's second scenario: an article or review mentions the value
            return f"USER: An article I read says {subject(fact, 'its author')} is {other}"
        owners = _OWNERS[domain]
        return f"USER: {_cap(subject(fact, owners[n % len(owners)]))} is {other}"
    if kind == "near_miss":  # the fact's topic, someone else's; a distractor value may be theirs
        owner = _cap(subject(fact, _OWNERS[domain][0]))
        if spec.distractor_values:
            return f"USER: {owner} is {spec.distractor_values[0]}"
        return f"USER: A question about {owner[:1].lower() + owner[1:]}:"
    if kind == "decoy_nonupdate":
        return "USER: " + _DECLINE[domain].format(other=other, cur=cur)
    if kind == "stale_reference":
        return f"USER: The old tracker still shows {other} for {me}, but that entry is out of date."
    if kind == "perturbation_p1":
        # The trigger in the user's own words, the replacement unnamed: given only "… is no longer
        # X:", the models went on with the outline's stage direction ("… and why, calling the
        # replacement only 'the new one'"), which the shipped PILOT-12A / 19A / 19B P1 turns copy.
        if spec.perturbation.reactivation:
            return f"USER: You know how {me} has been {initial}? I've stopped, and the new one I found is better, because"
        return f"USER: {_cap(me)} is no longer {initial}: I found a new one that suits me better, because"
    if kind == "perturbation_p2":
        return f"USER: Now that {me} is {new},"
    if kind != "perturbation":
        return None
    condition = spec.condition
    if spec.expected_behavior == UPDATE:
        if condition == "reactivated":
            return f"USER: You remember {me} has been {initial}, right?"
        if condition == "direct":
            return f"USER: {_cap(me)} is now {new}, because"
        # "…, because": ending on the comma, the models went on with the outline's own words ("…
        # to April 15, and why?"), all four attempts at PILOT-02A in session 5.
        return f"USER: {_cap(me)} has changed from {initial} to {new}, because"
    if condition == "assistant_noise":
        return f"ASSISTANT: Just a reminder: {you} is {new}."
    if condition == "third_party_noise":
        return f"USER: {_RELAY[domain]} claimed {me} is {new}, but that's wrong: it is still {initial}."
    if condition == "stale_tool":
        if spec.domain == "agentic":
            return f"USER: Can you check {me}?"
        return f"USER: An old dashboard still shows {new} for {me}, but it is outdated: it is still {initial}."
    if condition == "decoy_no_update":
        return f"USER: {_cap(subject(fact, _OWNERS[domain][0]))} is {new}."
    if condition == "reactivated_weak":
        return f"USER: You remember {me} is {initial}, right?"
    if condition == "direct_weak":
        return f"USER: I saw an old post claiming {me} might be {new}, but I'm keeping {initial}."
    return f"USER: {_RELAY[domain]} wondered whether {me} might be {new}."


def turn_examples(plan: SessionPlan, spec: LatentSpec, fact: str) -> dict[int, str]:
    """Example words for the later turns of a perturbation outline (turn number → line), first
    person, with the values in the relation the rules check."""
    if plan.kind != "perturbation":
        return {}
    initial, new, condition = spec.canonical_initial, spec.canonical_new, spec.condition
    you = subject(fact, "you")
    if spec.expected_behavior == UPDATE:
        if condition == "reactivated":
            return {2: f"Yes, {you} is {initial}.", 3: f"It has now changed to {new}, because",
                    4: f"Got it: {you} is now {new}."}
        return {2: f"Got it: {you} is now {new}."}
    if condition == "assistant_noise":
        return {2: f"No, {subject(fact, 'me')} is still {initial}.", 3: f"Sorry, you're right: it stays {initial}."}
    if condition == "stale_tool" and spec.domain == "agentic":
        return {2: f"[cached 3 weeks ago] {new}", 3: f"That output is stale: it is still {initial}.",
                4: f"Agreed, it stays {initial}."}
    if condition == "decoy_no_update":
        return {2: f"Are you thinking of {new} too?", 3: f"No, I'm sticking with {initial}.",
                4: f"Got it, {initial} stays."}
    if condition == "reactivated_weak":
        return {2: f"Yes, it is {initial}.",
                3: f"I heard an unconfirmed rumour that it might be {new}, but I'm keeping {initial}.",
                4: f"Agreed, {initial} stays."}
    if condition in ("third_party_noise", "direct_weak", "stale_tool"):
        return {2: f"Understood, {initial} stays."}
    return {2: "That sounds like a guess, not a confirmed change.",
            3: f"Nothing has changed, though: it is still {initial}.", 4: f"Understood, {initial} stays."}
