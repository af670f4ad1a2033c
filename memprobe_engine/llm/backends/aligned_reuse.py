"""Prefix reuse that leaves a temperature-0 answer exactly as a whole-prompt evaluation gives it.

Why a prompt's answer can depend on what the server did before it (``local.DETERMINISM``): llama.cpp
evaluates a prompt in steps of ``chunk`` tokens counted from the first token it has to evaluate, and
on the CPU a token's result depends on the size of the step it was computed in. Reusing a cached
prefix of length ``c`` makes the rest start at ``c``, so every later step is cut differently from a
whole-prompt evaluation (which starts at 0), and the last step of the prefix was computed with
whatever followed it in the earlier prompt.

A step that covers tokens ``[k·chunk, (k+1)·chunk)`` in full, with the same tokens before it, is
computed the same way in any prompt. So a cached prefix cut down to a whole number of steps,
``A = ⌊c / chunk⌋ · chunk``, holds exactly what a whole-prompt evaluation would have computed there,
and evaluating the rest from ``A`` cuts it into the same steps as a whole-prompt evaluation does. The
answer is the whole-prompt answer; only the first ``A`` tokens are not evaluated again.

llama.cpp reuses the longest common prefix it finds and cannot be told to stop at ``A``. Before the
request, :meth:`AlignedReuse.prepare` therefore sends the slot a one-token prompt extension: the
first ``A`` tokens and one token that differs from the request's next token. llama.cpp keeps the ``A``
tokens, evaluates the odd one, and the request that follows can share no more than ``A``.

This only holds while every step a slot holds in full was computed this way: a slot whose last
request was not exact (a sampled request reuses any prefix) has no known whole steps
(:attr:`~.slots.Slot.exact_tokens` is None) and its next exact request is evaluated in full.
"""

from __future__ import annotations

from collections.abc import Sequence

import aiohttp

from memprobe_engine.errors import LLMError
from memprobe_engine.llm.types import ChatMessage


def shared_steps(known: Sequence[int] | None, tokens: Sequence[int], chunk: int) -> int:
    """Tokens of ``tokens`` a slot holding ``known`` can keep: their common prefix cut down to whole
    steps of ``chunk``, leaving at least one token of ``tokens`` to evaluate (llama.cpp needs one to
    compute the next token's logits)."""
    if not known:
        return 0
    limit = min(len(known), len(tokens) - 1)
    common = 0
    while common < limit and known[common] == tokens[common]:
        common += 1
    return common // chunk * chunk


def odd_token(*avoid: int | None) -> int:
    """A token id that is none of ``avoid`` (ids 0–2 exist in every vocabulary llama.cpp loads)."""
    return next(token for token in (0, 1, 2) if token not in avoid)


class AlignedReuse:
    """Talks to one embedded server's native endpoints: the request's prompt as tokens, and the cut of
    a slot's cache to whole steps. One per backend; its HTTP session lives in the run's event loop."""

    def __init__(self, address: str, api_key: str, chunk: int) -> None:
        self.address = address.rstrip("/")
        self.chunk = chunk
        self._headers = {"Authorization": f"Bearer {api_key}"}
        self._session: aiohttp.ClientSession | None = None

    async def _post(self, path: str, body: dict[str, object]) -> dict[str, object]:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, sock_connect=10))
        async with self._session.post(f"{self.address}{path}", json=body, headers=self._headers) as response:
            if response.status != 200:
                raise LLMError(f"embedded server {path} answered HTTP {response.status}: "
                               f"{(await response.text())[:200]}")
            answer = await response.json()
        if not isinstance(answer, dict):
            raise LLMError(f"embedded server {path} answered {type(answer).__name__}, not an object")
        return answer

    async def prompt_tokens(self, messages: Sequence[ChatMessage]) -> list[int]:
        """The tokens llama.cpp will evaluate for a chat request with these messages."""
        templated = await self._post("/apply-template",
                                     {"messages": [{"role": m.role, "content": m.content} for m in messages]})
        tokenized = await self._post("/tokenize", {"content": templated["prompt"], "add_special": False})
        tokens = tokenized["tokens"]
        if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
            raise LLMError("embedded server /tokenize answered no token list")
        return tokens

    async def prepare(self, slot: int, known: Sequence[int] | None, tokens: Sequence[int]) -> int:
        """Cut ``slot``'s cache to the whole steps it shares with ``tokens``; return how many tokens it
        keeps (0: none, evaluate the request in full)."""
        keep = shared_steps(known, tokens, self.chunk)
        if keep == 0:
            return 0
        assert known is not None
        odd = odd_token(tokens[keep], known[keep] if keep < len(known) else None)
        await self._post("/completion", {"prompt": [*tokens[:keep], odd], "n_predict": 0, "id_slot": slot,
                                         "cache_prompt": True, "temperature": 0.0})
        return keep

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
