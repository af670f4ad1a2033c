"""Which model serves which role: merged from the config file, the environment and the CLI.

Later sources win, role by role:

1. the TOML config file — ``[models]`` with ``ROLE = "SPEC"`` strings, and/or ``[models.ROLE]``
   tables carrying every :class:`~memprobe_engine.llm.spec.ModelSpec` field;
2. environment variables — ``MEMPROBE_MODEL`` (the ``default`` role) and ``MEMPROBE_MODEL_<ROLE>``
   (role upper-cased, e.g. ``MEMPROBE_MODEL_SLOT_FILLER``);
3. CLI overrides — ``ROLE=SPEC`` (a bare ``SPEC`` sets ``default``).

A role without its own spec uses ``default``; with nothing set at all, ``default`` is the embedded
model, ``local:1.5b``.
"""

from __future__ import annotations

import difflib
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from memprobe_engine.errors import ConfigError
from memprobe_engine.llm.model_assets import resolve_tier
from memprobe_engine.llm.spec import ModelSpec, parse_spec, spec_from_table

DEFAULT_ROLE = "default"
DEFAULT_SPEC = "local:1.5b"
ENV_DEFAULT = "MEMPROBE_MODEL"
ENV_ROLE_PREFIX = "MEMPROBE_MODEL_"

#: Every role the project asks a model to play; ``default`` stands in for any role not mapped.
ROLES: tuple[str, ...] = (
    "agent", "simulator", "preference_judge", "memory_writer", "slot_filler", "recovery_judge",
    "attribution_judge", "task_generator", "critic", "editor", "reader", "realizer", "realizer_strong",
)
_ROLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


class LLMConfig(BaseModel):
    """Role → model spec. ``models`` always holds ``default``."""

    model_config = ConfigDict(frozen=True)

    models: dict[str, ModelSpec]

    def key_variables(self) -> set[str]:
        """The environment variables that hold this configuration's API keys: ``OPENAI_API_KEY`` and
        each spec's ``api_key_env``, fallbacks included."""
        names = {"OPENAI_API_KEY"}
        for spec in self.models.values():
            fallback = parse_spec(spec.fallback) if spec.fallback else None
            names |= {s.api_key_env for s in (spec, fallback) if s is not None and s.api_key_env}
        return names

    def spec_for(self, role: str) -> ModelSpec:
        """The spec serving ``role``: its own mapping, else ``default``."""
        return self.models.get(normalize_role(role)) or self.models[DEFAULT_ROLE]

    def resolved(self) -> dict[str, Any]:
        """What a recording header stores: every role's effective spec (env var *names* only)."""
        roles = {role: self.spec_for(role).resolved() for role in (DEFAULT_ROLE, *ROLES)}
        return {"models": roles}


def with_context(config: LLMConfig, tokens: int, *, where: str) -> LLMConfig:
    """``config`` with every role's context set to ``tokens``. An embedded model then gets that
    context in one slot (unless the spec names its slots): a long request needs the tokens, not
    parallel sequences, and four slots of 32k would hold four times the memory for nothing."""
    models: dict[str, ModelSpec] = {}
    for role, spec in config.models.items():
        update: dict[str, Any] = {"context_tokens": tokens}
        if spec.backend == "local":
            limit = resolve_tier(spec.model).context_limit
            if tokens > limit:
                raise ConfigError(f"{where} {tokens}: the embedded model local:{spec.model} was trained for "
                                  f"{limit:,} tokens at most; use a value up to {limit}.")
            if spec.slots is None:
                update |= {"slots": 1, "concurrency": 1}
        models[role] = spec.model_copy(update=update)
    return LLMConfig(models=models)


def default_config() -> LLMConfig:
    """The configuration when nothing is set: every role on the embedded model."""
    return LLMConfig(models={DEFAULT_ROLE: parse_spec(DEFAULT_SPEC, origin="the built-in default")})


def normalize_role(role: str) -> str:
    """``Slot-Filler`` → ``slot_filler``: roles are compared in one spelling."""
    return role.strip().lower().replace("-", "_")


def load_llm_config(config_file: Path | None, env: Mapping[str, str], overrides: list[str]) -> LLMConfig:
    """Merge the file, then the environment, then CLI ``overrides`` (later wins, per role)."""
    models: dict[str, ModelSpec] = dict(default_config().models)
    if config_file is not None:
        models.update(_from_file(config_file))
    models.update(_from_env(env))
    for item in overrides:
        role, spec = _parse_override(item)
        models[role] = spec
    return LLMConfig(models=models)


