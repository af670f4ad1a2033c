"""Answer chat requests from a recording, by request hash; fail loudly on a miss.

Every ``llm_call`` event of the recording (read through the recording's read model, so a damaged
line is skipped, never answered from) is indexed by the hash the client computed when it was
recorded. The replaying client hashes its request under the ``replay`` backend, so the backend
re-hashes the request under each (backend, model) identity the recording used — the identities the
current role used first — and answers with the recorded text.

Calls that needed structured-output repair are recorded as one event whose messages hold the whole
conversation (original messages, then a bad reply and a repair prompt per round) and whose
``request_hash`` keys the original request. Each round is indexed separately — the original
request answers with the first bad reply, and so on — so a replayed run repairs exactly as the
recorded one did and reaches the same parsed result or the same exclusion.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from memprobe_engine.errors import ConfigError, RecordingError, ReplayMiss
from memprobe_engine.events.payloads import PayloadReader
from memprobe_engine.events.reader import RecordingReader, open_recording
from memprobe_engine.llm.hashing import current_role, request_hash
from memprobe_engine.llm.types import ChatBackend, ChatMessage, ChatRequest, ChatResult, SamplingParams

EVENTS_FILE = "events.jsonl"


class ReplayBackend:
    """Serves recorded answers; ``fallback`` (a live backend) answers what the recording lacks."""

    name = "replay"

    def __init__(self, recording_dir: Path | str, fallback: ChatBackend | None = None) -> None:
        self.recording_dir = Path(recording_dir)
        self.fallback = fallback
        self.hits = 0
        self.misses = 0
        self._answers: dict[str, str] = {}
        self._role_identities: dict[str, Counter[tuple[str, str]]] = {}
        self._identities: Counter[tuple[str, str]] = Counter()
        self._load()

    def __len__(self) -> int:
        return len(self._answers)

    def _load(self) -> None:
        path = self.recording_dir / EVENTS_FILE
        if not path.is_file():
            raise ConfigError(f"Replay recording {self.recording_dir} has no {EVENTS_FILE}: pass a folder written "
                              f"by `memprobe run` in the replay:DIR model spec.")
        try:
            reader = open_recording(self.recording_dir)
        except RecordingError as err:
            raise ConfigError(f"replay:{self.recording_dir}: {err}") from None
        with reader:
            self._load_from(reader)

    def _load_from(self, reader: RecordingReader) -> None:
        payloads = reader.payloads
        for _, event in reader.iter_dicts(["llm_call"]):
            if not isinstance(event.get("request_hash"), str) or not event["request_hash"]:
                continue
            text = event.get("response_text")
            if text is None or event.get("error"):
                continue
            identity = (str(event.get("backend", "")), str(event.get("model", "")))
            self._identities[identity] += 1
            self._role_identities.setdefault(str(event.get("role", "")), Counter())[identity] += 1
            self._answers.update(recorded_answers(event, payloads))

    def _candidates(self) -> list[tuple[str, str]]:
        role = current_role.get()
        preferred = [identity for identity, _ in self._role_identities.get(role or "", Counter()).most_common()]
        rest = [identity for identity, _ in self._identities.most_common() if identity not in preferred]
        return preferred + rest

    def lookup(self, request: ChatRequest) -> str | None:
        """The recorded answer to ``request`` under any identity the recording used, or None."""
        for backend, model in self._candidates():
            key = request_hash(request.model_copy(update={"model": model}), backend=backend)
            answer = self._answers.get(key)
            if answer is not None:
                return answer
        return None

    async def complete(self, request: ChatRequest) -> ChatResult:
        answer = self.lookup(request)
        if answer is not None:
            self.hits += 1
            return ChatResult(text=answer, finish_reason="replay")
        self.misses += 1
        if self.fallback is None:
            raise self._miss(request)
        return await self.fallback.complete(request)

    async def stream(self, request: ChatRequest) -> AsyncIterator[str]:
        answer = self.lookup(request)
        if answer is not None:
            self.hits += 1
            yield answer
            return
        self.misses += 1
        if self.fallback is None:
            raise self._miss(request)
        async for piece in self.fallback.stream(request):
            yield piece

    async def aclose(self) -> None:
        if self.fallback is not None:
            await self.fallback.aclose()

    def _miss(self, request: ChatRequest) -> ReplayMiss:
        role = current_role.get() or "?"
        models = sorted({f"{b}:{m}" for b, m in self._role_identities.get(role, Counter())}) or \
            sorted({f"{b}:{m}" for b, m in self._identities})
        last = request.messages[-1].content if request.messages else ""
        snippet = " ".join(last.split())[:80]
        return ReplayMiss(
            f"Replay miss: the recording {self.recording_dir} holds no answer to this request for role "
            f"{role!r} (recorded models: {', '.join(models) or 'none'}; last message: {snippet!r}). The run "
            f"asks something the recorded run did not (changed prompt, parameters or seed). Record again, or "
            f"let a live model answer misses: --model {role}=replay:{self.recording_dir}|local:fast.")


def recorded_answers(event: dict[str, Any], payloads: PayloadReader) -> dict[str, str]:
    """request hash → recorded reply for one ``llm_call`` event, each repair round included.

    A call repaired ``k`` times recorded the conversation of its last round: the original messages,
    then one (bad reply, repair prompt) pair per round. Round ``r``'s request is the original plus
    ``r`` pairs, and its answer the next bad reply, or the final text for the last round; so a replay
    (or a resumed run) repairs — or excludes — exactly as the recorded run did.
    """
    text = event.get("response_text")
    if not isinstance(text, str) or event.get("error") or not isinstance(event.get("request_hash"), str):
        return {}
    answers = {str(event["request_hash"]): str(text)}
    repairs = event.get("repairs") or 0
    if not isinstance(repairs, int) or repairs <= 0:
        return answers
    try:
        messages = [ChatMessage(role=m["role"], content=m["content"] if m.get("content") is not None
                                else payloads.get(m["content_ref"])) for m in event["messages"]]
        schema_ref = event.get("response_schema_ref")
        schema = payloads.get(schema_ref) if schema_ref else None
        params = SamplingParams.model_validate(event.get("params") or {})
        first = len(messages) - 2 * repairs
        if first < 1:
            return answers
        rounds = {str(event["request_hash"]): messages[first].content}
        backend, model = str(event.get("backend", "")), str(event.get("model", ""))
        for round_index in range(1, repairs + 1):
            end = first + 2 * round_index
            request = ChatRequest(model=model, messages=tuple(messages[:end]), params=params,
                                  response_schema=schema, replica=int(event.get("replica") or 0))
            rounds[request_hash(request, backend=backend)] = messages[end].content if round_index < repairs \
                else str(text)
    except (KeyError, ValueError, TypeError, IndexError, AttributeError):
        return answers  # a damaged event: its rounds will miss, loudly, if they are ever asked for
    answers.update(rounds)
    return answers
