"""Rule checks on one realized session (the paper's App. E.1 rule-based validation, per session).

A session passes when: every value its plan requires appears (verbatim up to case, spacing and
punctuation); no value it forbids appears — in particular the new value never shows up before the
perturbation except where the filler plan puts it (confusable / decoy sessions); the spec's
distractor values appear only where planned (near-miss sessions); a decoy or confusable
filler never presents the other value as the user's own (neither the user adopting it nor the
assistant attributing it to them), a confusable says whose the value is, a decoy has the user keep
their value, and a rejected perturbation never has the user adopt the new one; no turn narrates the
instructions instead of speaking; speaker structure follows the
condition (an assistant-noise perturbation opens with the assistant; a user-driven update is stated
by the user; a stale-tool perturbation shows the stale value in a tool output in agentic domains);
and reactivation order holds (reactivated: the old value is recalled before the new one appears).

Problems are returned as short sentences; the realizer shows them to the model when it asks again.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from memprobe_engine.paradigms.realize.plan import UPDATE, SessionPlan
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
_KEEP = re.compile(r"\b(stick(ing)? with|stay(ing)? (with|on|at)|keep(ing)?|kept|still|remain\w*|not (switch|chang|mov)\w*|"
                   r"decided against|pass on|declin\w*|no thanks)\b", re.IGNORECASE)
#: Someone or something other than the user, to whom a value can belong.
_THIRD_PARTY = re.compile(r"\b(friends?|colleagues?|co ?workers?|teammates?|neighbou?rs?|sister|brother|mom|mum|dad|"
                          r"mother|father|partner|wife|husband|cousin|roommate|boss|manager|client|customer|"
                          r"someone|somebody|people|they|their|them|he|his|him|she|her|themselves|article|review|"
                          r"blog|post|podcast|video|another|other|different|else)\b",
                          re.IGNORECASE)
_FIRST_PERSON = re.compile(r"\b(i|i'm|i've|i'd|me|my|we|we're|we've|us|our)\b", re.IGNORECASE)
#: Just before a value in a user turn: it is theirs.
_OWN_USER = re.compile(r"(\b(my|our)( \S+){0,2}|\bgot (a |an )?(new )?|\bi (have|own|use) (a |an |the )?)\s*$",
                       re.IGNORECASE)
#: Before a value in an assistant turn: it is the user's.
_OWN_ASSISTANT = re.compile(r"\b(your|you're|you are|you've|you have|you use|you now)\b", re.IGNORECASE)
#: The model narrating its instructions instead of writing the dialogue.
_NARRATION = re.compile(r"\bthe user('s)? (\w+ ){0,2}(says|said|asks|mentions|does|doesn't|investigates|notices|"
                        r"corrects|confirms|recalls|declines|keeps|relays|points|friend|own)\b|tool_output|\[tool|"
                        r"word for word|do not mention", re.IGNORECASE)
#: Right before a value: the sentence states it as what something is.
_ASSERTS = re.compile(r"\b(is|are|was|will be|stays|remains|be)\s+(\S+\s+){0,2}$", re.IGNORECASE)
#: Example lines a prompt offers for the model to reuse (not instructions it may not copy): the
#: marked examples, the lines of the reply's shape (a prompt line that starts with a speaker; the
#: layout of the suite's sessions 3–4) and the quoted opening words (``realize_prompts.LEAD_MARK``).
_EXAMPLE = re.compile(r"(For example:|The USER line could read:|Begin your reply with exactly:)[^\n]*|"
                      r"^(USER|ASSISTANT|TOOL): [^\n]*|line opens with \"[^\"\n]*\"", re.MULTILINE)
#: A turn sharing this many consecutive words with the prompt copied the instructions.
COPY_WORDS = 8
#: A turn sharing this many consecutive words with one outline turn description ("Turn 1 (USER)
#: says … is no longer current and why, calling the replacement only …") restated the stage
#: direction, whatever its vocabulary: the split episodes of the first suites had their P1 user turn
#: written that way, and no instruction word was in the run.
OUTLINE_COPY_WORDS = 10
#: An outline line of a prompt: the turn's description, without its "For example" line.
_OUTLINE_TURN = re.compile(r"^Turn \d+ \((?:USER|ASSISTANT|TOOL)\) (.*?)(?: For example:.*)?$", re.MULTILINE)
#: A run of this many words said three times in one turn is a generation loop (see :func:`loops`).
LOOP_WORDS = 6
#: The vocabulary of the instructions (third-person stage directions), not of a dialogue.
_INSTRUCTION_WORDS = frozenset({"user", "user's", "assistant", "assistant's", "turn", "turns", "says", "mentions",
                                "recalls", "asks", "acknowledges", "confirms", "agrees", "notes", "corrects",
                                "apologizes", "declines", "plan", "wording", "quoted", "line", "benchmark", "writer",
                                "tool", "talks", "named", "passing"})
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|\n+")
_DOCUMENT = re.compile(r"\b(doc(ument)?s?|wiki|tracker|dashboard|spreadsheet|sheet|page|config|cache[d]?|record|"
                       r"calendar|log|listing|file|readme|ticket|board|invite|note|entry|output|report|system)\b",
                       re.IGNORECASE)


def normalize(text: str) -> str:
    """Lower case, punctuation to spaces (keeping ':' '.' inside numbers such as 9:30 or 2.5), one space."""
    text = text.lower().replace("\u2019", "'")
    text = re.sub(r"(?<!\d)[.:](?!\d)|[^\w\s.:'/-]", " ", text)
    return re.sub(r"\s+", " ", text).strip()


def mentions(text: str, value: str, others: Sequence[str] = ()) -> bool:
    """Whether ``value`` appears in ``text`` as whole words (``8080`` is not found in ``18080``);
    an occurrence inside one of ``others`` (the spec's other values) is that value, not this one
    (``weekly`` is not named by ``bi-weekly``)."""
    needle = normalize(value)
    if not needle:
        return False
    return re.search(rf"(?<![\w]){re.escape(needle)}(?![\w])", _hide(normalize(text), needle, others)) is not None


def _hide(normalized: str, needle: str, others: Sequence[str]) -> str:
    """``normalized`` with every occurrence of a longer value that contains ``needle`` blanked out."""
    for other in others:
        longer = normalize(other)
        if longer != needle and needle in longer:
            normalized = normalized.replace(longer, " " * len(longer))
    return normalized


def _first(turns: Sequence[Turn], value: str, others: Sequence[str] = ()) -> int | None:
    return next((i for i, t in enumerate(turns) if mentions(t.content, value, others)), None)


def _sentences(text: str) -> list[tuple[str, str]]:
    """Sentences of a turn as (raw, normalized) (a value's clause is the text before it in its sentence)."""
    return [(part.strip(), normalize(part)) for part in _SENTENCE_END.split(text) if part.strip()]


def _clauses_before(text: str, value: str, others: Sequence[str] = ()) -> list[tuple[str, str]]:
    """(the normalized text before each occurrence of ``value`` in its sentence, that raw sentence);
    occurrences inside a longer value of ``others`` are skipped (see :func:`mentions`)."""
    needle = normalize(value)
    found: list[tuple[str, str]] = []
    if not needle:
        return found
    for raw, sentence in _sentences(text):
        hidden = _hide(sentence, needle, others)
        for match in re.finditer(rf"(?<![\w]){re.escape(needle)}(?![\w])", hidden):
            found.append((sentence[max(0, match.start() - 80):match.start()], raw))
    return found


def _someone_else(before: str) -> bool:
    """The clause's last subject is someone or something other than the user (``Jamie said they
    joined X``, ``my colleague raves about X``): what follows is about them, not the user."""
    other = [m.end() for m in _THIRD_PARTY.finditer(before)]
    own = [m.end() for m in _FIRST_PERSON.finditer(before)]
    return bool(other) and (not own or max(other) > max(own))


def adopts(turn_text: str, value: str, others: Sequence[str] = ()) -> bool:
    """A user turn states they adopted ``value`` (an adoption phrase right before it, not negated,
    and not said of someone else)."""
    for before, _sentence in _clauses_before(turn_text, value, others):
        if _ADOPT.search(before[-60:]) and not _NEGATION.search(before[-40:]) and not _someone_else(before):
            return True
    return False


def claims_own(turn: Turn, value: str, others: Sequence[str] = ()) -> bool:
    """The turn presents ``value`` as the user's own: the user adopts it or calls it theirs (``my new
    X``, ``I just got a new X``); the assistant attributes it to the user (``your X``, ``the service
    you're setting up is X``) outside a question. Said of a third party, it is not the user's."""
    for before, sentence in _clauses_before(turn.content, value, others):
        if _NEGATION.search(before[-40:]) or _someone_else(before):
            continue
        if turn.role == "user" and (_ADOPT.search(before[-60:]) or _OWN_USER.search(before[-40:])):
            return True
        if turn.role == "assistant" and _OWN_ASSISTANT.search(before) and not sentence.rstrip().endswith("?"):
            return True
    return False


def attributed_elsewhere(turns: Sequence[Turn], value: str, others: Sequence[str] = ()) -> bool:
    """Some sentence naming ``value`` also names who or what it belongs to (a friend, an article,
    another project…), as a confusable session must."""
    return any(_THIRD_PARTY.search(sentence) for t in turns
               for _b, sentence in _clauses_before(t.content, value, others))


def keeps(turns: Sequence[Turn], value: str, others: Sequence[str] = ()) -> bool:
    """A user sentence (not a question) names ``value`` with a keep phrase (sticking with / still…)."""
    return any(t.role == "user" and _KEEP.search(sentence) and not sentence.rstrip().endswith("?")
               for t in turns for _b, sentence in _clauses_before(t.content, value, others))


def asserts_value(turn: Turn, value: str, others: Sequence[str] = ()) -> bool:
    """An assistant sentence (not a question) states ``value`` as what the fact is (``… is April
    15``), without a negation or someone else as its subject."""
    if turn.role != "assistant":
        return False
    return any(_ASSERTS.search(before[-30:]) and not _NEGATION.search(before[-40:]) and not _someone_else(before)
               and not sentence.rstrip().endswith("?")
               for before, sentence in _clauses_before(turn.content, value, others))


def copies_prompt(turns: Sequence[Turn], prompt: str) -> bool:
    """A turn repeats ``COPY_WORDS`` consecutive words of the prompt's instructions (its example
    lines aside) — a run that includes a word of the instructions' own vocabulary ("says",
    "assistant", "turn"…) — or ``OUTLINE_COPY_WORDS`` consecutive words of one outline turn
    description, whatever its words. A first-person line that merely matches what the plan asks for ("that
    output is stale, it is still 5432") is the plan followed, not copied."""
    words = normalize(_EXAMPLE.sub(" ", prompt)).split()
    grams = {gram for gram in _runs(words, COPY_WORDS) if _INSTRUCTION_WORDS.intersection(gram)}
    # A run the prompt's example lines also hold (the lead "My timeout setting has changed from 30
    # seconds to 60 seconds") is the plan followed in the user's words, not a stage direction.
    offered = set(_runs(normalize(" ".join(m.group(0) for m in _EXAMPLE.finditer(prompt))).split(),
                        OUTLINE_COPY_WORDS))
    outline = {gram for what in _OUTLINE_TURN.findall(prompt)
               for gram in _runs(normalize(what).split(), OUTLINE_COPY_WORDS)} - offered
    for turn in turns:
        said = normalize(turn.content).split()
        if any(gram in grams for gram in _runs(said, COPY_WORDS)):
            return True
        if any(gram in outline for gram in _runs(said, OUTLINE_COPY_WORDS)):
            return True
    return False


def _runs(words: Sequence[str], size: int) -> Iterator[tuple[str, ...]]:
    """Every run of ``size`` consecutive words."""
    return (tuple(words[i:i + size]) for i in range(len(words) - size + 1))


def loops(text: str) -> bool:
    """The same ``LOOP_WORDS`` consecutive words three times in one turn: the small model's
    generation loop (PILOT-10A's P1 in session 5: "The new place or climbing gym, the new place or
    climbing gym, …" up to the token cap)."""
    seen: dict[tuple[str, ...], int] = {}
    for gram in _runs(normalize(text).split(), LOOP_WORDS):
        seen[gram] = seen.get(gram, 0) + 1
        if seen[gram] == 3:
            return True
    return False


def narrates(turns: Sequence[Turn]) -> bool:
    """A turn repeats the instructions instead of speaking (``The user says…``, ``[TOOL_OUTPUT]``)."""
    return any(_NARRATION.search(t.content) for t in turns)


def spec_values(spec: LatentSpec) -> tuple[str, ...]:
    """Every value of the spec (initial, new, distractors): a value found only inside a longer one of
    these is not a mention of it."""
    return (spec.canonical_initial, spec.canonical_new, *spec.distractor_values)


def check_session(plan: SessionPlan, turns: Sequence[Turn], spec: LatentSpec,
                  prompt: str | None = None) -> list[str]:
    """Every rule this session breaks (empty: it passes); ``prompt`` (the request that wrote it)
    lets the rules see a turn that copied the instructions."""
    problems: list[str] = []
    # The spec's own wording (mention context, wording hint) may be echoed in the first person;
    # the instructions around it may not.
    if prompt is not None and copies_prompt(turns, prompt.replace(plan.brief, " ") if plan.brief else prompt):
        problems.append("a turn copies the instructions word for word; write what the people say instead")
    if spec.domain != "agentic" and any(t.role == "tool_output" for t in turns):
        problems.append("no TOOL: lines in this chat (only the user and the assistant speak)")
    if not MIN_TURNS <= len(turns) <= MAX_TURNS:
        problems.append(f"the session has {len(turns)} turns; write {MIN_TURNS} to 4")
    if any(not re.search(r"\w", t.content) for t in turns):
        problems.append('a turn is empty or only "...": write the words that person actually says')
    if not any(t.role == "user" for t in turns):
        problems.append("the user never speaks")
    if any(loops(t.content) for t in turns):
        problems.append("a turn says the same words over and over: say each thing once")
    text = "\n".join(t.content for t in turns)
    vals = spec_values(spec)
    for value in plan.must:
        if not mentions(text, value, vals):
            problems.append(f'"{value}" must appear word for word')
    for value in plan.forbid:
        if mentions(text, value, vals):
            problems.append(f'"{value}" must not appear in this session')
    if not plan.distractors_ok:
        # A distractor the spec itself puts in this session's brief (e.g. a co-author's earlier
        # review date in a mention context) is planned there.
        for value in spec.distractor_values:
            if value not in plan.must and not mentions(plan.brief, value) and mentions(text, value, vals):
                problems.append(f'"{value}" must not appear in this session')
    problems += _kind_rules(plan, turns, spec)
    return problems


def _kind_rules(plan: SessionPlan, turns: Sequence[Turn], spec: LatentSpec) -> list[str]:
    problems: list[str] = []
    vals = spec_values(spec)
    user_turns = [t for t in turns if t.role == "user"]
    initial, new = spec.canonical_initial, spec.canonical_new
    if plan.kind == "encoding" and not any(mentions(t.content, initial, vals) for t in user_turns):
        problems.append(f'the user (not only the assistant) must say "{initial}"')
    if narrates(turns):
        problems.append("write what the people say; do not repeat the instructions (no \"the user says\", "
                        "no [TOOL_OUTPUT])")
    # Decoy and confusable fillers must never imply that the user's value changed (App. E.1).
    if plan.kind in ("decoy_nonupdate", "confusable") and any(asserts_value(t, plan.other, vals) for t in turns):
        problems.append(f'the assistant must not state "{plan.other}" as the value; it is not the user\'s')
    if plan.kind == "decoy_nonupdate":
        if any(claims_own(t, plan.other, vals) for t in turns):
            problems.append(f'the user must not switch to "{plan.other}": they decline it and keep "{plan.current}"')
        if not keeps(turns, plan.current, vals):
            problems.append(f'the user must clearly decline "{plan.other}" and say they keep "{plan.current}"')
    if plan.kind == "confusable":
        if any(claims_own(t, plan.other, vals) for t in turns):
            problems.append(f'"{plan.other}" must belong to someone or something else, not become the user\'s own')
        elif not attributed_elsewhere(turns, plan.other, vals):
            problems.append(f'say whose "{plan.other}" it is (a friend\'s, an article\'s, another project\'s)')
    if plan.kind == "stale_reference" and not _DOCUMENT.search(" ".join(t.content for t in turns)):
        problems.append(f'"{plan.other}" must be shown by an old document, tracker or record')
    if plan.kind == "perturbation":
        problems += _perturbation_rules(turns, spec)
    if plan.kind == "perturbation_p2" and not any(mentions(t.content, new, vals) for t in user_turns):
        problems.append(f'the user must mention "{new}" as what they use now')
    return problems


def _perturbation_rules(turns: Sequence[Turn], spec: LatentSpec) -> list[str]:
    problems: list[str] = []
    vals = spec_values(spec)
    initial, new, condition = spec.canonical_initial, spec.canonical_new, spec.condition
    user_turns = [t for t in turns if t.role == "user"]
    first_new, first_old = _first(turns, new, vals), _first(turns, initial, vals)
    if spec.expected_behavior == UPDATE:
        if turns and turns[0].role != "user":
            problems.append("the user must open this session")
        if not any(mentions(t.content, new, vals) for t in user_turns):
            problems.append(f'the user must state the change to "{new}" themselves')
    else:
        if any(adopts(t.content, new, vals) for t in user_turns):
            problems.append(f'the user must not adopt "{new}": it is not accepted, "{initial}" stays')
        # The value that stays must be kept in a user statement ("it is still X"), not merely named
        # or asked about: otherwise the session can read as the rumour winning.
        if not keeps(turns, initial, vals):
            problems.append(f'the user must reaffirm "{initial}" in a statement (e.g. "it is still {initial}")')
    if condition == "assistant_noise" and (not turns or turns[0].role != "assistant"
                                           or not mentions(turns[0].content, new, vals)):
        problems.append(f'the assistant must speak first and wrongly state "{new}"')
    if condition in ("reactivated", "reactivated_weak") and (
            first_old is None or (first_new is not None and first_old > first_new)):
        problems.append(f'the user must first recall "{initial}" before "{new}" comes up')
    if condition in ("direct", "direct_weak") and first_old is not None and (first_new is None or first_old < first_new):
        problems.append(f'"{initial}" must not be recalled before "{new}" comes up')
    if condition == "stale_tool" and spec.domain == "agentic" and not any(
            t.role == "tool_output" and mentions(t.content, new, vals) for t in turns):
        problems.append(f'a TOOL: line must show the stale value "{new}"')
    return problems
