"""Test doubles and helpers for the LLM layer. Tests only: product code never uses these.

``ScriptedBackend`` answers from a list (consumed in order) or from a function of the request, and
keeps every request it received so tests can assert what the client sent.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Union

import numpy as np
import numpy.typing as npt
import orjson

from memprobe_engine.events.header import new_header
from memprobe_engine.events.recorder import Recorder
from memprobe_engine.events.writer import open_writer
from memprobe_engine.llm.types import ChatRequest, ChatResult, Usage

Reply = Union[str, ChatResult, BaseException]
Script = Union[Sequence[Reply], Callable[[ChatRequest], Reply]]


class ScriptedBackend:
    """A ChatBackend whose replies are scripted. An exception in the script is raised instead."""

    def __init__(self, script: Script, *, name: str = "scripted", piece_size: int = 4) -> None:
        self.name = name
        self.requests: list[ChatRequest] = []
        self.closed = False
        self._script = script
        self._position = 0
        self._piece_size = piece_size

    def _next(self, request: ChatRequest) -> ChatResult:
        self.requests.append(request)
        if callable(self._script):
            reply = self._script(request)
        else:
            if self._position >= len(self._script):
                raise AssertionError(f"ScriptedBackend ran out of replies after {self._position} requests")
            reply = self._script[self._position]
            self._position += 1
        if isinstance(reply, BaseException):
            raise reply
        if isinstance(reply, ChatResult):
            return reply
        return ChatResult(text=reply, usage=Usage(prompt_tokens=10, completion_tokens=len(reply.split())))

    async def complete(self, request: ChatRequest) -> ChatResult:
        return self._next(request)

    async def stream(self, request: ChatRequest) -> AsyncIterator[str]:
        text = self._next(request).text
        for start in range(0, len(text), self._piece_size):
            yield text[start:start + self._piece_size]

    async def aclose(self) -> None:
        self.closed = True


def read_events(recording_dir: Path, kind: str = "llm_call") -> list[dict[str, Any]]:
    """The events of one kind in a recording, straight from ``events.jsonl``."""
    lines = (recording_dir / "events.jsonl").read_bytes().splitlines()
    return [event for event in map(orjson.loads, lines) if event.get("kind") == kind]


@contextlib.contextmanager
def temp_recording(directory: Path) -> Iterator[Recorder]:
    """A real recording in ``directory`` with a recorder on it; the writer is closed on exit."""
    writer = open_writer(directory, new_header("r", "test", {}))
    try:
        yield Recorder(writer)
    finally:
        writer.close()


class BagOfWordsEmbedder:
    """Deterministic embedder double: word counts, L2-normalised. By default each word gets its own
    column (a vocabulary grown in order of first sight, no collisions); ``hashed=True`` folds words
    into ``dim`` buckets by sha256 instead. Remembers every text it embedded."""

    def __init__(self, dim: int = 512, *, hashed: bool = False) -> None:
        self.dim = dim
        self.hashed = hashed
        self.vocabulary: dict[str, int] = {}
        self.embedded: list[str] = []

    def _column(self, word: str) -> int:
        if self.hashed:
            return int(hashlib.sha256(word.encode()).hexdigest(), 16) % self.dim
        return self.vocabulary.setdefault(word, len(self.vocabulary))

    async def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        self.embedded.extend(texts)
        rows = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"[a-z]+", text.lower()):
                rows[row, self._column(word)] += 1.0
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        return (rows / np.where(norms == 0, 1.0, norms)).astype(np.float32)
