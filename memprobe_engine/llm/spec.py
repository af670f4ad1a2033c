"""Model specs: which backend and model serve a role, and how to reach and pace it.

A spec is written as a short string on the command line or in an environment variable, or as a
``[models.ROLE]`` table in the config file for the settings a string cannot carry. Grammar::

    openai:MODEL                      the OpenAI API (or $OPENAI_BASE_URL when set)
    openai:MODEL@http(s)://HOST/v1    any OpenAI-compatible server (vllm serve, llama.cpp, ...)
    local | local:1.5b | local:fast   the embedded offline model (``fast`` = ``0.5b`` tier)
    vllm:HF_MODEL_ID                  start ``vllm serve HF_MODEL_ID`` and talk to it
    replay:RECORDING_DIR              answer from a recording by request hash, fail on a miss
    replay:RECORDING_DIR|SPEC         ... and ask SPEC (any non-replay spec) on a miss

Specs hold the *name* of the environment variable with the API key (``api_key_env``), never the
key, so a spec can be written into a recording header as it is.
"""

from __future__ import annotations

import os
import re
from typing import Any, Literal
from urllib.parse import urlsplit

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from memprobe_engine.errors import ConfigError

BackendName = Literal["openai", "local", "vllm", "replay"]
BACKENDS: tuple[str, ...] = ("openai", "local", "vllm", "replay")

#: Parallel requests per backend when a spec does not say: a remote API takes several, the embedded
#: model as many as its server has slots (see ``local_slots_default``), a vLLM server batches many.
DEFAULT_CONCURRENCY: dict[str, int] = {"openai": 8, "local": 1, "vllm": 16, "replay": 64}
#: The embedded server's parallel slots when neither the spec nor ``$MEMPROBE_LOCAL_SLOTS`` says: one
#: per request the quick run keeps in flight (two units, each with a simulator and a preference judge).
#: On two cores batched decoding showed no clear gain over one stream (noisy measurements); the win is
#: that four prompts keep their prefixes in four slots instead of evicting each other.
DEFAULT_LOCAL_SLOTS = 4
SLOTS_ENV = "MEMPROBE_LOCAL_SLOTS"
PROMPT_CACHE_ENV = "MEMPROBE_LOCAL_PROMPT_CACHE"
DETERMINISTIC_ENV = "MEMPROBE_LOCAL_DETERMINISTIC"
DRAFT_ENV = "MEMPROBE_LOCAL_DRAFT"
DEFAULT_LOCAL_TIER = "1.5b"
#: Tokens per slot of the embedded server when a local spec sets no context_tokens.
LOCAL_CONTEXT_TOKENS = 8192
#: The context assumed for a remote endpoint whose spec sets no context_tokens (today's hosted models).
REMOTE_CONTEXT_TOKENS = 128_000

VALID_FORMS = ("openai:MODEL, openai:MODEL@http://HOST:PORT/v1, local, local:1.5b, local:fast (0.5b tier), "
               "vllm:HF_MODEL_ID, replay:RECORDING_DIR, replay:RECORDING_DIR|FALLBACK_SPEC")

_URL_SUFFIX = re.compile(r"@(https?://\S+)$")
#: The ``user:password@`` of a URL (``[^/?#\s]*`` cannot run past the authority into a path).
_USERINFO = re.compile(r"(?i)(\b[a-z][a-z0-9+.-]*://)[^/?#\s@]*@")


def redact_userinfo(text: str) -> str:
    """``text`` with every URL's ``user:password@`` replaced by ``***@``: messages about a refused
    spec quote it without the key it held."""
    return _USERINFO.sub(r"\1***@", text)


