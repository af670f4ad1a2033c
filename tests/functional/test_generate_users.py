"""`generate_user` end to end with a scripted backend: persona, bank retried until valid, tasks
through the blind critic and the editor, verdicts recorded, and an output tree that validates."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import orjson

from memprobe_engine.events.reader import open_recording
from memprobe_engine.llm.client import ChatClient
from memprobe_engine.llm.config import LLMConfig
from memprobe_engine.llm.spec import parse_spec
from memprobe_engine.llm.types import ChatRequest, ChatResult
from memprobe_engine.recovery.generate import GenerationSettings, generate_user, write_user
from memprobe_engine.recovery.inputs import load_pool, validate_sessions
from tests.doubles import temp_recording

ROOT = Path(__file__).resolve().parents[2]
POOL = load_pool(ROOT / "sessions" / "pool.json")


class Generator:
    """Answers each generation role; the first bank answer per category is invalid (one entry short)
    and the critic flags the first draft of every third task, so retries and edits happen."""

    def __init__(self) -> None:
        self.bank_calls: dict[str, int] = {}
        self.critic_calls = 0
        self.name = "scripted"

    def reply(self, request: ChatRequest) -> str:
        system, last = request.messages[0].content, request.messages[-1].content
        if "persona profiles" in system:
            return orjson.dumps({"name": "Ada Park", "age": 41, "gender": "female", "location": "Boise, Idaho",
                                 "occupation": "union electrician", "background": "Grew up in Boise. Apprenticed at "
                                 "nineteen. Now leads a small crew on commercial jobs.", "values": ["craft", "family"],
                                 "communication_style": "Short sentences, direct, a bit dry."}).decode()
        if "hidden ground truth" in system:
            category = re.search(r"CATEGORY: (.+)\n", last).group(1)  # type: ignore[union-attr]
            names = re.findall(r"^- (\w+):", last, flags=re.M)
            need = int(re.search(r"Pick exactly (\d+)", last).group(1))  # type: ignore[union-attr]
            attempt = self.bank_calls.get(category, 0)
            self.bank_calls[category] = attempt + 1
            count = need - 1 if attempt == 0 else need
            return orjson.dumps({"entries": [{"dimension": n, "short": f"distinct stance on {n.replace('_', ' ')}",
                                              "explanation": "She shows it at work. Her crew has noticed it too."}
                                             for n in names[:count]]}).decode()
        if "opening request" in system:
            return orjson.dumps({"task": "Can you help me plan my weekend chores around a rainy forecast?",
                                 "rationale": "Planning chores invites talk about habits."}).decode()
        if "review benchmark tasks" in system:
            self.critic_calls += 1
            verdict = "fishing" if self.critic_calls % 3 == 1 else "neutral"
            return orjson.dumps({"reason": "checked", "verdict": verdict}).decode()
        if "rewrite benchmark tasks" in system:
            return orjson.dumps({"task": "Could you help me sort out a packing list for a work trip?",
                                 "rationale": "Packing invites talk about routines."}).decode()
        raise AssertionError(system[:60])

    async def complete(self, request: ChatRequest) -> ChatResult:
        return ChatResult(text=self.reply(request))

    async def stream(self, request: ChatRequest):  # type: ignore[no-untyped-def]
        yield self.reply(request)

    async def aclose(self) -> None:
        return None


def test_generated_user_validates_and_keeps_verdicts(tmp_path: Path) -> None:
    backend = Generator()
    config = LLMConfig(models={"default": parse_spec("openai:scripted@http://127.0.0.1:9/v1")})
    with temp_recording(tmp_path / "rec") as recorder:
        chat = ChatClient(config, recorder, backend_factory=lambda spec: backend)
        profile, bank, tasks = asyncio.run(generate_user(chat, recorder, POOL, "gen_001", GenerationSettings()))
    assert all(count == 2 for count in backend.bank_calls.values()), "each category needed one retry"
    assert len(bank.entries) == 31 and len(tasks.tasks) == 31
    revised = [t for t in tasks.tasks if t.revised]
    assert revised and all(t.critic_verdict == "fishing" for t in revised)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "pool.json").write_bytes((ROOT / "sessions" / "pool.json").read_bytes())
    write_user(tmp_path / "out", "gen_001", profile, bank, tasks)
    assert validate_sessions(tmp_path / "out") == []
    verdicts = list(open_recording(tmp_path / "rec").iter_events(kinds=["task_verdict"]))
    assert {v.verdict for v in verdicts} == {"neutral", "fishing"}
    assert all(v.revised_task for v in verdicts if v.verdict == "fishing")
