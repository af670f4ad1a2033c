"""How ``memprobe run`` reads a list flag (``--users a,b``, ``--systems …``, ``--shard I/N``), shared by
every protocol's options so an empty value or a repeated name is refused the same way everywhere; and
the ``--record`` folder check that every recording command (``run``, ``proxy``) makes."""

from __future__ import annotations

import os
from pathlib import Path

from memprobe_engine.errors import ConfigError


def csv_names(value: str | None, flag: str) -> list[str] | None:
    """A comma-separated flag value: None (every one) for ``all`` or no flag. An empty value — often an
    unset shell variable, ``--users "$USERS"`` — is refused rather than read as every one."""
    if value is None or value.strip() == "all":
        return None
    names = [part.strip() for part in value.split(",") if part.strip()]
    if not names:
        raise ConfigError(f"{flag} {value!r} names nothing (an unset shell variable?): give comma-separated names, "
                          f"or {flag} all (the same as leaving the flag out).")
    return unique(flag, names)


def unique(flag: str, names: list[str]) -> list[str]:
    """``names`` when each appears once; a name given twice would run its units twice."""
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        once = ",".join(dict.fromkeys(names))
        raise ConfigError(f"{flag} names {', '.join(repeated)} more than once; each runs once: {flag} {once}")
    return names


def system_names(value: str) -> list[str]:
    """``--systems``: at least one name; an empty list (``--systems ,``) is an error, not nomem."""
    names = [part.strip() for part in value.split(",") if part.strip()]
    if not names:
        raise ConfigError(f"--systems {value!r} names no memory system. Pass one or more comma-separated names, "
                          f"e.g. --systems nomem,longctx_full (memprobe systems list shows them).")
    return unique("--systems", names)


def shard(value: str | None) -> tuple[int, int]:
    """``--shard I/N``; without it, a Slurm array task's shard, else the whole run (0/1)."""
    if value is None:
        from memprobe_engine.orchestration.units import shard_from_env

        return shard_from_env(os.environ) or (0, 1)
    try:
        index, total = (int(x) for x in value.split("/"))
    except ValueError:
        raise ConfigError(f"--shard {value!r}: expected I/N with 0 <= I < N, e.g. --shard 0/4.") from None
    if not 0 <= index < total:
        raise ConfigError(f"--shard {value!r}: I must satisfy 0 <= I < N.")
    return index, total


def check_record_folder(record: Path) -> None:
    """``--record ''`` (an unset shell variable) arrives as the current folder, and the recording's files
    would land among the user's own: refused unless the current folder is itself a recording (a resume)."""
    if str(record) == "." and not (Path.cwd() / "header.json").is_file():
        raise ConfigError(f"--record {str(record)!r} names the current folder ({Path.cwd()}), which is not a "
                          f"recording (an empty --record, e.g. an unset shell variable, means the same): name a "
                          f"new folder, e.g. --record recordings/run1.")
