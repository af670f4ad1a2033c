"""One release run (and its ``_retrieve`` twin) → one MemProbe recording, in a worker process.

The recording is laid out exactly like one written by ``memprobe run``: header (suite recovery,
``config.source`` "release-a", the release run, the imported sessions), ``run_start``, span ``run``
→ per user a ``unit`` span whose ``attrs.inputs_ref`` holds the unit inputs → rollout
(:mod:`.rollout`) and recovery (:mod:`.scores`), then ``run_end``. Each event that
comes from a release file names that file in its enclosing span's attrs (``source`` …), since event
models forbid extra fields. A worker never raises: what it could not import is in its problem log.
"""

from __future__ import annotations

import shutil
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memprobe_engine.events.header import HEADER_FILE, new_header
from memprobe_engine.events.writer import open_writer
from memprobe_engine.imports.emitter import DictEmitter
from memprobe_engine.imports.problems import ProblemLog
from memprobe_engine.recovery.release.files import Release
from memprobe_engine.recovery.release.scores import (
    ModeFiles,
    RecoveryStats,
    check_aggregates,
    emit_recovery,
    load_mode,
)
from memprobe_engine.recovery.release.rollout import RolloutStats, emit_rollout
from memprobe_engine.recovery.release.sessions import ImportedUser
from memprobe_engine.provenance import collect_provenance
from memprobe_engine.recovery.provenance_inputs import input_hashes


@dataclass
class RunJob:
    """Everything a worker needs; plain data so it pickles to another process."""

    release: Path
    run: str
    system: str
    retrieve_run: str | None
    record: Path
    sessions: Path
    users: list[ImportedUser]
    pool: dict[str, dict[str, Any]]

    @property
    def modes(self) -> list[str]:
        return ["dump_all", "retrieve"] if self.retrieve_run else ["dump_all"]


@dataclass
class RunOutcome:
    """What one run import wrote, and its problems as plain dicts."""

    run: str
    system: str
    record: str
    modes: list[str]
    users: int = 0
    episodes: int = 0
    turns: int = 0
    messages: int = 0
    memory_items: int = 0
    scores: dict[str, int] = field(default_factory=dict)
    labels: dict[str, int] = field(default_factory=dict)
    unmatched_retrieved: int = 0
    events: int = 0
    wall_s: float = 0.0
    problems: list[dict[str, Any]] = field(default_factory=list)


def clear_recording(record: Path) -> None:
    """Remove an earlier import's recording at ``record``; refuse to delete anything else."""
    if not record.exists():
        return
    if not (record / HEADER_FILE).exists() and any(record.iterdir()):
        raise FileExistsError(f"{record} exists and is not a recording; choose another --out folder")
    shutil.rmtree(record)


def import_run(job: RunJob) -> RunOutcome:
    """Write the recording of one run; every problem is logged, nothing raised."""
    started = time.monotonic()
    log = ProblemLog(run=job.run)
    outcome = RunOutcome(run=job.run, system=job.system, record=str(job.record), modes=job.modes)
    release = Release(job.release)
    reports = release.run_reports(job.run) + (release.run_reports(job.retrieve_run) if job.retrieve_run else [])
    config = {"suite": "recovery", "source": "release-a", "release_run": job.run,
              "release_retrieve_run": job.retrieve_run, "release": str(job.release), "sessions": str(job.sessions),
              "users": [u.user_id for u in job.users], "dimensions": None, "systems": [job.system],
              "modes": job.modes, "k": 5, "max_turns": 25, "release_reports": reports}
    try:
        clear_recording(job.record)
        writer = open_writer(job.record, new_header(f"release-a-{job.run}", "recovery", config,
                                                      collect_provenance(config, inputs=input_hashes(config), own_prompts=False)))
    except (OSError, ValueError) as err:
        log.add("error", f"history/{job.run}/", f"cannot write the recording {job.record}: {err}")
        outcome.problems = log.as_dicts()
        return outcome
    em = DictEmitter(writer)
    rollout, recovery = RolloutStats(), RecoveryStats()
    aggregates: dict[tuple[str, str], dict[str, Any]] = {}
    status, reason = "failed", None
    try:
        em.emit("run_start", run_id=writer.header.run_id, suite="recovery", resumed=False,
                note=f"imported from release run {job.run}" + (f" and {job.retrieve_run}" if job.retrieve_run else ""))
        with em.span("run", "run"):
            for user in job.users:
                if not _has_data(release, job, user.user_id):
                    log.add("warning", f"history/{job.run}/{user.user_id}/", "the run has no files for this user; "
                                                                             "not imported", user_id=user.user_id)
                    continue
                try:
                    for files in _unit(em, release, job, user, log, rollout, recovery):
                        aggregates[(files.mode, user.user_id)] = files.aggregates or {}
                except Exception as err:  # unexpected content: this unit closes with an error, the rest go on
                    log.add("error", f"history/{job.run}/{user.user_id}/", f"the import of this user stopped "
                                                                           f"({type(err).__name__}: {err}); the unit "
                                                                           f"span is closed with an error",
                            user_id=user.user_id)
                    continue
                outcome.users += 1
        _check_reports(release, job, reports, aggregates, log)
        _unknown_users(release, job, log)
        status = "completed"
        reason = f"imported with {len(log.items)} problem(s); see import-report.json" if log.items else None
    except Exception as err:  # a bug or an I/O failure: keep what was written, say what stopped it
        reason = f"{type(err).__name__}: {err}"
        log.add("error", f"history/{job.run}/", f"the import of this run stopped: {reason}")
    finally:
        em.emit("run_end", status=status, reason=reason)
        writer.close()
    outcome.episodes, outcome.turns, outcome.messages = rollout.episodes, rollout.turns, rollout.messages
    outcome.memory_items = rollout.memory_items
    outcome.scores, outcome.labels = dict(recovery.scores), dict(recovery.labels)
    outcome.unmatched_retrieved, outcome.events = recovery.unmatched_retrieved, em.events
    outcome.wall_s = time.monotonic() - started
    outcome.problems = log.as_dicts()
    return outcome


