"""Finding a memory system by name: built-ins, ``package.module:ClassName`` paths and plug-ins.

Built-ins are listed as lazy ``module:Class`` strings, so a system whose module ships later (amem,
mem0, memt) is added here by name without importing anything until it is asked for. A user's own
system plugs in without editing the project, either by import path (``--system
mypkg.memory:MyMemory``) or by an entry point in the group ``memprobe.memory_systems``. Every class
is checked against the :class:`~memprobe_engine.memory.base.MemorySystem` protocol before use, and
every failure is a :class:`ConfigError` saying what is wrong and how to fix it.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
from importlib import metadata
from typing import TYPE_CHECKING, NamedTuple, cast

from memprobe_engine.errors import ConfigError
from memprobe_engine.memory.base import MemoryServices, MemorySystem, SystemNeeds, needs_of

if TYPE_CHECKING:  # the adapters import their libraries' glue: for the type only
    from memprobe_engine.memory.adapters.base import LibraryAdapter

ENTRY_POINT_GROUP = "memprobe.memory_systems"
DOCS = "docs/memory-systems.md"

#: Built-in system name -> ``module:Class``, imported only when the system is used or listed.
BUILTIN_SYSTEMS: dict[str, str] = {
    "nomem": "memprobe_engine.memory.nomem:NoMemory",
    "longctx_full": "memprobe_engine.memory.longctx_full:LongContextFull",
    "amem": "memprobe_engine.memory.amem:AMem",
    "mem0": "memprobe_engine.memory.mem0:Mem0",
    "memt": "memprobe_engine.memory.memt:MemT",
    "memoryos": "memprobe_engine.memory.memoryos:MemoryOS",
}

#: Adapters over third-party libraries (optional extras): name -> ``module:Class``.
ADAPTER_SYSTEMS: dict[str, str] = {
    "mem0ai": "memprobe_engine.memory.adapters.mem0ai:Mem0AI",
    "graphiti": "memprobe_engine.memory.adapters.graphiti:Graphiti",
    "langmem": "memprobe_engine.memory.adapters.langmem:LangMem",
    "cognee": "memprobe_engine.memory.adapters.cognee:Cognee",
}

_ASYNC_METHODS = {
    "reset": "async def reset(self, user_id: str) -> None",
    "observe": "async def observe(self, observation: Observation) -> None",
    "search": "async def search(self, query: str, k: int) -> list[ScoredItem]",
}
_SYNC_METHODS = {
    "dump": "def dump(self) -> list[dict[str, Any]]",
    "footprint": "def footprint(self) -> Footprint",
}


class SystemInfo(NamedTuple):
    """One row of :func:`list_systems`: how to name the system, what it does, where it comes from.

    ``kind`` is ``built-in``, ``adapter`` (a third-party library behind an optional extra) or
    ``plug-in``; ``version`` the library's or plug-in's installed version; ``unavailable`` says why
    the system cannot run here (None when it can)."""

    name: str
    description: str
    origin: str
    kind: str = "built-in"
    version: str | None = None
    unavailable: str | None = None


class SystemUnavailable(ConfigError):
    """A built-in system whose module this version of MemProbe does not ship."""


def load_system_class(name_or_path: str) -> type[MemorySystem]:
    """The class for a built-in name, a ``package.module:ClassName`` path or a plug-in's name."""
    if name_or_path in BUILTIN_SYSTEMS:
        return _import_builtin(name_or_path)
    if name_or_path in ADAPTER_SYSTEMS:
        return _import_adapter(name_or_path)
    if ":" in name_or_path:
        return validate_system_class(_import_path(name_or_path), name_or_path)
    plugins = _entry_points()
    if name_or_path in plugins:
        return validate_system_class(_load_entry_point(plugins[name_or_path]), name_or_path)
    hint = (f" Did you mean '{name_or_path.rsplit('.', 1)[0]}:{name_or_path.rsplit('.', 1)[1]}'? "
            f"Separate the module from the class with a colon.") if "." in name_or_path else ""
    known = ", ".join(sorted(BUILTIN_SYSTEMS) + sorted(ADAPTER_SYSTEMS) + sorted(set(plugins) - set(BUILTIN_SYSTEMS)))
    raise ConfigError(f"unknown memory system '{name_or_path}'.{hint} Known systems: {known}. Pass one of "
                      f"these, an import path such as 'mypkg.memory:MyMemory', or install a plug-in that "
                      f"registers an entry point in the group '{ENTRY_POINT_GROUP}' (see {DOCS}).")


