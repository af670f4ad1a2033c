"""The canonical request hash: the one key the response cache and the replay backend share.

The hash is the sha256 (hex) of the canonical JSON (orjson, keys sorted at every level) of::

    {"v": HASH_VERSION,
     "backend": <backend name: openai | local | vllm | replay>,
     "model": <the spec's model>,
     "messages": [[role, content], ...],
     "params": <SamplingParams without unset (None) fields>,
     "response_schema": <the JSON schema sent, or null>,
     "replica": <replica index>}

These are exactly the inputs that change what a model answers. Deliberately *not* part of it:
base URL, API key, timeouts, concurrency, retries, and server-side settings (``extra_args``,
``extra_body``) — moving a server or re-keying an account must not invalidate a recording's
replay keys. The shared response cache adds the endpoint to this hash (``cache.py``), so two
servers that give one model name never share answers there. Unset
sampling fields are left out so that adding an optional field to SamplingParams keeps old hashes.
Bump ``HASH_VERSION`` if the document above ever changes shape.
"""

from __future__ import annotations

import contextvars
import hashlib
from typing import Any

import orjson

from memprobe_engine.llm.types import ChatRequest

HASH_VERSION = 1

#: The role of the chat call in progress, set by the client around each backend call. It is not
#: part of the hash; the replay backend reads it to prefer, among the models a recording used, the
#: one this role used when it was recorded.
current_role: contextvars.ContextVar[str | None] = contextvars.ContextVar("memprobe_llm_role", default=None)


def hash_document(request: ChatRequest, *, backend: str) -> dict[str, Any]:
    """The exact document that is hashed (useful to explain why two requests differ)."""
    return {
        "v": HASH_VERSION,
        "backend": backend,
        "model": request.model,
        "messages": [[message.role, message.content] for message in request.messages],
        "params": request.params.model_dump(mode="json", exclude_none=True),
        "response_schema": request.response_schema,
        "replica": request.replica,
    }


def request_hash(request: ChatRequest, *, backend: str) -> str:
    """sha256 hex of :func:`hash_document`; identical across processes and machines."""
    blob = orjson.dumps(hash_document(request, backend=backend), option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(blob).hexdigest()
