"""A scripted chat backend for protocol-A functional tests (tests only, never product code).

It recognises each role by its prompt and answers with valid JSON. The verdicts for each
dimension follow ``PLAN`` so that one small run reaches every attribution label; dimensions not in
the plan recover fully. It counts requests so resume tests can assert none is repeated.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import AsyncIterator

import orjson

from memprobe_engine.llm.types import ChatRequest, ChatResult, Usage

# dimension -> (judge score, stage-0 can_invite, stage-1 disclosed, stage-2 label)
PLAN: dict[str, tuple[float, bool, bool, str]] = {}


def plan_for(dimensions: list[str]) -> None:
    """Assign the five outcomes to the first five dimensions, in order."""
    outcomes = [(1.0, True, True, "agent_elicitation_failure"),        # ok
                (0.25, False, False, "agent_elicitation_failure"),     # task_design_failure
                (0.5, True, True, "agent_elicitation_failure"),        # memory_failure
                (0.0, True, False, "agent_elicitation_failure"),       # agent_elicitation_failure
                (0.25, True, False, "simulator_too_strict")]           # simulator_too_strict
    PLAN.clear()
    PLAN.update(dict(zip(dimensions, outcomes)))


def _dimension(text: str) -> str:
    match = re.search(r"^(?:TARGET )?DIMENSION: (\w+)$", text, flags=re.M)
    return match.group(1) if match else ""


class RecoveryOracle:
    """ChatBackend double; ``delay_s`` simulates a slow model."""

    name = "scripted"

    def __init__(self, delay_s: float = 0.0) -> None:
        self.requests: list[ChatRequest] = []
        self.by_role: Counter[str] = Counter()
        self.delay_s = delay_s

    def answer(self, request: ChatRequest) -> tuple[str, str]:
        system = request.messages[0].content if request.messages[0].role == "system" else ""
        last = request.messages[-1].content
        if system.startswith("You are a personalised AI assistant"):
            return "agent", "Here is a practical plan. What time of day do you usually have free?"
        if system.startswith("You play one particular real person"):
            in_log = request.messages[-1].role == "assistant"  # the embedded framing's chat log
            turn = re.search(r"^TURN (\d+): THE ASSISTANT JUST SAID$", last, flags=re.M)
            done = last.count("\n\nASSISTANT: ") >= 2 if in_log else turn is not None and int(turn.group(1)) >= 2
            text = ("Good, that works for me." if done else
                    "I usually do this after my night shift, and I like short checklists.")
            feedback = "satisfied" if done else "followup"
            if in_log:  # llama.cpp answers with the prefilled message and its continuation
                return "simulator", f"{last}{feedback}): {text}"
            return "simulator", orjson.dumps({"feedback_type": feedback, "text": text}).decode()
        if system.startswith("You decide what a message brings"):  # the embedded framing's focus pick
            return "focus_choice", orjson.dumps({"reason": "nothing fits", "memory": "nothing",
                                                 "feedback_type": "followup", "opening": ""}).decode()
        if system.startswith("You judge how well one reply"):
            dims = re.findall(r"^\d+\. \[(\w+)\]", last, flags=re.M)
            return "preference_judge", orjson.dumps({"reason": "fits", "ratings": [
                {"dimension": d, "reason": "seen", "score": 4 + (i % 2)} for i, d in enumerate(dims)]}).decode()
        if system.startswith("An AI assistant talked with one user"):
            return "slot_filler", orjson.dumps({"reason": "from the memory", "label": "likes short checklists"}).decode()
        if system.startswith("You compare two short descriptions"):
            score = PLAN.get(_dimension(last), (1.0,))[0]
            return "recovery_judge", orjson.dumps({"reason": "compared", "score": score}).decode()
        if system.startswith("You decide whether one task could ever"):
            can = PLAN.get(_dimension(last), (1.0, True))[1]
            return "stage0", orjson.dumps({"reason": "task check", "can_invite": can}).decode()
        if system.startswith("You check whether one episode of dialogue"):
            disclosed = PLAN.get(_dimension(last), (1.0, True, True))[2]
            # The embedded framing wants the user's words copied: the first user line's opening words.
            said = re.search(r"^User: (.+)$", last, flags=re.M)
            quote = " ".join(said.group(1).split()[:6]) if said else "short checklists"
            return "stage1", orjson.dumps({"evidence": quote if disclosed else "", "reason": "read",
                                           "disclosed": disclosed}).decode()
        if system.startswith("A dialogue failed to disclose"):
            label = PLAN.get(_dimension(last), (1.0, True, True, "agent_elicitation_failure"))[3]
            return "stage2", orjson.dumps({"reason": "why", "label": label}).decode()
        if system.startswith("You write index notes"):  # amem's note for one observation
            words = [w for w in re.findall(r"[a-z]{4,}", last.lower())][:5] or ["note", "user", "text"]
            words += ["memory", "user", "note"][:max(0, 3 - len(words))]
            return "memory_writer", orjson.dumps({"keywords": words, "context": "what the user said about a task",
                                                  "tags": ["task", "preference", "dialogue"]}).decode()
        if system.startswith("You organise an agent's memory"):  # amem's evolution step: nothing changes
            return "memory_writer", orjson.dumps({"should_evolve": False, "actions": [], "link_to": [], "tags": [],
                                                  "neighbor_updates": []}).decode()
        raise AssertionError(f"unrecognised prompt: {system[:60]!r}")

    async def complete(self, request: ChatRequest) -> ChatResult:
        self.requests.append(request)
        role, text = self.answer(request)
        self.by_role[role] += 1
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        return ChatResult(text=text, usage=Usage(prompt_tokens=50, completion_tokens=10), model="scripted")

    async def stream(self, request: ChatRequest) -> AsyncIterator[str]:
        result = await self.complete(request)
        for start in range(0, len(result.text), 8):
            yield result.text[start:start + 8]

    async def aclose(self) -> None:
        return None
