"""Prompts of the realizer: one short user-assistant session per plan entry, as speaker-tagged lines.

Our own wording of what the upstream generation prompts require per session kind (facts carried
over: values appear verbatim; fillers stay in the user's domain; confusable sessions put the other
value in a wrong relation; a decoy is declined in one sentence; the assistant-noise perturbation
opens with the assistant's wrong statement; reactivation recalls the old value first; a direct
change does not; P1 gives the trigger without naming the new value, P2 uses the new value as
settled; agentic sessions show tool outputs). Sessions are kept short (2–4 turns of a few
sentences) so a small CPU model can write a whole suite.
"""

from __future__ import annotations

from memprobe_engine.llm.types import ChatMessage
from memprobe_engine.paradigms.realize_plan import UPDATE, SessionPlan
from memprobe_engine.paradigms.realize_rules import mentions
from memprobe_engine.paradigms.suite import LatentSpec

SYSTEM = ("You write short, realistic chat sessions between a user and their AI assistant, for a benchmark "
          "that tests long-term memory. Follow the instructions exactly, copy every quoted value word for word, "
          "and never mention a value you were told to avoid.")

# One-sentence refusals by domain (upstream gives such examples too; the wording is ours).
_DECLINE = {
    "personal": '"A friend keeps telling me to try {other}, but honestly I\'m sticking with {cur}. Anyway, ..."',
    "work": '"Someone floated {other} in the meeting, but we decided against it: {cur} stays. Anyway, ..."',
    "agentic": '"A teammate suggested {other}, but we are keeping {cur} for now. Anyway, ..."',
}
REPLY_FORMAT = "Write only the dialogue, one turn per line, each starting with USER:, ASSISTANT: or TOOL:."
_STYLE = {
    "personal": "a casual chat about daily life",
    "work": "a professional chat at work",
    "agentic": "a technical chat between a developer and a coding assistant that can run tools",
}


def session_messages(plan: SessionPlan, spec: LatentSpec, fact: str, feedback: list[str]) -> list[ChatMessage]:
    """The request for one session; ``feedback`` lists the rule problems of the previous attempt."""
    size = ("2 to 4 turns, each 1-2 sentences" if plan.kind.startswith("perturbation")
            else "exactly 2 turns (one USER message, one ASSISTANT reply), each 1-2 sentences")
    background = plan.kind == "weakly_related_background"
    lines = [f"Write {_STYLE.get(spec.domain, _STYLE['work'])}: {size}."]
    if not background:  # background chats are generic: one request serves every fact of a domain
        lines.append(f"The benchmark tracks {fact}.")
    lines.append("")
    lines += _instructions(plan, spec, fact)
    if spec.domain == "agentic":
        lines.append("A TOOL: line may show a short, realistic command or tool result.")
    if plan.forbid and not background:
        lines.append("Do NOT mention: " + ", ".join(f'"{v}"' for v in plan.forbid) + ".")
    avoid = [v for v in spec.distractor_values
             if not plan.distractors_ok and v not in plan.must and not mentions(plan.brief, v)]
    if avoid and not background:
        lines.append("Also do not mention: " + ", ".join(f'"{v}"' for v in avoid) + ".")
    if feedback:
        lines += ["", "Your previous attempt was rejected because: " + "; ".join(feedback) + ". Fix this."]
    lines += ["", REPLY_FORMAT]
    return [ChatMessage(role="system", content=SYSTEM), ChatMessage(role="user", content="\n".join(lines))]


def _instructions(plan: SessionPlan, spec: LatentSpec, fact: str) -> list[str]:
    initial, new, cur, other = spec.canonical_initial, spec.canonical_new, plan.current, plan.other
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
                f"the user's {fact} does not change.")]
    if kind == "decoy_nonupdate":
        return [f"Scenario: {plan.brief}.", (f'"{other}" comes up; in one short sentence the user declines it and '
                f'says they keep "{cur}". Then the chat moves on. Both "{other}" and "{cur}" appear word for word.'),
                f"The USER line could read: {_DECLINE.get(spec.domain, _DECLINE['work']).format(other=other, cur=cur)}"]
    if kind == "stale_reference":
        return [(f'An old document, tracker or cached record still shows "{other}" for {fact}. The user notices the '
                f"entry is out of date but does not fix it in this chat.")]
    if kind == "perturbation_p1":
        return [f"Guidance: {plan.brief}", (f'The user says "{initial}" is no longer current and explains why, '
                f'but never names the new choice (do not write "{new}"; say "the new one" instead).')]
    if kind == "perturbation_p2":
        return [f"Guidance: {plan.brief}", (f'The user casually mentions "{new}" as what they already use now '
                f'(a follow-up about logistics, not an announcement). Do not mention "{initial}".')]
    return _perturbation(spec, plan, fact)


def _perturbation(spec: LatentSpec, plan: SessionPlan, fact: str) -> list[str]:
    initial, new, condition = spec.canonical_initial, spec.canonical_new, spec.condition
    hint = [f"Guidance: {plan.brief}"] if plan.brief else []
    if spec.expected_behavior == UPDATE:
        if condition == "reactivated":
            core = (f'The user first recalls that {fact} was "{initial}" ("remember I told you...?"), then says it '
                    f'has changed to "{new}". The assistant confirms the change.')
        elif condition == "direct":
            core = (f'The user opens by saying {fact} is now "{new}" and why, without recalling the old one. '
                    f"The assistant acknowledges it.")
        else:
            core = (f'The user opens by clearly saying {fact} changed from "{initial}" to "{new}" and why. '
                    f"The assistant acknowledges the change.")
        return hint + [core]
    if condition == "assistant_noise":
        core = (f'The FIRST turn is the assistant, wrongly stating that {fact} is "{new}" in a reminder. The user '
                f'corrects it: it is still "{initial}". The assistant apologizes.')
    elif condition == "third_party_noise":
        core = (f'The user relays that someone else claimed {fact} is "{new}", then says that person is wrong and '
                f'it is still "{initial}".')
    elif condition == "stale_tool":
        where = "a TOOL: line" if spec.domain == "agentic" else "an old dashboard or document the user quotes"
        core = (f'{where[0].upper() + where[1:]} shows "{new}" for {fact}; the user points out that it is '
                f'outdated and that it is still "{initial}".')
    elif condition == "decoy_no_update":
        core = (f'"{new}" comes up about someone or something else (a friend, an article); the user\'s own {fact} '
                f'stays "{initial}" and they say so.')
    elif condition == "reactivated_weak":
        core = (f'The user first recalls that {fact} is "{initial}". Then weak, unconfirmed hearsay suggests "{new}"; '
                f'the user does not adopt it and keeps "{initial}".')
    elif condition == "direct_weak":
        core = (f'Weak, unconfirmed hearsay (a rumour, an old post) suggests {fact} might be "{new}". The user does '
                f'not adopt it and says they keep "{initial}".')
    else:  # consolidation weak challenges and any other preserve condition
        core = (f'A non-authoritative source (a blog, a colleague\'s guess) suggests "{new}" for {fact}; the user '
                f'does not adopt it and keeps "{initial}".')
    return hint + [core]