def _check_role(role: str, where: str) -> str:
    name = normalize_role(role)
    if name != DEFAULT_ROLE and name not in ROLES:
        raise ConfigError(f"{where}: unknown role {role!r}. Roles: {DEFAULT_ROLE}, {', '.join(ROLES)}.")
    return name


#: The tables a config file may hold: ``[models]`` (read here), ``[protocol]``
#: (:mod:`memprobe_engine.recovery.protocol_config`) and ``[prices]`` (:mod:`.pricing`). Anything else is a typo, refused before any
#: model is assembled or started: a misspelled ``[modles]`` would otherwise leave every role on
#: the embedded model without a word.
CONFIG_TABLES = ("models", "protocol", "prices")


def read_config_file(path: Path) -> dict[str, Any]:
    """The TOML of a ``--config`` file, its top-level names checked; ConfigError naming the file and
    the fix for anything unreadable or unknown."""
    if path.exists() and not path.is_file() and not path.is_dir():  # a FIFO or device blocks the read for ever
        raise ConfigError(f"Config file {path} is not a regular file (a pipe or device): give --config the path "
                          f"of a TOML file.")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"Config file {path} does not exist: fix the --config path "
                          f"or create the file.") from None
    except IsADirectoryError:
        raise ConfigError(f"Config file {path} is a folder: give --config the path of a TOML file.") from None
    except OSError as err:
        raise ConfigError(f"Config file {path} cannot be read ({err.strerror}): check its permissions "
                          f"(chmod u+r) or give --config another file.") from None
    except UnicodeDecodeError as err:
        raise ConfigError(f"Config file {path} is not UTF-8 text (byte {err.start} is not valid UTF-8): save it "
                          f"as UTF-8 (e.g. iconv -f latin1 -t utf-8).") from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"Config file {path} is not valid TOML: {err}.") from None
    unknown = [name for name in data if name not in CONFIG_TABLES]
    if unknown:
        name = unknown[0]
        close = difflib.get_close_matches(name, CONFIG_TABLES, n=1)
        guess = f" (did you mean [{close[0]}]?)" if close else ""
        raise ConfigError(f"{path}: unknown table [{name}]{guess}; a config file holds only "
                          f"{', '.join(f'[{t}]' for t in CONFIG_TABLES)}. Fix the name or remove it.")
    return data


def _from_file(path: Path) -> dict[str, ModelSpec]:
    """Read ``[models]`` from a TOML file; every error names the file and the key."""
    data = read_config_file(path)
    section = data.get("models", {})
    if not isinstance(section, dict):
        raise ConfigError(f"{path}: `models` must be a table ([models]) mapping roles to model specs.")
    found: dict[str, ModelSpec] = {}
    for key, value in section.items():
        role = _check_role(key, f"{path} [models]")
        if isinstance(value, str):
            found[role] = parse_spec(value, origin=f"{path} [models] {key}")
        elif isinstance(value, dict):
            found[role] = spec_from_table(value, origin=f"{path} [models.{key}]")
        else:
            raise ConfigError(f"{path} [models] {key}: expected a spec string such as \"openai:gpt-4o-mini\" "
                              f"or a [models.{key}] table, got {type(value).__name__}.")
    return found


def _from_env(env: Mapping[str, str]) -> dict[str, ModelSpec]:
    """``MEMPROBE_MODEL`` and ``MEMPROBE_MODEL_<ROLE>`` for known roles (other names are ignored,
    so unrelated variables that share the prefix never break a run)."""
    found: dict[str, ModelSpec] = {}
    value = env.get(ENV_DEFAULT, "").strip()
    if value:
        found[DEFAULT_ROLE] = parse_spec(value, origin=ENV_DEFAULT)
    for role in ROLES:
        name = ENV_ROLE_PREFIX + role.upper()
        value = env.get(name, "").strip()
        if value:
            found[role] = parse_spec(value, origin=name)
    return found


def _parse_override(item: str) -> tuple[str, ModelSpec]:
    """``ROLE=SPEC`` or a bare ``SPEC`` (for ``default``). A spec never starts with ``name=``."""
    head, sep, tail = item.partition("=")
    if sep and _ROLE_NAME.match(head.strip()):
        role = _check_role(head, f"--model {item}")
        return role, parse_spec(tail, origin=f"--model {item}")
    return DEFAULT_ROLE, parse_spec(item, origin=f"--model {item}")
