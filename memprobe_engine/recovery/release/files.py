"""Where things live in a protocol-A public release, and reading them without ever raising.

The layout is the release's own (see the release README)::

    Deeppersona/data/user_memory_banks_pooled_final.json    personas and hidden banks
    Deeppersona/data/dimension_pool.json                    taxonomy pool (no per-category core dims)
    benchmark_data/CustomTasksPooledFinal/user_XXX.json     31 tasks per user
    history/<run>/user_XXX/episode_N.json                   transcripts, N = 1..31 in task order
    pref_judge/<run>/user_XXX/episode_N.json                per-turn preference judge
    memory/<run>/user_XXX/memories.json                     the final memory store
    output/<run>[_retrieve]/{recon_judge,attribution}/user_XXX.json
    output/<run>[_retrieve]/*.json                          run reports (``per_user`` rows)
    output/_task_design_oracle/user_XXX.json                stage-0 verdicts per (user, dimension)

Every read goes through :meth:`Release.read`, which returns ``None`` after logging why a file was
missing, malformed or of the wrong shape — one bad file costs only its own content.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from memprobe_engine.imports.problems import Level, ProblemLog

BANK_FILE = "Deeppersona/data/user_memory_banks_pooled_final.json"
POOL_FILE = "Deeppersona/data/dimension_pool.json"
TASKS_DIR = "benchmark_data/CustomTasksPooledFinal"
ORACLE_DIR = "output/_task_design_oracle"
RUN_ROOTS = ("history", "pref_judge", "memory", "output")
RETRIEVE_SUFFIX = "_retrieve"
#: The runs the release README promises, in the paper's table order.
EXPECTED_RUNS = ("nomem_pooled_50", "amem_pooled_50", "longctx_full_pooled_50", "mem0_pooled_50",
                 "memt_memonly_pooled_50")
#: Release system names that differ from MemProbe's built-in system names.
SYSTEM_ALIASES = {"memt_memonly": "memt"}
_POOLED = re.compile(r"_pooled_\d+$")
_EPISODE = re.compile(r"^episode_(\d+)\.json$")


def system_of(run: str) -> str:
    """``memt_memonly_pooled_50`` → ``memt``: the run name without its pooling suffix, aliased."""
    base = _POOLED.sub("", run)
    return SYSTEM_ALIASES.get(base, base)


@dataclass(frozen=True)
class Release:
    """A release directory; every path helper returns a path relative to ``root``."""

    root: Path

    def read(self, rel: str, log: ProblemLog, *, user_id: str | None = None, expect: type = dict,
             missing: Level | None = "error") -> Any:
        """Parsed JSON of ``rel``, or None after logging why not (``missing=None``: absence is silent)."""
        try:
            data = orjson.loads((self.root / rel).read_bytes())
        except FileNotFoundError:
            if missing is not None:
                log.add(missing, rel, "file is missing; its content is not imported", user_id=user_id)
            return None
        except orjson.JSONDecodeError as err:
            log.add("error", rel, f"malformed JSON ({err}); its content is not imported", user_id=user_id)
            return None
        except OSError as err:
            log.add("error", rel, f"cannot read the file ({err}); its content is not imported", user_id=user_id)
            return None
        if not isinstance(data, expect):
            log.add("error", rel, f"expected a JSON {expect.__name__}, found {type(data).__name__}; its content "
                                  f"is not imported", user_id=user_id)
            return None
        return data

    def exists(self, rel: str) -> bool:
        return (self.root / rel).exists()

    def runs(self) -> list[str]:
        """The expected runs plus any other run folder found, without ``_retrieve`` twins."""
        found: set[str] = set()
        for top in RUN_ROOTS:
            folder = self.root / top
            if folder.is_dir():
                found.update(p.name.removesuffix(RETRIEVE_SUFFIX) for p in folder.iterdir()
                             if p.is_dir() and not p.name.startswith(("_", ".")))
        return list(EXPECTED_RUNS) + sorted(found - set(EXPECTED_RUNS))

    def run_present(self, run: str) -> bool:
        return any((self.root / top / run).is_dir() for top in RUN_ROOTS)

    def episodes(self, run: str, user_id: str) -> list[int]:
        """Episode numbers present in ``history/<run>/<user>/``, ascending."""
        folder = self.root / "history" / run / user_id
        if not folder.is_dir():
            return []
        return sorted(int(m.group(1)) for p in folder.iterdir() if (m := _EPISODE.match(p.name)))

    def run_reports(self, output_run: str) -> list[str]:
        """The run-level report files of ``output/<output_run>/``, sorted by name."""
        folder = self.root / "output" / output_run
        return sorted(f"output/{output_run}/{p.name}" for p in folder.glob("*.json")) if folder.is_dir() else []

    @staticmethod
    def history(run: str, user_id: str, n: int) -> str:
        return f"history/{run}/{user_id}/episode_{n}.json"

    @staticmethod
    def pref_judge(run: str, user_id: str, n: int) -> str:
        return f"pref_judge/{run}/{user_id}/episode_{n}.json"

    @staticmethod
    def memories(run: str, user_id: str) -> str:
        return f"memory/{run}/{user_id}/memories.json"

    @staticmethod
    def recon(output_run: str, user_id: str) -> str:
        return f"output/{output_run}/recon_judge/{user_id}.json"

    @staticmethod
    def attribution(output_run: str, user_id: str) -> str:
        return f"output/{output_run}/attribution/{user_id}.json"

    @staticmethod
    def oracle(user_id: str) -> str:
        return f"{ORACLE_DIR}/{user_id}.json"

    @staticmethod
    def tasks(user_id: str) -> str:
        return f"{TASKS_DIR}/{user_id}.json"
