"""Backends turn a ChatRequest into a ChatResult; :func:`make_backend` picks one for a spec.

Heavy backends are imported only when a spec asks for them, so an OpenAI-only run never loads the
embedded model's runtime and a CPU machine never needs vLLM.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from memprobe_engine.errors import LLMError
from memprobe_engine.llm.spec import ModelSpec, parse_spec
from memprobe_engine.llm.types import ChatBackend


def make_backend(spec: ModelSpec, env: Mapping[str, str] | None = None) -> ChatBackend:
    """A new backend for ``spec`` (the client creates one per distinct spec and reuses it)."""
    env = os.environ if env is None else env
    if spec.backend == "openai" and spec.base_url and "," in spec.base_url:
        from memprobe_engine.llm.backends.endpoints import MultiEndpointBackend
        return MultiEndpointBackend.from_spec(spec, env)
    if spec.backend == "openai":
        from memprobe_engine.llm.backends.openai_compat import OpenAICompatBackend
        return OpenAICompatBackend.from_spec(spec, env)
    if spec.backend == "local":
        try:
            from memprobe_engine.llm.backends.local import LocalBackend
        except ImportError as err:
            raise LLMError(f"The embedded model backend for {spec.where()} cannot be loaded ({err}). "
                           f"Install it with pip install 'memprobe[local]', or choose another backend "
                           f"with --model / MEMPROBE_MODEL.") from None
        backend: ChatBackend = LocalBackend(spec)
        return backend
    if spec.backend == "vllm":
        from memprobe_engine.llm.backends.vllm_server import VLLMBackend
        return VLLMBackend(spec)
    from memprobe_engine.llm.backends.replay import ReplayBackend
    fallback = make_backend(parse_spec(spec.fallback, origin=f"the fallback of {spec.where()}"), env) \
        if spec.fallback else None
    return ReplayBackend(Path(spec.model).expanduser(), fallback=fallback)


def check_specs(specs: Iterable[ModelSpec], env: Mapping[str, str] | None = None) -> None:
    """Build, then close, the backend of each spec: a spec that cannot work here (no API key, a
    replay folder that is not a recording, a runtime not installed) raises its one-line error now,
    before a run creates its recording. Nothing is started and no request is sent; creating the
    recording first pinned the broken spec in its header, so the corrected command was refused."""
    async def build_and_close() -> None:
        for spec in {spec.identity_key(): spec for spec in specs}.values():
            await make_backend(spec, env).aclose()
    asyncio.run(build_and_close())


__all__ = ["check_specs", "make_backend"]
