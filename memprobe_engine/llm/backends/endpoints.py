"""Several OpenAI-compatible endpoints for one role (vLLM replicas on different nodes).

A spec names them in its URL, comma-separated (``openai:MODEL@http://node1:8000/v1,http://node2:8000/v1``,
or ``base_url = "…,…"`` in a config's ``[models.ROLE]`` table). Requests are spread with *prefix
affinity*: every call of one unit (user × system, episode × system) goes to the same endpoint, so
the growing conversation of that unit keeps hitting the server that holds its prefix in cache. The
endpoint is chosen by rendezvous hashing of the unit over the endpoints in rotation, so when one
leaves, only its own units move and every other unit stays where its cache is.

An endpoint that fails — unreachable, timed out, silent, a 5xx answer — is taken out of rotation with
one line on the ``memprobe_engine.llm`` log (the run's progress display shows it), and the same
attempt goes at once to the unit's next endpoint: the call is neither lost nor sent twice (it had no
answer). 429 (busy) is not a failure of the endpoint: it is retried by the client as usual. When every
endpoint has failed, they are all put back and the client's retries and backoff take over.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import AsyncIterator, Mapping, Sequence

from memprobe_engine.errors import LLMError
from memprobe_engine.events.recorder import current_unit
from memprobe_engine.llm.backends.openai_compat import OpenAICompatBackend
from memprobe_engine.llm.backends.silence import EndpointSilent
from memprobe_engine.llm.spec import ModelSpec
from memprobe_engine.llm.types import ChatRequest, ChatResult, TransientBackendError

log = logging.getLogger(__name__)


def endpoint_urls(base_url: str | None) -> list[str]:
    """The endpoints a spec's URL names (one, or several comma-separated)."""
    return [url.strip() for url in (base_url or "").split(",") if url.strip()]


def _weight(unit: str, url: str) -> bytes:
    return hashlib.blake2b(f"{unit}\0{url}".encode(), digest_size=8).digest()


class MultiEndpointBackend:
    """One role's endpoints behind one backend: prefix affinity, failing endpoints out of rotation."""

    def __init__(self, endpoints: Sequence[OpenAICompatBackend]) -> None:
        self.endpoints = list(endpoints)
        self.name = self.endpoints[0].name
        self.model = self.endpoints[0].model
        self._down: set[str] = set()
        self._chosen: dict[str, list[OpenAICompatBackend]] = {}

    @classmethod
    def from_spec(cls, spec: ModelSpec, env: Mapping[str, str]) -> "MultiEndpointBackend":
        return cls([OpenAICompatBackend.from_spec(spec.model_copy(update={"base_url": url}), env)
                    for url in endpoint_urls(spec.base_url)])

    def order_for(self, unit: str | None) -> list[OpenAICompatBackend]:
        """The endpoints in the order ``unit`` tries them (highest rendezvous weight first)."""
        key = unit or ""
        order = self._chosen.get(key)
        if order is None:
            order = self._chosen[key] = sorted(self.endpoints, key=lambda e: _weight(key, e.base_url), reverse=True)
        return order

    def in_rotation(self) -> int:
        return len(self.endpoints) - len(self._down)

    async def complete(self, request: ChatRequest) -> ChatResult:
        unit = current_unit()
        last: Exception | None = None
        for endpoint in self.order_for(unit):
            if endpoint.base_url in self._down:
                continue
            try:
                result = await endpoint.complete(request, unit=unit)
                return result.model_copy(update={"endpoint": self.endpoints.index(endpoint)})
            except (TransientBackendError, EndpointSilent) as err:
                if isinstance(err, TransientBackendError) and not err.down:
                    raise  # busy (429): the client waits and asks the same endpoint again
                last = err
                self._take_out(endpoint, err)
        self._down.clear()  # every endpoint failed: all back in rotation, the client's backoff decides
        if isinstance(last, TransientBackendError):
            raise last
        raise TransientBackendError(f"every endpoint of {self.model!r} failed: {last}", down=True)

    def _take_out(self, endpoint: OpenAICompatBackend, err: Exception) -> None:
        if endpoint.base_url not in self._down:
            self._down.add(endpoint.base_url)
            log.warning("endpoint %s taken out of rotation (%s); %d of %d endpoints left for %s", endpoint.base_url,
                        str(err).split(". ")[0][:200], self.in_rotation(), len(self.endpoints), self.model)

    async def stream(self, request: ChatRequest) -> AsyncIterator[str]:
        """Streams from the unit's first endpoint in rotation (a broken stream is not moved mid-way)."""
        unit = current_unit()
        live = [e for e in self.order_for(unit) if e.base_url not in self._down] or self.order_for(unit)
        async for piece in live[0].stream(request):
            yield piece

    async def aclose(self) -> None:
        errors = []
        for endpoint in self.endpoints:
            try:
                await endpoint.aclose()
            except Exception as err:  # noqa: BLE001 - close the others first
                errors.append(err)
        if errors:
            raise LLMError(f"closing the endpoints of {self.model!r} failed: {errors[0]}")


__all__ = ["MultiEndpointBackend", "endpoint_urls"]
