"""``header.json``: what a recording is — run id, schema version, resolved configuration."""

from __future__ import annotations

import platform
import time
from collections.abc import Callable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

import orjson
from pydantic import BaseModel, PrivateAttr, ValidationError

from memprobe_engine.errors import RecordingError
from memprobe_engine.events.base import SCHEMA_VERSION
from memprobe_engine.events.upgrade import READABLE_VERSIONS

HEADER_FILE = "header.json"
EVENTS_FILE = "events.jsonl"
FORMAT_NAME = "memprobe-recording"

#: Versions the header's ``packages`` names when installed: MemProbe, its format libraries, the model
#: runtimes and the memory libraries whose behaviour a run depends on.
_REPORTED_PACKAGES = ("memprobe", "pydantic", "orjson", "openai", "xllamacpp", "llama-cpp-python", "vllm",
                      "sentence-transformers", "transformers", "torch", "numpy", "pandas", "textual",
                      "mem0ai", "graphiti-core", "langmem", "cognee", "kuzu", "litellm")


_TypedT = TypeVar("_TypedT", bound=BaseModel)


class Provenance(BaseModel):
    """What produced a recording (``memprobe_engine/provenance.py`` collects it; docs list each field)."""

    memprobe: dict[str, Any] = {}
    inputs: dict[str, str] = {}
    prompts: dict[str, str] = {}
    models: dict[str, dict[str, Any]] = {}


class RecordingHeader(BaseModel):
    """The resolved configuration of a run. API keys never appear here: specs hold env var names.
    ``provenance`` is None in recordings made before it existed (they open as before)."""

    format: str = FORMAT_NAME
    schema_version: int = SCHEMA_VERSION
    run_id: str
    suite: str
    created: float
    config: dict[str, Any] = {}
    packages: dict[str, str] = {}
    python: str = ""
    provenance: Provenance | None = None
    #: The typed views of ``config`` read so far (``events/header_config.py``), by model, each with the
    #: config dict it was read from (a copy with another config reads afresh).
    _typed: dict[type[BaseModel], tuple[object, BaseModel]] = PrivateAttr(default_factory=dict)

    def typed_config(self, model: type[_TypedT], read: Callable[[Mapping[str, object]], _TypedT]) -> _TypedT:
        """``read(config)``, once per model while ``config`` stays the same dict (``HeaderConfig.of``)."""
        cached = self._typed.get(model)
        if cached is not None and cached[0] is self.config and isinstance(cached[1], model):
            return cached[1]
        typed = read(self.config)
        self._typed = {**self._typed, model: (self.config, typed)}
        return typed


def package_versions() -> dict[str, str]:
    found: dict[str, str] = {}
    for name in _REPORTED_PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def new_header(run_id: str, suite: str, config: dict[str, Any],
               provenance: dict[str, Any] | None = None) -> RecordingHeader:
    """A new run's header; ``provenance`` is ``provenance.collect_provenance(config)`` (the caller's,
    since collecting it reads producers' sources, which the recording format must not import)."""
    return RecordingHeader(run_id=run_id, suite=suite, created=time.time(), config=config,
                           packages=package_versions(), python=platform.python_version(),
                           provenance=Provenance.model_validate(provenance) if provenance is not None else None)


def write_header(directory: Path, header: RecordingHeader) -> None:
    tmp = directory / (HEADER_FILE + ".tmp")
    tmp.write_bytes(orjson.dumps(header.model_dump(), option=orjson.OPT_INDENT_2))
    tmp.replace(directory / HEADER_FILE)


#: What to do about a damaged header: it is written once, when the recording is created, and never again.
_DAMAGED = ("the recording header is damaged. Restore header.json from a copy of this recording (it is "
            "written once, when the run starts), or run the command again into a new --record folder.")


def read_header(directory: Path) -> RecordingHeader:
    """Read and validate ``header.json``; every failure names the path and what is expected."""
    path = directory / HEADER_FILE
    if not directory.exists():
        raise RecordingError(f"{directory}: no such recording directory. Pass the folder a run wrote "
                             f"(it holds {HEADER_FILE} and {EVENTS_FILE}).")
    if not directory.is_dir():
        raise RecordingError(f"{directory} is a file, not a recording. A recording is a folder holding "
                             f"{HEADER_FILE} and {EVENTS_FILE}; pass that folder.")
    if not path.exists():
        raise RecordingError(f"{directory} is not a MemProbe recording: {HEADER_FILE} is missing. "
                             f"Pass a folder written by `memprobe run` or `memprobe llm ask --record`.")
    if not path.is_file():  # a FIFO or device would block the read for ever
        raise RecordingError(f"{path} is not a regular file (a folder, pipe or device), so it is no recording "
                             f"header: pass a folder written by `memprobe run`.")
    try:
        raw = orjson.loads(path.read_bytes())
    except OSError as err:
        raise RecordingError(f"{path} cannot be read ({err.strerror}).") from None
    except orjson.JSONDecodeError as err:
        raise RecordingError(f"{path} is not valid JSON ({err}); {_DAMAGED}") from None
    if not isinstance(raw, dict) or raw.get("format") != FORMAT_NAME:
        raise RecordingError(f"{path} is not a MemProbe recording header (expected \"format\": "
                             f"\"{FORMAT_NAME}\").")
    version = raw.get("schema_version")
    if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
        raise RecordingError(f"{path} has schema version {version!r}; this MemProbe reads up to "
                             f"{SCHEMA_VERSION}. Upgrade MemProbe to read it.")
    if not isinstance(version, int) or isinstance(version, bool) or version not in READABLE_VERSIONS:
        raise RecordingError(f"{path}: schema_version {version!r} is not a recording schema version "
                             f"(this MemProbe reads {', '.join(map(str, sorted(READABLE_VERSIONS)))}); "
                             f"{_DAMAGED}")
    try:
        return RecordingHeader.model_validate(raw)
    except (ValidationError, ValueError, RecursionError) as err:
        if not isinstance(err, ValidationError):
            raise RecordingError(f"{path}: invalid header ({type(err).__name__}); {_DAMAGED}") from None
        raise RecordingError(f"{path}: invalid header: {err.errors()[0]['msg']} at "
                             f"{'.'.join(map(str, err.errors()[0]['loc']))}") from None
