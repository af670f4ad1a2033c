"""Protocol B's own ``memprobe run`` options, as its spec declares them (``-P key=value`` or the flag of the
same name); ``run_options.paradigm_plan`` turns them into the plan."""

from __future__ import annotations

from memprobe_engine.paradigms.config import DEFAULT_K, DEFAULT_READER_MAX_TOKENS, DEFAULT_SESSION_K
from memprobe_engine.protocol_spec import ProtocolOptions


class ParadigmOptions(ProtocolOptions):
    """Protocol B's own ``memprobe run`` options."""

    episodes: str | None = None
    paradigms: str | None = None
    limit: int | None = None
    ingest: str = "turns"
    k: int = DEFAULT_K
    session_k: int = DEFAULT_SESSION_K
    reader_max_tokens: int = DEFAULT_READER_MAX_TOKENS