def _unknown_users(release: Release, job: RunJob, log: ProblemLog) -> None:
    """Warn about user folders of the run that the bank file does not know (no inputs to import them with)."""
    known = {u.user_id for u in job.users}
    folder = release.root / "history" / job.run
    for path in sorted(folder.iterdir()) if folder.is_dir() else []:
        if path.is_dir() and path.name not in known:
            log.add("warning", f"history/{job.run}/{path.name}/", "this user is not in the bank file; not imported",
                    user_id=path.name)


def _has_data(release: Release, job: RunJob, uid: str) -> bool:
    paths = [f"history/{job.run}/{uid}", Release.memories(job.run, uid), Release.recon(job.run, uid)]
    if job.retrieve_run:
        paths.append(Release.recon(job.retrieve_run, uid))
    return any(release.exists(p) for p in paths)


def _unit(em: DictEmitter, release: Release, job: RunJob, user: ImportedUser, log: ProblemLog,
          rollout: RolloutStats, recovery: RecoveryStats) -> list[ModeFiles]:
    uid = user.user_id
    inputs = user.unit_inputs(job.pool)
    with em.span(f"{uid} × {job.system}", "unit", user_id=uid, system=job.system, tasks=len(inputs["tasks"]),
                 inputs_ref=em.put_payload(inputs)):
        store = emit_rollout(em, release, job.run, user, log, rollout)
        modes = [load_mode(release, job.run, "dump_all", user, log)]
        if job.retrieve_run:
            modes.append(load_mode(release, job.retrieve_run, "retrieve", user, log))
        for files in modes:
            check_aggregates(files, user, log)
        oracle = release.read(Release.oracle(uid), log, user_id=uid, missing=None)
        emit_recovery(em, user, modes, store, oracle, log, recovery)
    return modes


def _check_reports(release: Release, job: RunJob, reports: list[str],
                   aggregates: dict[tuple[str, str], dict[str, Any]], log: ProblemLog) -> None:
    """Warn where a run report's ``per_user`` reconstruction disagrees with the recon_judge files."""
    for rel in reports:
        data = release.read(rel, log)
        rows = data.get("per_user") if data is not None else None
        mode = "retrieve" if job.retrieve_run and rel.startswith(f"output/{job.retrieve_run}/") else "dump_all"
        mismatched = Counter[str]()
        for row in rows if isinstance(rows, list) else []:
            uid = row.get("user_id") if isinstance(row, dict) else None
            stated = aggregates.get((mode, str(uid)))
            recon = row.get("reconstruction") if isinstance(row, dict) else None
            if not stated or not isinstance(recon, dict):
                continue
            expected = {**(stated.get("per_category") or {}), "overall": stated.get("overall")}
            if any(recon.get(k) != v for k, v in expected.items()):
                mismatched[str(uid)] += 1
        if mismatched:
            log.add("warning", rel, f"per_user reconstruction differs from recon_judge for "
                                    f"{', '.join(sorted(mismatched))}")
