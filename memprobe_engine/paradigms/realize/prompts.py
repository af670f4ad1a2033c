"""Prompts of the realizer: one short user-assistant session per plan entry, as speaker-tagged lines.

Our own wording of what the upstream generation prompts require per session kind (facts carried
over: values appear verbatim; fillers stay in the user's domain; confusable sessions put the other
value in a wrong relation; a decoy is declined in one sentence; the assistant-noise perturbation
opens with the assistant's wrong statement; reactivation recalls the old value first; a direct
change does not; P1 gives the trigger without naming the new value, P2 uses the new value as
settled; agentic sessions show tool outputs). Sessions are kept short (2–4 turns of a few
sentences) so a small CPU model can write a whole suite; perturbations and retries are asked as a
turn-by-turn outline with the values written in (see :func:`session_messages`).
"""

from __future__ import annotations

import re

from memprobe_engine.llm.types import ChatMessage
from memprobe_engine.paradigms.realize.leads import session_lead, turn_examples
from memprobe_engine.paradigms.realize.plan import UPDATE, SessionPlan
from memprobe_engine.paradigms.realize.rules import mentions
from memprobe_engine.paradigms.suite import LatentSpec

SYSTEM = ("You write short, realistic chat sessions between a user and their AI assistant, for a benchmark "
          "that tests long-term memory. Follow the instructions exactly, copy every quoted value word for word, "
          "and never mention a value you were told to avoid.")

_OPENER = {"ASSISTANT": "Just a reminder:", "TOOL": "$"}
#: Opening words that end a sentence.
_WHOLE = re.compile(r"[.!?]\s*$")
#: Introduces the reply's first words, in quotes, after the speaker ("The USER line opens with
#: \"…\""); the rules do not count copying those words as copying the instructions
#: (``realize_rules._EXAMPLE``).
LEAD_MARK = "line opens with"
#: Kinds whose first attempt is asked without lead words: the small model mostly wrote near-miss
#: fillers right from the description (49 of 68 checks passed in the first suite run), and keeping
#: that request unchanged lets a resumed run reuse the ones it already accepted.
_LEAD_ON_RETRY = frozenset({"near_miss"})
REPLY_FORMAT = "Write only the dialogue, one turn per line, each starting with USER:, ASSISTANT: or TOOL:."
_STYLE = {
    "personal": "a casual chat about daily life",
    "work": "a professional chat at work",
    "agentic": "a technical chat between a developer and a coding assistant that can run tools",
}


def session_messages(plan: SessionPlan, spec: LatentSpec, fact: str, feedback: list[str]) -> list[ChatMessage]:
    """The request for one session; ``feedback`` lists the rule problems of the previous attempt.

    Perturbations, and every retry, are asked as a turn-by-turn outline with the required values
    already written into each line: the small models we run follow "1. ASSISTANT: … 2. USER: …"
    far more reliably than a description (they otherwise open with small talk, let the wrong
    speaker start, or drop the value). A first attempt at an encoding or filler keeps the plain
    description. Wherever a value stands in a fixed relation (the user's own, someone else's, a
    declined suggestion, a change), the prompt also gives the reply's first words with the value
    in them (:func:`session_lead`), since the models most often failed by never writing it."""
    if plan.kind.startswith("perturbation") or feedback:
        return _outline_messages(plan, spec, fact, feedback)
    size = "exactly 2 turns (one USER message, one ASSISTANT reply), each 1-2 sentences"
    background = plan.kind == "weakly_related_background"
    lines = [f"Write {_STYLE.get(spec.domain, _STYLE['work'])}: {size}."]
    if not background:  # background chats are generic: one request serves every fact of a domain
        lines.append(f"The benchmark tracks {fact}.")
    lines.append("")
    lines += _instructions(plan, spec, fact)
    lines += _avoid_lines(plan, spec)
    lines += ["", REPLY_FORMAT]
    lead = reply_opening(plan, spec, fact, feedback)
    if lead is not None:
        lines += _shape(lead, [("USER", ""), ("ASSISTANT", "")])
    return [ChatMessage(role="system", content=SYSTEM), ChatMessage(role="user", content="\n".join(lines))]


