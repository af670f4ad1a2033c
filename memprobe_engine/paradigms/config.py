"""Protocol B's header config, typed: what :meth:`ParadigmPlan.config` writes (a run of ours) and what an
import of the upstream reports writes (``imported_from``), read through :meth:`ParadigmConfig.of`
(older headers upgraded: :mod:`memprobe_engine.events.header_upgrade`)."""

from __future__ import annotations

from typing import Literal

from memprobe_engine.events.header_config import HeaderConfig

#: How sessions reach memory systems: turn by turn, or one transcript per session (``protocol.py``).
Granularity = Literal["turns", "session"]
GRANULARITIES: tuple[Granularity, ...] = ("turns", "session")
#: Default number of memories a memory system's search returns to the reader.
DEFAULT_K = 10
#: Default number of sessions naive / time-aware RAG retrieve (the upstream top-k).
DEFAULT_SESSION_K = 5
#: The reader's answer budget in tokens when none is given.
DEFAULT_READER_MAX_TOKENS = 300
#: The embedding model a paradigm run uses when none is given.
DEFAULT_EMBEDDINGS = "st:minilm"


class ParadigmConfig(HeaderConfig):
    """A protocol-B recording's config (the base's keys plus these)."""

    suite_name = "paradigms"

    #: The episodes the run selected (suite order); None: not recorded.
    episodes: list[str] | None = None
    #: The paradigms the run was restricted to; None: every paradigm.
    paradigms: list[str] | None = None
    #: Per system, its input protocol: ``memory``, a reference protocol's name, or ``heuristic``.
    input_protocols: dict[str, str] = {}
    ingest: Granularity = "turns"
    k: int = DEFAULT_K
    session_k: int = DEFAULT_SESSION_K
    reader_max_tokens: int = DEFAULT_READER_MAX_TOKENS
    temperature: float = 0.0
    embeddings: str = DEFAULT_EMBEDDINGS
    #: Per episode, a digest of its content (``runner.episode_digest``): a resume refuses changed episodes.
    episode_digests: dict[str, str] | None = None
    # An import of the upstream reports: the report it came from, its scoring and layers.
    imported_from: str | None = None
    scoring_mode: str | None = None
    scorer_version: str | None = None
    score_layers: list[str] | None = None
