"""The header's ``config`` as typed models: the keys every recording's config may hold, here, and each
protocol's own keys on its model (``RecoveryConfig``, ``ParadigmConfig``: the spec's ``config_model``).

``header.json`` keeps the config exactly as the run wrote it (its ``fingerprint`` is computed over
that dict, and a resume compares it); a reader asks for the typed view instead of reading keys:

    RecoveryConfig.of(header).framing      # the protocol's own model (its readers know it)
    typed_config(header).systems           # memprobe_engine.protocols: the header's protocol's model

``of`` brings a config written by an older MemProbe up to the current keys first
(:mod:`memprobe_engine.events.header_upgrade`, the one module that reads raw keys), then validates
it. Keys a model does not declare are kept (``extra="allow"``): nothing in a header is lost on read.
A config that does not validate is a RecordingError naming the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Self

from pydantic import BaseModel, ConfigDict, ValidationError

from memprobe_engine.errors import RecordingError
from memprobe_engine.events.header import RecordingHeader
from memprobe_engine.events.header_upgrade import upgrade_config


class ResolvedModel(BaseModel):
    """One role's effective model spec as ``ModelSpec.resolved`` writes it (env var *names* only)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    #: The spec string, e.g. ``local:1.5b`` or ``openai:gpt-4o``.
    spec: str | None = None
    backend: str | None = None
    model: str | None = None
    base_url: str | None = None
    quantization: str | None = None
    #: Where the spec came from (a flag, the config file, the built-in default).
    origin: str | None = None


class ResolvedModels(BaseModel):
    """The header's ``models``: ``{"models": {role: spec}}`` (``LLMConfig.resolved``)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    models: dict[str, ResolvedModel] = {}

    def specs(self) -> dict[str, str]:
        """Role → spec string, for the roles that name one."""
        return {role: entry.spec for role, entry in self.models.items() if entry.spec is not None}


class HeaderConfig(BaseModel):
    """What any recording's config may hold, whatever wrote it. A protocol's model extends it."""

    model_config = ConfigDict(extra="allow", frozen=True)

    #: The protocol (``recovery``, ``paradigms``) or tool (``generate-episodes``, ``proxy``) that wrote it;
    #: None in a config that names none (the header's ``suite`` then says).
    suite: str | None = None
    #: Where an imported run came from (``release-a``: the recovery release); None for a run of ours.
    source: str | None = None
    #: The hash a resume compares (``orchestration/resume.fingerprint``, over the rest of this config).
    fingerprint: str | None = None
    #: The resolved model spec per role.
    models: ResolvedModels = ResolvedModels()
    #: The run's seed.
    seed: int = 0
    #: ``I/N``: the shard of the run this recording holds (``memprobe run --shard``).
    shard: str = "0/1"
    #: The inputs folder the run read (protocol A's users and pool, protocol B's suite).
    sessions: str | None = None
    #: The memory systems (protocol B: also reference protocols and heuristics) the run planned.
    systems: list[str] = []
    #: The units' subjects the run planned, where the protocol has them (protocol A's users).
    users: list[str] | None = None
    #: The embedding model spec.
    embeddings: str | None = None
    #: ``memprobe merge``: the shard recordings merged into this one, and the shards that were missing.
    merged_from: list[str] | None = None
    missing_shards: list[str] | None = None

    #: The suite whose upgrades a config that names none gets when read as this model.
    suite_name: ClassVar[str | None] = None

    @classmethod
    def of(cls, source: RecordingHeader | Mapping[str, object]) -> Self:
        """The typed config of a header (cached on it) or of a raw config dict (upgraded, validated)."""
        if isinstance(source, RecordingHeader):
            return source.typed_config(cls, lambda raw: cls._validate(raw, source.suite, source.run_id))
        return cls._validate(source, None, None)

    @classmethod
    def _validate(cls, raw: Mapping[str, object], suite: str | None, where: str | None) -> Self:
        try:
            return cls.model_validate(upgrade_config(raw, suite or cls.suite_name))
        except ValidationError as err:
            first = err.errors()[0]
            key = ".".join(map(str, first["loc"]))
            raise RecordingError(f"{where or 'a recording'}: its header's config key {key!r} is not what "
                                 f"MemProbe reads ({first['msg']}); restore header.json from a copy of this "
                                 f"recording.") from None

    def extra(self) -> dict[str, object]:
        """The keys this model does not declare (kept as written)."""
        return dict(self.model_extra or {})


class AskConfig(HeaderConfig):
    """``memprobe llm ask --record``: the resolved models only."""


class ProxyConfig(HeaderConfig):
    """``memprobe proxy --record``: ``suite`` ``proxy``, the resolved models and ``embeddings``."""


class GenerateUsersConfig(HeaderConfig):
    """``memprobe generate users``: how many users, their seed and retries, the pool they drew from."""

    n: int | None = None
    retries: int | None = None
    pool: str | None = None


class RealizeConfig(HeaderConfig):
    """``memprobe generate episodes``: ``suite`` ``generate-episodes``, the realizer ``settings``."""

    #: The realizer's settings (``RealizeSettings.config``: seed, temperature, max_tokens, attempts…).
    settings: dict[str, object] | None = None


#: The models of the recordings no protocol writes, by header ``suite`` (config ``suite`` first).
TOOL_CONFIGS: dict[str, type[HeaderConfig]] = {
    "ask": AskConfig, "proxy": ProxyConfig, "generate": GenerateUsersConfig, "generate-episodes": RealizeConfig,
}