def reply_opening(plan: SessionPlan, spec: LatentSpec, fact: str, feedback: list[str]) -> str | None:
    """The reply's first words as the request gives them (speaker tag included), or None where it
    gives none: a background chat, and a near-miss filler's first attempt. On a backend that
    continues a final assistant message (llama.cpp) the realizer also sends them as the start of the
    reply (see ``realize.PREFILL_BACKENDS``)."""
    if not (plan.kind.startswith("perturbation") or feedback) and plan.kind in _LEAD_ON_RETRY:
        return None
    return session_lead(plan, spec, fact)


def reply_start(plan: SessionPlan, spec: LatentSpec, fact: str, feedback: list[str]) -> str | None:
    """What a prefill backend is sent as the start of the reply: the opening words, and where they
    are a whole sentence (a decoy's refusal, a relayed claim kept at bay) also the next speaker's
    tag. Given only a whole sentence, the 1.5B model ended the reply there: 13 of the 21
    decoy checks of session 5's first chunk were one-turn sessions."""
    opening = reply_opening(plan, spec, fact, feedback)
    if opening is None or not _WHOLE.search(opening):
        return opening
    turns = session_outline(plan, spec, fact)
    return f"{opening}\n{turns[1][0]}:" if len(turns) > 1 else opening


def _shape(lead: str, turns: list[tuple[str, str]]) -> list[str]:
    """How the reply begins, said as an instruction: the lead words in quotes, then "write all N
    turns". No line of it is a dialogue line the model could copy: the earlier layout (a marker
    line, then ``USER: <lead> ...`` and ``ASSISTANT: ...``) was copied as it stood — the marker
    line (then cut by the stop at the next ``USER:``, leaving no turn) and the ``...`` turns: 127
    + 91 + 23 of the 331 rejected checks of the fourth suite session."""
    speaker, _, words = lead.partition(": ")
    count = "both turns" if len(turns) == 2 else f"all {len(turns)} turns"
    return [f"Write {count}, the {turns[0][0]} line first. The {speaker} {LEAD_MARK} \"{words}\" and goes on in "
            f"{'the user' if speaker == 'USER' else 'the assistant'}'s own words."]


def _avoid_lines(plan: SessionPlan, spec: LatentSpec) -> list[str]:
    """The values this session must not name (none for a generic background chat)."""
    lines: list[str] = []
    if spec.domain == "agentic":
        lines.append("A TOOL: line may show a short, realistic command or tool result.")
    if plan.kind == "weakly_related_background":
        return lines
    if plan.forbid:
        lines.append("Do NOT mention: " + ", ".join(f'"{v}"' for v in plan.forbid) + ".")
    avoid = [v for v in spec.distractor_values
             if not plan.distractors_ok and v not in plan.must and not mentions(plan.brief, v)]
    if avoid:
        lines.append("Also do not mention: " + ", ".join(f'"{v}"' for v in avoid) + ".")
    return lines


def _outline_messages(plan: SessionPlan, spec: LatentSpec, fact: str, feedback: list[str]) -> list[ChatMessage]:
    """The session as numbered turns, each saying who speaks and what it must contain."""
    turns = session_outline(plan, spec, fact)
    lines = [f"Write {_STYLE.get(spec.domain, _STYLE['work'])}."]
    if plan.kind != "weakly_related_background":
        lines.append(f"The benchmark tracks {fact}.")
    if plan.kind.startswith("perturbation") and plan.brief:
        lines.append(f"Background for the writer (write it as dialogue, never copy it): {plan.brief}")
    lines += ["", f"The chat has exactly {len(turns)} turns, in this order (a plan: do not copy its wording):"]
    examples = turn_examples(plan, spec, fact)
    lines += [f"Turn {i} ({speaker}) {what}." + (f' For example: "{examples[i]}"' if i in examples else "")
              for i, (speaker, what) in enumerate(turns, start=1)]
    lines += ["Write the words each person actually says, 1-2 natural sentences per turn, in the first person. "
              "Start at once with turn 1: no greetings, no small talk. Copy every quoted value exactly as written."]
    lead = session_lead(plan, spec, fact)
    if lead is None and turns[0][0] != "USER":
        lines.append(f'Your reply must begin with "{turns[0][0]}: {_OPENER.get(turns[0][0], "")}".')
    lines += _avoid_lines(plan, spec)
    if feedback:
        lines += ["", "Your previous attempt was rejected because: " + "; ".join(feedback) + ". Fix this."]
    lines += ["", REPLY_FORMAT]
    if lead is not None:
        # The first line's opening words, with the value in them, close the prompt: small models
        # otherwise open with the wrong speaker or small talk, or never write the value; given
        # earlier in the prompt, the 0.5B model went on copying the instruction lines after it.
        lines += _shape(lead, turns)
    return [ChatMessage(role="system", content=SYSTEM), ChatMessage(role="user", content="\n".join(lines))]


