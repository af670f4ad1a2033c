"""Protocol A's prompts under the ``embedded`` framing (:mod:`.framing`): the release's content,
laid out and calibrated for a small model on a CPU.

What each role sees is what :mod:`.prompts` gives it; the differences (named in
docs/protocol-a.md, "Framing for small models") are:

* order — everything fixed (rules, rubric, reply shape) comes before what varies per dimension or
  case, so the server's prefix cache serves a store, or a stage's instructions, once for all cases;
* the slot-filler's label rule says that a bare evaluative word names no trait, and that a cited
  note must show in the label (the release's rules only say "unknown" without evidence);
* the judge first writes down what trait the prediction states (``prediction_says``), and its rubric
  spells out that a prediction naming no trait, or a different one, shares no core meaning;
* the simulated user's request is a chat log the model continues with the user's next line:
  persona, bank and rules in the system prompt, the dialogue so far as a trailing assistant
  message the server continues, opening the user's line (:class:`SimulatorLog`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel, Field, ValidationError, model_validator

from memprobe_engine.llm.structured import describe_validation_error
from memprobe_engine.llm.types import ChatMessage
from memprobe_engine.recovery import prompts
from memprobe_engine.recovery.input_rules import Category
from memprobe_engine.recovery.inputs import BankEntry, SimUser
from memprobe_engine.recovery.prompts import Turn
from memprobe_engine.recovery.schemas import DisclosureVerdict, InRoleSimulatorReply, RubricScore, SimulatorReply
from memprobe_engine.recovery.simulator_voice import copied_run

# ----------------------------------------------------------------------------------- slot-fill

def question(dimension: str) -> str:
    """The dimension as the question the retrieve mode already asks (the release's probe query)."""
    return f"What best describes the user's {dimension.replace('_', ' ')}, as these notes show it?"


LABEL_RULES = (
    "The label states this person's own trait on the dimension as the notes show it — what they did, said, "
    "asked for, or struggled with — in words specific to them. A bare evaluative word (\"good\", \"helpful\", "
    "\"fine\", \"positive\") names no trait and is never a label. When a note you cite bears on the dimension, "
    "the label must say what it shows; \"unknown\" is only for when no note does. Never answer with the "
    "dimension's own name.\n"
    "Examples (another person): the note \"User: keep it short, three stops max\" on verbosity_preference gives "
    "\"wants short answers, three or four items at most\"; the note \"User: I did the fractions myself but the "
    "word problems lost me\" on mathematics_skill gives \"does fractions alone, gets lost in word problems\"."
)
SLOT_FILL_SHAPE = ('Reply with JSON only, in this shape: {"reason": "<the note(s) that show it, quoted briefly>", '
                   '"label": "<what they show about this person, at most 15 words, or unknown>"}')


def slot_fill_messages(dimension: str, category: Category, category_guide: str, memory_json: str) -> list[ChatMessage]:
    """The store, then every fixed rule and the reply shape, then the category and dimension."""
    body = (f"MEMORY NOTES (JSON array)\n{memory_json}\n\n{prompts.SLOT_FILL_RULES}\n{LABEL_RULES}\n\n"
            f"{SLOT_FILL_SHAPE}\n\nCATEGORY: {category.value}\nWHAT THE CATEGORY MEANS: {category_guide}\n"
            f"DIMENSION: {dimension}\n\nQUESTION: {question(dimension)}")
    return [ChatMessage(role="system", content=prompts.SLOT_FILL_SYSTEM), ChatMessage(role="user", content=body)]


# ----------------------------------------------------------------------------------- judge

JUDGE_CALIBRATION = (
    "First say in a few words which trait of the person the prediction states (prediction_says); write "
    "\"nothing specific\" when it states none. Then compare that trait with the true value:\n"
    "- a prediction that states nothing specific — a bare evaluation such as \"good\", \"helpful\", \"fine\" — "
    "shares no core meaning with any true value, however favourable the truth is: 0, or 0.25 at most;\n"
    "- a prediction about a different trait or aspect than the true value (another skill, a preference "
    "instead of an ability, a different event) is at most 0.25;\n"
    "- 0.75 and 1 need the same specific trait in both."
)
JUDGE_SHAPE = ('Reply with JSON only, in this shape: {"prediction_says": "<the trait it states, or nothing '
               'specific>", "reason": "<one sentence>", "score": <0, 0.25, 0.5, 0.75 or 1>}')


class StatedJudgeVerdict(BaseModel):
    """The judge's verdict under the embedded framing: what the prediction states, then the score."""

    prediction_says: str = Field(max_length=200)
    reason: str = Field(max_length=400)
    score: RubricScore


def judge_messages(target: BankEntry, predicted: str) -> list[ChatMessage]:
    """Rubric, calibration and reply shape first (one prefix for every case), then the case."""
    system = f"{prompts.JUDGE_SYSTEM}\n\n{JUDGE_CALIBRATION}\n\n{JUDGE_SHAPE}"
    body = (f"DIMENSION: {target.dimension}\nWHAT THE DIMENSION ASKS ABOUT: {target.explanation}\n"
            f"TRUE VALUE: {target.short}\nPREDICTION: {predicted}")
    return [ChatMessage(role="system", content=system), ChatMessage(role="user", content=body)]


# ----------------------------------------------------------------------------------- attribution

STAGE0_QUESTION = (
    "Could the task below plausibly lead, through reasonable follow-up questions and natural elaboration, to a "
    "moment where the user reveals their value on the target dimension? Reply with JSON only, in this shape: "
    '{"reason": "<one sentence>", "can_invite": <true or false>}'
)
STAGE1_QUESTION = (
    "The episode below is a multi-turn help dialogue between an Agent and a User simulator playing a fixed "
    "persona. Did the User (or the Agent quoting the user) reveal enough about the target dimension that a "
    "competent memory system could plausibly arrive at the user's value?\n"
    "- The literal wording of the true value need not appear.\n"
    "- Indirect signals count: behavioural hints, mentions in context, preferences voiced in passing, what "
    "follows from what the user said.\n"
    "- If a reasonable reader of the dialogue would conclude something close to the true value, even loosely "
    "worded, the answer is true.\n"
    "- Answer false only when the dialogue offers essentially nothing a reader could anchor on.\n"
    "- The evidence is the User's own words, copied exactly from the episode (one sentence or part of one); a "
    "true value, a task statement or an Agent's suggestion is no evidence. With no such words, answer false.\n"
    'Reply with JSON only, in this shape: {"evidence": "<the User\'s words, copied exactly, or none>", '
    '"reason": "<one sentence>", "disclosed": <true or false>}'
)
STAGE2_QUESTION = (
    "Pick exactly one:\n"
    "agent_elicitation_failure — the agent never came near this dimension: the conversation stayed on other "
    "ground and the agent did not even roughly steer toward the dimension's topic.\n"
    "simulator_too_strict — the agent did roughly steer toward the topic (a pinpoint question is not needed), "
    "but the user did not disclose enough: shallow or noncommittal answers, a change of direction, satisfied "
    "too early, or no elaboration while the topic was open.\n"
    "Rule of thumb: \"the topic came up, the user just said little\" is simulator_too_strict; \"the agent never "
    "raised anything like it\" is agent_elicitation_failure.\n"
    'Reply with JSON only, in this shape: {"reason": "<one sentence>", "evidence": "<short quote>", '
    '"label": "<agent_elicitation_failure or simulator_too_strict>"}'
)


def _stage(system: str, question: str, case: str) -> list[ChatMessage]:
    return [ChatMessage(role="system", content=f"{system}\n\n{question}"), ChatMessage(role="user", content=case)]


def task_design_messages(task: str, target: BankEntry) -> list[ChatMessage]:
    return _stage(prompts.STAGE0_SYSTEM, STAGE0_QUESTION, f"{prompts.target_lines(target)}\n\nTASK\n{task}")


def disclosure_messages(task_text: str, history: Sequence[Turn], target: BankEntry) -> list[ChatMessage]:
    """The target first and the episode last, so the words to quote are the ones nearest the answer
    (with the episode first, the 1.5B quoted the true value as its evidence)."""
    return _stage(prompts.STAGE1_SYSTEM, STAGE1_QUESTION,
                  f"{prompts.target_lines(target)}\n\nEPISODE\n=====\n"
                  f"{prompts.episode_transcript(task_text, history)}\n=====\n\n"
                  f"Copy the evidence from the User's lines above.")


#: A quoted piece shorter than this many words proves nothing ("I know", "the roads").
QUOTE_MIN_WORDS = 4
_LABEL = re.compile(r"^\s*(?:the\s+)?(?:user|agent|assistant)\s*(?:says|said|wrote)?\s*:?\s*", re.IGNORECASE)


def _words(text: str) -> str:
    return " ".join(re.findall(r"[\w']+", text.lower().replace("’", "'")))


def quoted_from(evidence: str, lines: Sequence[str]) -> bool:
    """Whether ``evidence`` holds a piece of at least :data:`QUOTE_MIN_WORDS` words that one of
    ``lines`` says word for word (case, punctuation and spacing aside). The evidence is cut at quote
    marks, ellipses and line breaks, and a leading speaker label is dropped."""
    said = [f" {_words(line)} " for line in lines]
    for piece in re.split(r"[\"“”\n]|\.\.\.|…", evidence):
        words = _words(_LABEL.sub("", piece))
        if len(words.split()) >= QUOTE_MIN_WORDS and any(f" {words} " in line for line in said):
            return True
    return False


def quoted_disclosure(history: Sequence[Turn]) -> type[DisclosureVerdict]:
    """Stage 1's reply schema under this framing: a "disclosed" verdict must quote the user. Its
    evidence has to be the User's own words from this episode (:func:`quoted_from`); otherwise the
    reply is invalid and goes through the client's repair rounds, then the exclusion policy (the
    release's default: not disclosed). The 1.5B said "disclosed" on every live quick task while
    citing the true value's own text ("a detailed map of the Miami Valley in her head")."""
    user_lines = [text for speaker, text in history[1:] if speaker == "user"]

    class QuotedDisclosure(DisclosureVerdict):
        @model_validator(mode="after")
        def _quotes_the_user(self) -> QuotedDisclosure:
            if self.disclosed and not quoted_from(self.evidence, user_lines):
                raise ValueError("a disclosed verdict's evidence must be the User's own words copied exactly from "
                                 "the episode (at least four words in a row); copy them, or answer disclosed false")
            return self

    return QuotedDisclosure


def elicitation_messages(task_text: str, history: Sequence[Turn], target: BankEntry) -> list[ChatMessage]:
    return _stage(prompts.STAGE2_SYSTEM, STAGE2_QUESTION,
                  f"EPISODE\n=====\n{prompts.episode_transcript(task_text, history)}\n=====\n\n"
                  f"{prompts.target_lines(target)}")


# ----------------------------------------------------------------------------------- simulator

#: The release's simulator rules without their closing reply shape (a JSON object): under this
#: framing the reply is the next line of a chat log, its reaction label in brackets after the name.
SIMULATOR_RULES = prompts.SIMULATOR_SYSTEM.rsplit("\n\nReply with one JSON object", 1)[0]
ASSISTANT_SPEAKER = "ASSISTANT"


def speaker_name(user: SimUser) -> str:
    """How the user's lines are labelled in the log: the first name in capitals (``USER`` when the
    profile's name is only the user's id, as in the paper's users)."""
    name = user.profile.name.split()[0] if user.profile.name.split() else ""
    return name.upper() if name and name != user.user_id else "USER"


#: A user line sharing a run of this many words with the assistant's message repeats it (a user may
#: name a place or a phrase from it; ten words in a row is the assistant's text: "Managing a trauma can
#: be challenging, but it's important to stay calm and focused…" on the live quick job).
LINE_COPY_RUN_WORDS = 10
#: The release's seven reaction types with their meanings (its rules' section 2).
REACTION_TYPES = prompts.SIMULATOR_SYSTEM.split("2. NAME YOUR REACTION with exactly one feedback_type:\n", 1)[1] \
    .split("\n\n3.", 1)[0]
#: The release's bar for ``satisfied`` (its rules' section 4).
SATISFIED_BAR = "4. " + prompts.SIMULATOR_SYSTEM.split("\n\n4. ", 1)[1].split("\n\nReply with one JSON", 1)[0]
#: The pick's answer when nothing of the focus fits the moment.
NOTHING = "nothing"


@dataclass(frozen=True)
class FocusPick:
    """The memory the assistant's message brings to the user's mind, how the user reacts, and the
    first words of the user's line, which bring the memory up (:func:`focus_choice_messages`)."""

    entry: BankEntry
    feedback_type: str
    opening: str


@dataclass(frozen=True)
class SimulatorLog:
    """The simulated user's request as a chat log the model itself is writing: the dialogue so far is
    a trailing assistant message (the server continues it) that ends where the user's next line
    opens, ``NAME (`` — the model writes the reaction label, ``): `` and what the user says. After a
    focus pick the log ends further on, ``NAME (label): opening``, and the model finishes the line.
    A small model asked in a chat for the user's reply answers as the assistant about half the time;
    writing the log, it stays the user (bench/simulator_voice.py)."""

    messages: list[ChatMessage]
    speaker: str
    pick: FocusPick | None = None
    #: The assistant's message the line answers (a line that repeats it is the assistant's part).
    latest: str = ""

    @property
    def prefill(self) -> str:
        return self.messages[-1].content

    @property
    def stop(self) -> tuple[str, ...]:
        """Where the user's line ends: the next speaker's label."""
        return (f"\n{ASSISTANT_SPEAKER}:", f"\n{self.speaker} (", f"\n{self.speaker}:")

    def _line(self, response_text: str) -> tuple[str, bool, str]:
        """(label, whether the label's bracket closed, what the user says) of the continued line."""
        # llama.cpp returns the prefilled message with its continuation; other servers only the latter.
        line = response_text[len(self.prefill):] if response_text.startswith(self.prefill) else response_text
        if self.pick is not None:
            return self.pick.feedback_type, True, f"{self.pick.opening} {line.strip()}".strip()
        label, closed, said = line.partition(")")
        return label.strip(), bool(closed), said.strip().removeprefix(":").strip()

    def said(self, response_text: str) -> str:
        """What the user's line says, whatever its label (the release's fallback for an unusable reply)."""
        return self._line(response_text)[2]

    def reply(self, response_text: str) -> SimulatorReply:
        """The user's line as a simulator reply; ValueError with the reason when it is not usable
        (no reaction label, no text, or a text that speaks as the assistant)."""
        label, closed, said = self._line(response_text)
        if not closed:
            raise ValueError(f"the line has no reaction label in brackets (it reads {label[:60]!r})")
        if (run := copied_run(said, self.latest, LINE_COPY_RUN_WORDS)) is not None:
            raise ValueError(f"the line repeats the assistant's message ({run!r})")
        try:
            return InRoleSimulatorReply.model_validate({"feedback_type": label, "text": said})
        except ValidationError as err:
            raise ValueError(describe_validation_error(err)) from None


FOCUS_CHOICE_SYSTEM = ("You decide what a message brings to one person's mind, from a short list of their memories, "
                       "and how they start their answer.")


def focus_choice_schema(focus: Sequence[BankEntry]) -> dict[str, object]:
    """The pick's reply: a reason, one of the focus entries' dimension names or ``nothing`` (an enum the
    server enforces: asked for a number with 0 for none, the 1.5B reasoned its way to an entry and
    then wrote 0), the reaction type, and the first words of the user's answer."""
    return {"type": "object", "additionalProperties": False,
            "required": ["reason", "memory", "feedback_type", "opening"],
            "properties": {"reason": {"type": "string", "maxLength": 300},
                           "memory": {"type": "string", "enum": [*(entry.dimension for entry in focus), NOTHING]},
                           "feedback_type": {"type": "string", "enum": list(prompts.FEEDBACK_TYPES)},
                           "opening": {"type": "string", "maxLength": 240}}}


def focus_choice_messages(user: SimUser, task_text: str, history: Sequence[Turn],
                          focus: Sequence[BankEntry]) -> list[ChatMessage]:
    """The pick among the focus entries (:mod:`.simulator_focus`): the request, the assistant's last
    message, the entries; ``nothing`` when none fits."""
    who = speaker_name(user)
    latest = next((text for speaker, text in reversed(history) if speaker == "assistant"), "")
    # The explanation without the short value: shown "Knows Dayton-area roads, shortcuts and hospitals by
    # heart", the 1.5B's opening was that phrase word for word (the judge's true value).
    entries = "\n".join(f"- {entry.dimension}: {entry.explanation}" for entry in focus)
    body = (f"{who} asked an AI assistant: {task_text}\n\nThe assistant answered:\n{latest}\n\n"
            f"From {who}'s memories:\n{entries}\n\n"
            f"memory: which one does the assistant's answer bring to {who}'s mind, so that {who} brings it up in "
            f"the reply (a fact {who} knows better, a wish about how answers are given, something that happened "
            f"to {who})? \"{NOTHING}\" when none fits.\n"
            f"feedback_type: how {who} reacts to the answer, one of:\n{REACTION_TYPES}\n{SATISFIED_BAR}\n"
            f"opening: the first sentence {who} types back, in the first person and {who}'s own casual words, "
            f"bringing that memory up (not copying it); empty when the memory is {NOTHING}.\n"
            f'Reply with JSON only, in this shape: {{"reason": "<one sentence>", "memory": "<the memory\'s name '
            f'before the colon, or {NOTHING}>", "feedback_type": "<one of the seven>", "opening": "<sentence>"}}')
    return [ChatMessage(role="system", content=FOCUS_CHOICE_SYSTEM), ChatMessage(role="user", content=body)]


#: A line that carries the person's bank, shown on another person (a small model copies the shape of
#: an example, not a rule): a fact they know better, a memory of their own.
DRAWING_ON_THE_BANK = (
    "Example from another person's log (MIKE; his bank says he knows Chicago's trains by heart and lost "
    "his father in 2015):\n"
    "ASSISTANT: You could take a taxi from O'Hare to your hotel.\n"
    "MIKE (correction): A taxi? The Blue Line gets me downtown in forty minutes for five bucks, I've ridden it "
    "twenty years.\n"
    "ASSISTANT: Here is a sympathy card you could send: \"With deepest condolences on your loss...\"\n"
    "MIKE (add_context): Too stiff. When my dad died in 2015 the cards that helped were the ones that "
    "remembered something about him."
)


def simulator_log(user: SimUser, task_text: str, history: Sequence[Turn],
                  pick: FocusPick | None = None) -> SimulatorLog:
    """The release simulator's content — rules, profile and bank, the opening request, the dialogue,
    the reminder not to repeat itself — as a log the model continues with the user's next line; after
    a focus pick (:mod:`.simulator_focus`) the line is opened with the pick's label and first words."""
    who = speaker_name(user)
    system = (f"{SIMULATOR_RULES}\n\nYOUR PROFILE AND MEMORY BANK\n{prompts.persona_block(user)}\n\n"
              f"You write the chat log of this person ({who}) getting help from an AI assistant "
              f"({ASSISTANT_SPEAKER}). Each new line of {who} starts with the reaction label, one of the seven "
              f"types above, like \"{who} (followup): ...\", and says what {who} would, carrying who {who} is."
              f"\n\n{DRAWING_ON_THE_BANK}")
    body = list(history[1:]) if history and history[0][0] == "user" else list(history)
    lines = [f"{who}: {task_text}"]
    lines += [f"{ASSISTANT_SPEAKER if speaker == 'assistant' else who}: {text}" for speaker, text in body]
    earlier = [text for speaker, text in body[:-1] if speaker == "user"]
    repeat = f" Do not reuse the opening or sentence shape of {who}'s earlier lines." if earlier else ""
    opens = f"{who} (" if pick is None else f"{who} ({pick.feedback_type}): {pick.opening}"
    latest = next((text for speaker, text in reversed(body) if speaker == "assistant"), "")
    return SimulatorLog(messages=[
        ChatMessage(role="system", content=system),
        ChatMessage(role="user", content=f"Continue the chat log with {who}'s next line only.{repeat}"),
        ChatMessage(role="assistant", content="\n\n".join(lines) + f"\n\n{opens}")], speaker=who, pick=pick,
        latest=latest)


def simulator_messages(user: SimUser, task_text: str, history: Sequence[Turn]) -> list[ChatMessage]:
    """The messages of :func:`simulator_log`'s request (what a cost estimate prices)."""
    return simulator_log(user, task_text, history).messages