def system_needs(name_or_path: str) -> SystemNeeds:
    """What the named system declares it needs from a run (an embedder, model roles); loads the class,
    so a bad name fails here, before any model call."""
    return needs_of(load_system_class(name_or_path))


def create_system(name_or_path: str, services: MemoryServices) -> MemorySystem:
    """Load the class (see :func:`load_system_class`) and construct it with the engine's services."""
    return load_system_class(name_or_path)(services)  # type: ignore[call-arg]


def list_systems() -> list[SystemInfo]:
    """Built-ins this version ships, then installed plug-ins; a plug-in that fails to load is
    listed with the reason instead of its description, so a broken install is visible."""
    rows: list[SystemInfo] = []
    for name in BUILTIN_SYSTEMS:
        try:
            cls = _import_builtin(name)
        except SystemUnavailable:
            continue
        rows.append(SystemInfo(name, cls.description, "built-in"))
    for name in ADAPTER_SYSTEMS:
        rows.append(_adapter_row(name))
    for name, entry in sorted(_entry_points().items()):
        dist = entry.dist
        origin = f"plug-in {entry.value}" + (f" ({dist.name} {dist.version})" if dist is not None else "")
        if name in BUILTIN_SYSTEMS:
            rows.append(SystemInfo(entry.value, f"plug-in named '{name}', shadowed by the built-in of that "
                                                f"name; select it by this import path", origin, "plug-in",
                                   dist.version if dist is not None else None))
            continue
        unavailable = None
        try:
            description = validate_system_class(_load_entry_point(entry), name).description
        except ConfigError as err:
            description = f"cannot be loaded: {err}"
            unavailable = str(err)
        rows.append(SystemInfo(name, description, origin, "plug-in", dist.version if dist is not None else None,
                               unavailable))
    return rows


def _adapter_module(name: str) -> tuple[str, str]:
    module_name, _, class_name = ADAPTER_SYSTEMS[name].partition(":")
    return module_name, class_name


def _adapter_row(name: str) -> SystemInfo:
    """An adapter's row without importing its library: the adapter module names the distribution."""
    module_name, class_name = _adapter_module(name)
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except ModuleNotFoundError:
        return SystemInfo(name, "(adapter not shipped in this version)", "adapter", "adapter", None,
                          "this version of MemProbe does not ship the adapter")
    version = _adapter_version(cls)
    reason = None if version is not None else cls.unavailable_reason()
    return SystemInfo(name, cls.description, f"adapter over {cls.distribution}", "adapter", version, reason)


def _installed_version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def _adapter_version(cls: type[LibraryAdapter]) -> str | None:
    """The library's version: the adapter's own ``installed_version()`` where its library lives
    outside this environment (cognee's venv), else the distribution's metadata here."""
    own = getattr(cls, "installed_version", None)
    return own() if callable(own) else _installed_version(cls.distribution)


def _import_adapter(name: str) -> type[MemorySystem]:
    """The adapter class; a ConfigError saying which extra to install when its library is missing."""
    module_name, class_name = _adapter_module(name)
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except ModuleNotFoundError as err:
        if _is_module_or_parent(err.name, module_name):
            raise SystemUnavailable(f"system '{name}' is not available in this version of MemProbe.") from None
        raise
    if _adapter_version(cls) is None:
        raise ConfigError(f"system '{name}' runs the {cls.distribution} library, which is not installed: "
                          f"{cls.unavailable_reason()}")
    return validate_system_class(cls, name)