class ModelSpec(BaseModel):
    """One resolved model setting. ``origin`` says where it was set (for error messages only)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    backend: BackendName
    model: str = Field(min_length=1)
    base_url: str | None = None
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    concurrency: int = Field(default=0, ge=0, le=1024)  # 0 = the backend's default, filled in below
    context_tokens: int | None = Field(default=None, ge=256)
    timeout_s: float = Field(default=600.0, gt=0)
    startup_timeout_s: float = Field(default=900.0, gt=0)
    max_retries: int = Field(default=4, ge=0, le=20)
    fallback: str | None = None
    extra_args: tuple[str, ...] = ()
    extra_body: dict[str, Any] | None = None
    #: How the reply cap is sent to an OpenAI-compatible server: ``max_tokens``, or
    #: ``max_completion_tokens`` (which gpt-5* and o-series models require instead); ``auto`` picks
    #: by model name (see ``openai_compat.token_parameter``).
    token_param: Literal["auto", "max_tokens", "max_completion_tokens"] = "auto"
    #: ``local`` only — how the embedded server serves: parallel slots, llama.cpp's prompt cache, and
    #: a draft tier for speculative decoding ("fast", or "none"). None: ``$MEMPROBE_LOCAL_SLOTS`` /
    #: ``_PROMPT_CACHE`` / ``_DRAFT``, else the defaults. They change speed, not what is asked, so a
    #: recording's header names them only when set here.
    slots: int | None = Field(default=None, ge=1, le=64)
    prompt_cache: bool | None = None
    draft: str | None = None
    #: ``local`` only — a temperature-0 request runs alone and evaluates its whole prompt, so its
    #: answer does not depend on what else runs or ran (backends/local.py). None: the environment, else on.
    deterministic: bool | None = None
    origin: str | None = None

    @model_validator(mode="after")
    def _check(self) -> "ModelSpec":
        if self.backend == "local":
            object.__setattr__(self, "model", _local_tier(self.model))
        if self.fallback is not None:
            if self.backend != "replay":
                raise ValueError("only a replay spec can have a fallback")
            if parse_spec(self.fallback).backend == "replay":
                raise ValueError("a replay fallback must be a live backend, not another replay")
        if self.base_url is not None:
            urls = [url.strip() for url in self.base_url.split(",")]  # replicas: URL1,URL2,…
            for url in urls:
                _check_url(url)
        if self.backend != "local" and (self.slots, self.prompt_cache, self.draft, self.deterministic) != \
                (None, None, None, None):
            raise ValueError("slots, prompt_cache, draft and deterministic are settings of the embedded model "
                             "(local specs) only")
        if self.backend == "local":  # checked here so a bad setting stops a run before its recording exists
            local_draft_tier(self.draft, self.model)
            env_flag(PROMPT_CACHE_ENV, True)
            env_flag(DETERMINISTIC_ENV, True)
        if self.concurrency == 0:
            default = DEFAULT_CONCURRENCY[self.backend]
            if self.backend == "local":
                default = self.slots or local_slots_default()  # one request per slot keeps every slot busy
            if self.backend == "replay" and self.fallback is not None:
                default = parse_spec(self.fallback).concurrency  # misses go to the fallback: pace for it
            object.__setattr__(self, "concurrency", default)
        return self

    def context_budget(self) -> int:
        """Tokens one request may hold: ``context_tokens`` when set, else what the embedded server
        really gives a slot, else a hosted model's usual window. A store is checked against this
        before it is sent, so it must not promise more than the server holds."""
        if self.context_tokens is not None:
            return self.context_tokens
        return LOCAL_CONTEXT_TOKENS if self.backend == "local" else REMOTE_CONTEXT_TOKENS

    def spec_string(self) -> str:
        """The short form of this spec (fields a string cannot carry are left out)."""
        if self.backend == "openai" and self.base_url:
            return f"openai:{self.model}@{self.base_url}"
        if self.backend == "replay" and self.fallback:
            return f"replay:{self.model}|{self.fallback}"
        return f"{self.backend}:{self.model}"

    def identity_key(self) -> str:
        """Equal for specs that can share one backend instance: where a spec was set and the
        client-side pacing (concurrency, retries) do not count, so two roles on the same model never
        start two servers. The first spec seen sizes the shared concurrency limit."""
        fields = self.model_dump(mode="json", exclude={"origin", "concurrency", "max_retries"})
        return orjson.dumps(fields, option=orjson.OPT_SORT_KEYS).decode()

    def where(self) -> str:
        """``spec string`` plus where it was set, for messages that must name the setting to fix."""
        return f"{self.spec_string()}" + (f", set by {self.origin}" if self.origin else "")

    def resolved(self) -> dict[str, Any]:
        """JSON-safe description for a recording header: no secrets exist in a spec to leave out."""
        data = self.model_dump(mode="json", exclude_none=True, exclude_defaults=False)
        data["spec"] = self.spec_string()
        if not data.get("extra_args"):
            data.pop("extra_args", None)
        return data


def parse_spec(text: str, *, origin: str | None = None) -> ModelSpec:
    """Parse a spec string (see the module docstring). ConfigError names the string and valid forms."""
    raw = text.strip()
    try:
        if text != text.rstrip():  # a space before it is left by `ROLE = SPEC`; one after it is a slip
            raise _SpecSyntaxError("it ends in a space or line break (a stray quote or `\\ ` line continuation?): "
                                   "remove it")
        return ModelSpec(**_spec_fields(raw), origin=origin)
    except _SpecSyntaxError as err:
        raise ConfigError(_bad_spec_message(text, str(err), origin)) from None
    except ConfigError as err:
        raise ConfigError(_bad_spec_message(text, str(err), origin)) from None
    except ValidationError as err:
        raise ConfigError(_bad_spec_message(text, first_validation_problem(err), origin)) from None


def spec_from_table(table: dict[str, Any], *, origin: str) -> ModelSpec:
    """Build a spec from a config-file table: an optional ``spec = "..."`` string, then fields."""
    fields: dict[str, Any] = {}
    table = dict(table)
    if table.get("concurrency") == 0 and not isinstance(table["concurrency"], bool):
        # 0 is the model's "backend default" marker; written in a file it would read as "no request".
        raise ConfigError(f"{origin}: concurrency = 0 would let no request through: give 1 or more, or leave "
                          f"it out for the backend's default.")
    short = table.pop("spec", None)
    try:
        if short is not None:
            if not isinstance(short, str):
                raise _SpecSyntaxError("`spec` must be a string")
            if short != short.rstrip():
                raise _SpecSyntaxError(f"spec = {short!r} ends in a space or line break: remove it")
            fields = _spec_fields(short.strip())
        if "extra_args" in table and isinstance(table["extra_args"], list):
            table["extra_args"] = tuple(str(arg) for arg in table["extra_args"])
        fields.update(table)
        if fields.get("backend") == "local" and "model" not in fields:
            fields["model"] = DEFAULT_LOCAL_TIER
        return ModelSpec(**fields, origin=origin)
    except (_SpecSyntaxError, ConfigError) as err:
        raise ConfigError(redact_userinfo(f"{origin}: {err}. Valid spec strings: {VALID_FORMS}.")) from None
    except ValidationError as err:
        raise ConfigError(f"{origin}: {first_validation_problem(err)}. Fields: backend (one of "
                          f"{', '.join(BACKENDS)}), model, base_url, api_key_env, concurrency, "
                          f"context_tokens, timeout_s, startup_timeout_s, max_retries, fallback, "
                          f"extra_args, extra_body, token_param, slots, prompt_cache, draft, deterministic — or spec = "
                          f"\"...\".") from None
    except TypeError as err:  # e.g. a non-string key from an odd TOML table
        raise ConfigError(f"{origin}: {err}") from None


def first_validation_problem(err: ValidationError) -> str:
    """One readable line for the first problem pydantic found."""
    first = err.errors()[0]
    where = ".".join(str(part) for part in first["loc"])
    message = str(first["msg"]).removeprefix("Value error, ")
    return f"{where}: {message}" if where else message


class _SpecSyntaxError(ValueError):
    """Internal: a spec string that does not follow the grammar."""


def _spec_fields(raw: str) -> dict[str, Any]:
    """Split a spec string into ModelSpec fields, without validating field values."""
    if not raw:
        raise _SpecSyntaxError("it is empty")
    backend, sep, rest = raw.partition(":")
    backend = backend.strip().lower()
    if backend not in BACKENDS:
        raise _SpecSyntaxError(f"unknown backend {backend!r}")
    rest = rest.strip()
    if backend == "local":
        if sep and not rest:
            raise _SpecSyntaxError("no tier follows 'local:': write local (the 1.5b tier), local:1.5b or local:fast")
        return {"backend": "local", "model": rest or DEFAULT_LOCAL_TIER}
    if not sep or not rest:
        needed = "a recording directory" if backend == "replay" else "a model"
        raise _SpecSyntaxError(f"the {backend} backend needs {needed} after '{backend}:'")
    if backend == "openai":
        match = _URL_SUFFIX.search(rest)
        if match is not None:
            model = rest[:match.start()].strip()
            if not model:
                raise _SpecSyntaxError("the model name before '@' is empty")
            return {"backend": "openai", "model": model, "base_url": match.group(1).rstrip("/")}
        if "@" in rest:
            raise _SpecSyntaxError("the part after '@' must be a URL starting with http:// or https://")
        return {"backend": "openai", "model": rest}
    if backend == "vllm":
        return {"backend": "vllm", "model": rest}
    path, bar, fallback = rest.partition("|")
    if not path.strip():
        raise _SpecSyntaxError("the recording directory is empty")
    if bar and not fallback.strip():
        raise _SpecSyntaxError("nothing follows '|': name a fallback spec such as local:fast")
    return {"backend": "replay", "model": path.strip(), "fallback": fallback.strip() or None}


def _local_tier(name: str) -> str:
    """Canonical tier name for the embedded model (``0.5b`` and ``fast`` are one tier)."""
    from memprobe_engine.llm.model_assets import resolve_tier  # light module: no model is loaded
    return resolve_tier(name).name


def _check_url(url: str) -> None:
    """A base URL's host and port, checked here so a typo stops before any recording exists (a port
    out of range used to fail deep in the HTTP stack, as "unhandled errors in a TaskGroup")."""
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"base_url {redact_userinfo(url)!r} must start with http:// or https://")
    parts = urlsplit(url)
    if parts.username is not None or parts.password is not None:
        # Never quoted: the URL is written into recordings, terminals and reports, and this part is a key.
        raise ValueError("a base_url holds credentials (user:password@ before the host), which would be written "
                         "into the recording: remove them from the URL, put the key in an environment variable "
                         "and name it with api_key_env = \"VAR\" in the role's [models.ROLE] table of the config "
                         "file")
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"base_url {url!r} has an invalid port: give a number from 1 to 65535, "
                         f"e.g. http://127.0.0.1:8000/v1") from None
    if port == 0:
        raise ValueError(f"base_url {url!r} has port 0: give a number from 1 to 65535")
    if not parts.hostname:
        raise ValueError(f"base_url {url!r} names no host, e.g. http://127.0.0.1:8000/v1")


def _bad_spec_message(text: str, why: str, origin: str | None) -> str:
    where = f" (set by {origin})" if origin else ""
    return redact_userinfo(f"Model spec {text!r}{where} is not valid: {why.rstrip('.')}. Valid forms: {VALID_FORMS}.")


def local_slots_default() -> int:
    """``$MEMPROBE_LOCAL_SLOTS`` if set, else :data:`DEFAULT_LOCAL_SLOTS`."""
    configured = os.environ.get(SLOTS_ENV, "").strip()
    if not configured:
        return DEFAULT_LOCAL_SLOTS
    if not configured.isdigit() or not 1 <= int(configured) <= 64:
        raise ConfigError(f"{SLOTS_ENV}={configured!r} is not a number of slots from 1 to 64; set it to e.g. 1 "
                          f"or 4, or unset it for the default ({DEFAULT_LOCAL_SLOTS}).")
    return int(configured)


def local_draft_tier(spec_draft: str | None, tier: str) -> str | None:
    """The draft tier for a local ``tier``: the spec's ``draft``, else ``$MEMPROBE_LOCAL_DRAFT``, else
    none. Raises ConfigError naming the setting when it is not a tier, or is the tier itself."""
    where = "the spec's draft field" if spec_draft is not None else f"${DRAFT_ENV}"
    setting = spec_draft if spec_draft is not None else os.environ.get(DRAFT_ENV, "").strip()
    if setting.lower() in ("", "none", "off", "0"):
        return None
    try:
        draft = _local_tier(setting)
    except ConfigError:
        raise ConfigError(f"{where} = {setting!r} is not an embedded model tier; set it to \"fast\" (the 0.5B "
                          f"drafting for the 1.5B) or \"none\".") from None
    if draft == tier:
        raise ConfigError(f"local:{tier} cannot draft for itself ({where} = {setting!r}); use \"fast\" for the "
                          f"1.5b tier, or \"none\".")
    return draft


def env_flag(name: str, default: bool) -> bool:
    """A yes/no environment setting (1/0, on/off, true/false, yes/no); unset means ``default``."""
    configured = os.environ.get(name, "").strip().lower()
    if not configured:
        return default
    if configured in ("1", "on", "true", "yes"):
        return True
    if configured in ("0", "off", "false", "no"):
        return False
    raise ConfigError(f"{name}={configured!r} is not on or off; set it to 1 or 0, or unset it.")
