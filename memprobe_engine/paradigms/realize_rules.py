"""Rule checks on one realized session (the paper's App. E.1 rule-based validation, per session).

A session passes when: every value its plan requires appears (verbatim up to case, spacing and
punctuation); no value it forbids appears — in particular the new value never shows up before the
perturbation except where the filler plan puts it (confusable / decoy sessions); the spec's
distractor values appear only where planned (near-miss sessions); a decoy or a rejected
perturbation never has the user confirm a change to the other value; speaker structure follows the
condition (an assistant-noise perturbation opens with the assistant; a user-driven update is stated
by the user; a stale-tool perturbation shows the stale value in a tool output in agentic domains);
and reactivation order holds (reactivated: the old value is recalled before the new one appears).

Problems are returned as short sentences; the realizer shows them to the model when it asks again.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from memprobe_engine.paradigms.realize_plan import UPDATE, SessionPlan
from memprobe_engine.paradigms.suite import LatentSpec, Turn

MIN_TURNS = 2
MAX_TURNS = 6
#: Words that, just before the other value in a user turn, state that the user adopted it.
_ADOPT = re.compile(r"\b(switch(ed|ing)? (over )?to|mov(ed|ing) to|chang(ed|ing) (it )?to|signed up (at|for|with)|"
                    r"joined|migrat(ed|ing) to|start(ed)? using|now (use|using|go to|going to|at|on)|"
                    r"(i|we)('m| am|'re| are) (now )?(going with|using|on)|went with|picked|decided on|"
                    r"updated? (it )?to|set (it )?to)\s+(the\s+)?$", re.IGNORECASE)
_NEGATION = re.compile(r"\b(not|n't|never|no longer|instead of|rather than|against|won't|didn't|don't|nah|no)\b",
                       re.IGNORECASE)
_REJECT = re.compile(r"\b(stick(ing)? with|stay(ing)? with|keep(ing)?|kept|still|not (switch|chang|mov)\w*|"
                     r"decided against|pass on|no thanks|nah|won't|isn't|is not|wrong|outdated|stale|old|"
                     r"incorrect|actually|remain\w*|no,)", re.IGNORECASE)
_DOCUMENT = re.compile(r"\b(doc(ument)?s?|wiki|tracker|dashboard|spreadsheet|sheet|page|config|cache[d]?|record|"
                       r"calendar|log|listing|file|readme|ticket|board|invite|note|entry|output|report|system)\b",
                       re.IGNORECASE)


def normalize(text: str) -> str:
    """Lower case, punctuation to spaces (keeping ':' '.' inside numbers such as 9:30 or 2.5), one space."""
    text = text.lower().replace("\u2019", "'")
    text = re.sub(r"(?<!\d)[.:](?!\d)|[^\w\s.:'/-]", " ", text)
    return re.sub(r"\s+", " ", text).strip()


def mentions(text: str, value: str) -> bool:
    """Whether ``value`` appears in ``text`` as whole words (``8080`` is not found in ``18080``)."""
    needle = normalize(value)
    if not needle:
        return False
    return re.search(rf"(?<![\w]){re.escape(needle)}(?![\w])", normalize(text)) is not None


def _first(turns: Sequence[Turn], value: str) -> int | None:
    return next((i for i, t in enumerate(turns) if mentions(t.content, value)), None)


def adopts(turn_text: str, value: str) -> bool:
    """A user turn states they adopted ``value`` (an adoption phrase right before it, not negated)."""
    low = normalize(turn_text)
    needle = normalize(value)
    for match in re.finditer(rf"(?<![\w]){re.escape(needle)}(?![\w])", low):
        before = low[max(0, match.start() - 60):match.start()]
        if _ADOPT.search(before) and not _NEGATION.search(before[-40:]):
            return True
    return False


def check_session(plan: SessionPlan, turns: Sequence[Turn], spec: LatentSpec) -> list[str]:
    """Every rule this session breaks (empty: it passes)."""
    problems: list[str] = []
    if not MIN_TURNS <= len(turns) <= MAX_TURNS:
        problems.append(f"the session has {len(turns)} turns; write {MIN_TURNS} to 4")
    if any(not t.content.strip() for t in turns):
        problems.append("a turn is empty")
    if not any(t.role == "user" for t in turns):
        problems.append("the user never speaks")
    text = "\n".join(t.content for t in turns)
    for value in plan.must:
        if not mentions(text, value):
            problems.append(f'"{value}" must appear word for word')
    for value in plan.forbid:
        if mentions(text, value):
            problems.append(f'"{value}" must not appear in this session')
    if not plan.distractors_ok:
        # A distractor the spec itself puts in this session's brief (e.g. a co-author's earlier
        # review date in a mention context) is planned there.
        for value in spec.distractor_values:
            if value not in plan.must and not mentions(plan.brief, value) and mentions(text, value):
                problems.append(f'"{value}" must not appear in this session')
    problems += _kind_rules(plan, turns, spec)
    return problems


def _kind_rules(plan: SessionPlan, turns: Sequence[Turn], spec: LatentSpec) -> list[str]:
    problems: list[str] = []
    user_turns = [t for t in turns if t.role == "user"]
    initial, new = spec.canonical_initial, spec.canonical_new
    if plan.kind == "encoding" and not any(mentions(t.content, initial) for t in user_turns):
        problems.append(f'the user (not only the assistant) must say "{initial}"')
    if plan.kind == "decoy_nonupdate":
        if any(adopts(t.content, plan.other) for t in user_turns):
            problems.append(f'the user must not switch to "{plan.other}": they decline it and keep "{plan.current}"')
        if not any(_REJECT.search(t.content) for t in user_turns):
            problems.append(f'the user must clearly decline "{plan.other}" and keep "{plan.current}"')
    if plan.kind == "confusable" and any(adopts(t.content, plan.other) for t in user_turns):
        problems.append(f'"{plan.other}" must belong to someone or something else, not become the user\'s own')
    if plan.kind == "stale_reference" and not _DOCUMENT.search(" ".join(t.content for t in turns)):
        problems.append(f'"{plan.other}" must be shown by an old document, tracker or record')
    if plan.kind == "perturbation":
        problems += _perturbation_rules(turns, spec)
    if plan.kind == "perturbation_p2" and not any(mentions(t.content, new) for t in user_turns):
        problems.append(f'the user must mention "{new}" as what they use now')
    return problems


def _perturbation_rules(turns: Sequence[Turn], spec: LatentSpec) -> list[str]:
    problems: list[str] = []
    initial, new, condition = spec.canonical_initial, spec.canonical_new, spec.condition
    user_turns = [t for t in turns if t.role == "user"]
    first_new, first_old = _first(turns, new), _first(turns, initial)
    if spec.expected_behavior == UPDATE:
        if turns and turns[0].role != "user":
            problems.append("the user must open this session")
        if not any(mentions(t.content, new) for t in user_turns):
            problems.append(f'the user must state the change to "{new}" themselves')
    else:
        if any(adopts(t.content, new) for t in user_turns):
            problems.append(f'the user must not adopt "{new}": it is not accepted, "{initial}" stays')
        if condition != "direct_weak" and not any(mentions(t.content, initial) for t in user_turns):
            problems.append(f'the user must reaffirm "{initial}"')
    if condition == "assistant_noise" and (not turns or turns[0].role != "assistant"
                                           or not mentions(turns[0].content, new)):
        problems.append(f'the assistant must speak first and wrongly state "{new}"')
    if condition in ("reactivated", "reactivated_weak") and (
            first_old is None or (first_new is not None and first_old > first_new)):
        problems.append(f'the user must first recall "{initial}" before "{new}" comes up')
    if condition in ("direct", "direct_weak") and first_old is not None and (first_new is None or first_old < first_new):
        problems.append(f'"{initial}" must not be recalled before "{new}" comes up')
    if condition == "stale_tool" and spec.domain == "agentic" and not any(
            t.role == "tool_output" and mentions(t.content, new) for t in turns):
        problems.append(f'a TOOL: line must show the stale value "{new}"')
    return problems