def validate_system_class(obj: object, origin: str) -> type[MemorySystem]:
    """Return ``obj`` if it is a class satisfying the protocol; otherwise one ConfigError listing
    everything missing, each with the signature to add."""
    if not inspect.isclass(obj):
        raise ConfigError(f"memory system '{origin}' is a {type(obj).__name__}, not a class. Point it at "
                          f"the class itself, e.g. 'mypkg.memory:MyMemory' (see {DOCS}).")
    problems: list[str] = []
    for attr in ("name", "description"):
        value = getattr(obj, attr, None)
        if not isinstance(value, str) or not value.strip():
            problems.append(f"class attribute `{attr}` (a non-empty str, e.g. {attr}: ClassVar[str] = \"...\")")
    for method, signature in {**_ASYNC_METHODS, **_SYNC_METHODS}.items():
        function = getattr(obj, method, None)
        if not callable(function):
            problems.append(f"method `{method}` ({signature})")
        elif (method in _ASYNC_METHODS) != inspect.iscoroutinefunction(function):
            problems.append(f"method `{method}` must be written as `{signature}`")
    try:
        inspect.signature(obj).bind(object())
    except TypeError:
        problems.append("a constructor taking one argument, the MemoryServices "
                        "(def __init__(self, services: MemoryServices) -> None)")
    except ValueError:
        pass  # no introspectable signature (a C-implemented class): the call itself will tell
    if problems:
        raise ConfigError(f"memory system '{origin}' ({obj.__module__}.{obj.__qualname__}) does not implement "
                          f"the MemorySystem protocol; it is missing: " + "; ".join(problems) +
                          f". Add these to the class (see {DOCS}).")
    return cast("type[MemorySystem]", obj)


def _import_builtin(name: str) -> type[MemorySystem]:
    module_name, _, class_name = BUILTIN_SYSTEMS[name].partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        if _is_module_or_parent(err.name, module_name):
            raise SystemUnavailable(f"system '{name}' is not available in this version of MemProbe. "
                                    f"Choose one of: {', '.join(_available_builtins())}.") from None
        raise ConfigError(f"system '{name}' needs the Python package '{err.name}', which is not installed. "
                          f"Install it (pip install {err.name}, or the extra that provides it).") from None
    return validate_system_class(getattr(module, class_name), name)


def _available_builtins() -> list[str]:
    """Built-in names whose modules exist, found without importing them."""
    found = []
    for name, path in BUILTIN_SYSTEMS.items():
        if importlib.util.find_spec(path.partition(":")[0]) is not None:
            found.append(name)
    return found


def _import_path(path: str) -> object:
    """Import ``package.module:ClassName``; the working directory is importable, as with ``python -m``."""
    module_name, _, attr_path = path.partition(":")
    if not module_name or not attr_path:
        raise ConfigError(f"memory system path '{path}' must look like 'package.module:ClassName'.")
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        if not _is_module_or_parent(err.name, module_name):
            raise ConfigError(f"module '{module_name}' (memory system '{path}') imports '{err.name}', which is "
                              f"not installed. Install it in this environment.") from None
        raise ConfigError(f"cannot import module '{module_name}' for memory system '{path}': {err}. Install "
                          f"the package that provides it, or run from the folder that contains "
                          f"'{module_name.split('.')[0]}'.") from None
    except Exception as err:
        raise ConfigError(f"importing module '{module_name}' for memory system '{path}' failed: "
                          f"{type(err).__name__}: {err}. Fix the error in that module.") from err
    obj: object = module
    for part in attr_path.split("."):
        if not hasattr(obj, part):
            raise ConfigError(f"module '{module_name}' has no attribute '{attr_path}' (memory system "
                              f"'{path}'). Check the class name after the colon.")
        obj = getattr(obj, part)
    return obj


def _is_module_or_parent(missing: str | None, module_name: str) -> bool:
    """Whether a ModuleNotFoundError for ``missing`` means ``module_name`` itself does not exist."""
    return missing is not None and (module_name == missing or module_name.startswith(missing + "."))


def _entry_points() -> dict[str, metadata.EntryPoint]:
    return {entry.name: entry for entry in metadata.entry_points(group=ENTRY_POINT_GROUP)}


def _load_entry_point(entry: metadata.EntryPoint) -> object:
    try:
        return entry.load()
    except Exception as err:
        raise ConfigError(f"the plug-in memory system '{entry.name}' ({entry.value}, entry point group "
                          f"'{ENTRY_POINT_GROUP}') failed to load: {type(err).__name__}: {err}. Reinstall "
                          f"or fix the package that provides it.") from err