def session_outline(plan: SessionPlan, spec: LatentSpec, fact: str) -> list[tuple[str, str]]:
    """(speaker, what the turn says) for each turn of the session, values quoted."""
    initial, new, cur, other = spec.canonical_initial, spec.canonical_new, plan.current, plan.other
    kind = plan.kind
    if kind == "encoding":
        return [("USER", f'asks for help with this: {plan.brief}; in passing says that {fact} is "{initial}" '
                         f'(this line must contain "{initial}")'),
                ("ASSISTANT", "helps with the request")]
    if kind == "weakly_related_background":
        return [("USER", f"asks for advice on {plan.brief}, naming no specific businesses, products or people"),
                ("ASSISTANT", "gives short, practical advice")]
    if kind == "near_miss":
        extra = (" (it may name one of: " + ", ".join(f'"{v}"' for v in spec.distractor_values) + ")"
                 if spec.distractor_values else "")
        return [("USER", f"{plan.brief}: a topic close to {fact}, but about someone or something else, never "
                         f"the user's own{extra}"),
                ("ASSISTANT", "answers about that other person or thing")]
    if kind == "confusable":
        return [("USER", f'talks about "{other}" as someone else\'s ({plan.brief}); their own {fact} is not '
                         f"changing and is not named"),
                ("ASSISTANT", f'replies about that person\'s or thing\'s "{other}", without suggesting the user '
                              f"change anything")]
    if kind == "decoy_nonupdate":
        return [("USER", f'mentions that "{other}" was suggested, and declines it in one sentence: they keep '
                         f'"{cur}"'),
                ("ASSISTANT", f'acknowledges that "{cur}" stays and helps with the rest')]
    if kind == "stale_reference":
        return [("USER", f'notices an old document, tracker or cached record that still shows "{other}" for '
                         f"{fact}, and says that entry is out of date"),
                ("ASSISTANT", "agrees the entry is old and offers to note it")]
    if kind == "perturbation_p1":
        return [("USER", f'says "{initial}" is no longer current and why, calling the replacement only "the new '
                         f'one" (never its name)'),
                ("ASSISTANT", "acknowledges, without naming any replacement")]
    if kind == "perturbation_p2":
        return [("USER", f'asks a practical follow-up about "{new}", mentioned casually as what they use now '
                         f"(not an announcement)"),
                ("ASSISTANT", f'answers about "{new}"')]
    return _perturbation_outline(spec, fact)


