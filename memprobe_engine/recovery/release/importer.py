"""Import a protocol-A public release ("release A") into MemProbe sessions and recordings.

``import_release_a(release, out)`` writes::

    out/sessions/                 pool.json + users/<id>/{profile,bank,tasks}.json (+ IMPORTED.json)
    out/recordings/<run>/         one recording per released run; its _retrieve twin is mode retrieve
    out/import-report.json        what was imported, and every problem with its release file

so that ``memprobe report out/recordings/*``, the replay TUI and ``memprobe rescore`` work on the
released runs unchanged, and ``memprobe run --sessions out/sessions`` can run the released benchmark
against any system. Release text is kept verbatim even where it breaks our authoring rules (the
import report lists each case as a notice; ``IMPORTED.json`` names the relaxed rules): the strict
loaders reject such sessions until they honour that relaxation.

Runs are independent, so they are imported in parallel worker processes (one recording each); the
inputs are converted once, up front, and shipped to every worker.
Nothing in a messy release aborts the import: see :mod:`.problems`.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson

from memprobe_engine.errors import ConfigError
from memprobe_engine.events.header import HEADER_FILE
from memprobe_engine.imports.problems import (
    ImportProblem,
    Level,
    ProblemLog,
    count_levels,
    dedupe,
    from_dicts,
    write_report,
)
from memprobe_engine.recovery.release.files import BANK_FILE, RETRIEVE_SUFFIX, Release, system_of
from memprobe_engine.recovery.release.runs import RunJob, RunOutcome, import_run
from memprobe_engine.recovery.release.sessions import (
    RELAXED_RULES,
    ImportedInputs,
    convert_inputs,
    validate_imported,
    write_sessions,
)

REPORT_FILE = "import-report.json"
SESSIONS_DIR, RECORDINGS_DIR = "sessions", "recordings"
MARKER_FILE = "IMPORTED.json"
Progress = Callable[[str], None]

#: The mapping decisions, stated once in every import report.
DECISIONS: tuple[str, ...] = (
    "Release text is imported verbatim; authoring rules (sentence counts, target length, leak check, minimum "
    "age, pool names spelling an answer) are relaxed for imports: violations are notices, no user is dropped.",
    "Bank dimensions missing from the released pool (its per-category core dims) are added to pool.json with "
    "axis '(not in the released pool)' and the release's target phrases as answer space.",
    "Profile: name = user id, communication_style = life_attitude text; unmapped fields kept under extra.",
    "Tasks: pipeline_note 'edited_after_fishing_flag' -> critic fishing + revised; empty note -> neutral.",
    "Scores, predictions, reasons and attribution labels are the release's; a non-numeric score is excluded.",
    "The release holds only each final store: one memory_snapshot after the last episode, no memory ops.",
    "Retrieved memories are matched to store items by id, then content; unmatched ones stay out of the store "
    "and are listed in the mode span's attrs.unmatched_retrieved.",
    "Stage 0 missing from an attribution file comes from output/_task_design_oracle as a cached stage.",
)


@dataclass
class ImportResult:
    """Where the import wrote, what each run holds, and every problem found."""

    out: Path
    sessions: Path
    recordings: dict[str, Path]
    runs: list[RunOutcome]
    problems: list[ImportProblem]
    report: dict[str, Any] = field(default_factory=dict)
    wall_s: float = 0.0


def _guard(folder: Path) -> None:
    """Refuse to overwrite a sessions folder that an earlier import did not write."""
    if folder.exists() and any(folder.iterdir()) and not (folder / MARKER_FILE).exists():
        raise ConfigError(f"{folder} exists and was not written by `memprobe import`; pass another --out folder.")


def _write_inputs(release: Release, inputs: ImportedInputs, sessions: Path) -> None:
    users = sessions / "users"
    if users.is_dir():  # _guard made sure an earlier import wrote this folder
        for stale in users.iterdir():
            if stale.is_dir() and stale.name not in {u.user_id for u in inputs.users}:
                shutil.rmtree(stale)
    write_sessions(inputs, sessions)
    (sessions / MARKER_FILE).write_bytes(orjson.dumps({
        "source": "release-a", "release": str(release.root), "imported": time.time(),
        "relaxed_rules": [f"{name}: {fragment}" for name, fragment in RELAXED_RULES],
        "note": "Release text is verbatim; `memprobe sessions validate` reports the relaxed authoring rules "
                "it breaks (listed here), which the import treats as notices."}, option=orjson.OPT_INDENT_2))


def _jobs(release: Release, inputs: ImportedInputs, out: Path, sessions: Path, log: ProblemLog) -> list[RunJob]:
    jobs: list[RunJob] = []
    pool = inputs.pool_index()
    for run in release.runs():
        if not release.run_present(run):
            log.add("error", f"history/{run}/", "this run is missing from the release (no history/, memory/, "
                                                 "pref_judge/ or output/ folder); no recording written", run=run)
            continue
        twin = run + RETRIEVE_SUFFIX
        retrieve_run = twin if (release.root / "output" / twin).is_dir() else None
        if retrieve_run is None:
            level: Level = "notice" if system_of(run) == "nomem" else "warning"
            log.add(level, f"output/{twin}/", "no retrieve twin: only dump_all scores are imported", run=run)
        jobs.append(RunJob(release=release.root, run=run, system=system_of(run), retrieve_run=retrieve_run,
                           record=out / RECORDINGS_DIR / run, sessions=sessions.resolve(), users=inputs.users,
                           pool=pool))
    _drop_stale_recordings(out / RECORDINGS_DIR, {job.run for job in jobs}, log)
    return sorted(jobs, key=lambda job: -_weight(release, job))


def _drop_stale_recordings(folder: Path, runs: set[str], log: ProblemLog) -> None:
    """Remove recordings an earlier import wrote for runs this release no longer has, so that
    ``memprobe report OUT/recordings/*`` never mixes in a stale run."""
    for record in sorted(folder.iterdir()) if folder.is_dir() else []:
        header = record / HEADER_FILE
        if record.name in runs or not header.is_file():
            continue
        try:
            source = orjson.loads(header.read_bytes()).get("config", {}).get("source")
        except (orjson.JSONDecodeError, OSError, AttributeError):
            continue
        if source == "release-a":
            shutil.rmtree(record)
            log.add("notice", f"history/{record.name}/", f"removed {record}, an earlier import of a run this "
                                                         f"release does not have", run=record.name)


def _weight(release: Release, job: RunJob) -> int:
    """Bytes of the run's largest per-user files: start the heaviest runs first."""
    total = 0
    for user in job.users:
        for rel in (Release.memories(job.run, user.user_id), Release.recon(job.run, user.user_id)):
            try:
                total += (release.root / rel).stat().st_size
            except OSError:
                continue
    return total


def _run_all(jobs: list[RunJob], workers: int, progress: Progress | None, log: ProblemLog) -> list[RunOutcome]:
    outcomes: list[RunOutcome] = []

    def done(outcome: RunOutcome) -> None:
        outcomes.append(outcome)
        if progress is not None:
            progress(f"{outcome.run}: {outcome.users} users, {outcome.episodes} episodes, "
                     f"{sum(outcome.scores.values())} scores in {outcome.wall_s:.1f} s")

    if workers <= 1 or len(jobs) <= 1:
        for job in jobs:
            done(import_run(job))
    else:
        method = "fork" if "fork" in multiprocessing.get_all_start_methods() else None
        with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context(method)) as pool:
            futures = {pool.submit(import_run, job): job for job in jobs}
            for future in as_completed(futures):
                job = futures[future]
                try:
                    done(future.result())
                except Exception as err:  # the worker process died: report the run, keep the others
                    log.add("error", f"history/{job.run}/", f"the worker importing this run failed: {err}",
                            run=job.run)
    order = {job.run: i for i, job in enumerate(sorted(jobs, key=lambda j: j.run))}
    return sorted(outcomes, key=lambda o: order.get(o.run, 0))


def import_release_a(release_path: Path | str, out: Path | str, *, workers: int | None = None,
                     progress: Progress | None = None) -> ImportResult:
    """Import the release at ``release_path`` into ``out``; raises ConfigError only when the path is not a
    release at all or ``out`` holds something an import must not overwrite."""
    started = time.monotonic()
    release = Release(Path(release_path).resolve())
    if not release.root.is_dir():
        raise ConfigError(f"{release_path}: no such directory. Pass the folder of a protocol-A release.")
    if not (release.exists(BANK_FILE) or release.exists("history") or release.exists("output")):
        raise ConfigError(f"{release_path} does not look like a protocol-A release: it has none of {BANK_FILE}, "
                          f"history/ or output/.")
    out = Path(out)
    sessions = out / SESSIONS_DIR
    _guard(sessions)
    out.mkdir(parents=True, exist_ok=True)
    log = ProblemLog()
    inputs = convert_inputs(release, log)
    _write_inputs(release, inputs, sessions)
    validation = validate_imported(sessions, log)
    if progress is not None:
        progress(f"sessions: {len(inputs.users)} users written to {sessions}")
    jobs = _jobs(release, inputs, out, sessions, log)
    workers = max(1, min(len(jobs), workers if workers is not None else (os.cpu_count() or 1)))
    outcomes = _run_all(jobs, workers, progress, log)
    problems = dedupe([*log.items, *(p for o in outcomes for p in from_dicts(o.problems))])
    result = ImportResult(out=out, sessions=sessions, recordings={o.run: Path(o.record) for o in outcomes},
                          runs=outcomes, problems=problems, wall_s=time.monotonic() - started)
    result.report = _report(release, inputs, result, validation, workers)
    write_report(out / REPORT_FILE, result.report)
    return result


def _report(release: Release, inputs: ImportedInputs, result: ImportResult, validation: dict[str, int],
            workers: int) -> dict[str, Any]:
    pool = inputs.pool["categories"]
    runs = {o.run: {k: v for k, v in asdict(o).items() if k not in ("run", "problems")} for o in result.runs}
    return {"format": "memprobe-import-report", "source": "release-a", "release": str(release.root),
            "out": str(result.out), "wall_s": round(result.wall_s, 3), "workers": workers,
            "sessions": {"path": str(result.sessions), "users": [u.user_id for u in inputs.users],
                         "pool_dimensions": {cat: len(dims) for cat, dims in pool.items()},
                         "validation": validation},
            "runs": runs, "problem_counts": count_levels(result.problems),
            "problems": [asdict(p) for p in result.problems], "decisions": list(DECISIONS)}