def _perturbation_outline(spec: LatentSpec, fact: str) -> list[tuple[str, str]]:
    initial, new, condition = spec.canonical_initial, spec.canonical_new, spec.condition
    if spec.expected_behavior == UPDATE:
        if condition == "reactivated":
            return [("USER", f'recalls that {fact} has been "{initial}" ("you remember I told you ...?")'),
                    ("ASSISTANT", f'confirms: "{initial}"'),
                    ("USER", f'says it has now changed to "{new}", and why'),
                    ("ASSISTANT", f'confirms the change to "{new}"')]
        if condition == "direct":
            return [("USER", f'says {fact} is now "{new}", and why, without mentioning what it was before'),
                    ("ASSISTANT", f'acknowledges "{new}"')]
        return [("USER", f'says {fact} has changed from "{initial}" to "{new}", and why'),
                ("ASSISTANT", f'acknowledges the change to "{new}"')]
    if condition == "assistant_noise":
        return [("ASSISTANT", f'gives a reminder that wrongly says {fact} is "{new}"'),
                ("USER", f'corrects it: it is still "{initial}"'),
                ("ASSISTANT", f'apologizes: it stays "{initial}"')]
    if condition == "third_party_noise":
        return [("USER", f'says someone else (a colleague, a friend) claimed {fact} is "{new}", but they are '
                         f'wrong: it is still "{initial}"'),
                ("ASSISTANT", f'notes that it stays "{initial}"')]
    if condition == "stale_tool":
        if spec.domain == "agentic":
            return [("USER", f"asks the assistant to check {fact}"),
                    ("TOOL", f'an old, cached output that shows "{new}"'),
                    ("USER", f'says that output is stale: it is still "{initial}"'),
                    ("ASSISTANT", f'agrees: it stays "{initial}"')]
        return [("USER", f'quotes an old dashboard or document that shows "{new}" for {fact}, and says it is '
                         f'outdated: it is still "{initial}"'),
                ("ASSISTANT", f'agrees: it stays "{initial}"')]
    if condition == "decoy_no_update":
        return [("USER", f'says a friend of theirs uses "{new}" (the friend\'s own, not the user\'s)'),
                ("ASSISTANT", f'asks whether the user is thinking of "{new}" too'),
                ("USER", f'says no, they are sticking with "{initial}"'),
                ("ASSISTANT", f'acknowledges that "{initial}" stays')]
    if condition == "reactivated_weak":
        return [("USER", f'recalls that {fact} is "{initial}"'),
                ("ASSISTANT", f'confirms: "{initial}"'),
                ("USER", f'mentions an unconfirmed rumour that it might be "{new}", but says they are keeping '
                         f'"{initial}"'),
                ("ASSISTANT", f'agrees that "{initial}" stays')]
    if condition == "direct_weak":
        return [("USER", f'mentions unconfirmed hearsay (a rumour, an old post) that {fact} might be "{new}", '
                         f'then says they are keeping "{initial}"'),
                ("ASSISTANT", f'agrees that "{initial}" stays')]
    # consolidation weak challenges and any other preserve condition
    return [("USER", f'mentions that a blog or a colleague\'s guess suggests "{new}" for {fact}'),
            ("ASSISTANT", "comments briefly, without recommending a switch"),
            ("USER", f'says they are not adopting it and are keeping "{initial}"'),
            ("ASSISTANT", f'acknowledges that "{initial}" stays')]


def _instructions(plan: SessionPlan, spec: LatentSpec, fact: str) -> list[str]:
    initial, cur, other = spec.canonical_initial, plan.current, plan.other
    kind = plan.kind
    if kind == "encoding":
        return [f"Situation: {plan.brief}.",
                (f'While asking for help, the user mentions in passing that {fact} is "{initial}". '
                 f'The USER line itself must contain "{initial}" word for word; the user does not announce it '
                 f'as news.')]
    if kind == "weakly_related_background":
        return [f"Topic: {plan.brief}. Stay on this topic and name no specific businesses, products or people."]
    if kind == "near_miss":
        extra = (" You may name one of: " + ", ".join(spec.distractor_values) + ".") if spec.distractor_values else ""
        return [(f"Pattern: {plan.brief}. The topic is close to {fact}, but it is about a different person or thing, "
                f"never the user's own.{extra}")]
    if kind == "confusable":
        return [f"Scenario: {plan.brief}.", (f'"{other}" must appear word for word, but it is NOT the user\'s own: '
                f"{fact} does not change.")]
    if kind == "decoy_nonupdate":
        return [f"Scenario: {plan.brief}.", (f'"{other}" comes up; in one short sentence the user declines it and '
                f'says they keep "{cur}". Then the chat moves on. Both "{other}" and "{cur}" appear word for word.'),
]
    if kind == "stale_reference":
        return [(f'An old document, tracker or cached record still shows "{other}" for {fact}. The user notices the '
                f"entry is out of date but does not fix it in this chat.")]
    raise ValueError(f"perturbation kinds are outlined, not described: {kind}")
