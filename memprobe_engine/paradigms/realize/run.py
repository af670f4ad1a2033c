"""One run of ``memprobe generate episodes``: open (or continue) the recording, realize, summarize.

The recording lives at ``OUT/_generation/``; its header holds the settings' fingerprint, so a
resumed run with other settings is refused (it would not be the same run). On resume, every
response in the recording is served back by request hash — each repair round included — through
the same layer protocol-A runs use (:class:`~memprobe_engine.orchestration.resume.RecordedResponses`).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from memprobe_engine.errors import RecordingError
from memprobe_engine.events.header import HEADER_FILE, new_header
from memprobe_engine.events.header_config import RealizeConfig, ResolvedModel
from memprobe_engine.llm.cache import ResponseStore
from memprobe_engine.llm.client import BackendFactory, ChatClient
from memprobe_engine.llm.config import LLMConfig
from memprobe_engine.orchestration.lifecycle import recorded_run
from memprobe_engine.orchestration.resume import RecordedResponses, fingerprint, read_resume
from memprobe_engine.paradigms.realize.recheck import accepted_calls, recheck_written, replace_lines
from memprobe_engine.paradigms.realize.writer import (
    EXCLUDED_FILE,
    GENERATION_DIR,
    AcceptedSession,
    Realizer,
    RealizeSettings,
    RealizeStats,
    select_specs,
    write_suite_files,
)
from memprobe_engine.paradigms.suite import FACT_TYPES_FILE, load_fact_types, load_specs
from memprobe_engine.provenance import collect_provenance
from memprobe_engine.paradigms.provenance_inputs import PROMPT_MODULES, input_hashes


@dataclass(frozen=True)
class RealizeRequest:
    specs_path: Path
    out: Path
    episodes: list[str] | None
    settings: RealizeSettings
    concurrency: int = 2
    #: Take written episodes that break the current rules out first (see realize_recheck).
    recheck: bool = False
    #: Excluded episodes to try again: taken out of ``excluded.jsonl`` first (their exclusion events
    #: stay in the recording). Worth it only when their requests changed since (new prompts, new
    #: rules); otherwise the recorded failures are served back and they are excluded again.
    retry_excluded: tuple[str, ...] = ()


@dataclass(frozen=True)
class RealizeSummary:
    stats: RealizeStats
    wall_s: float
    recording: Path
    resumed: bool


def accepted_sessions(record: Path) -> dict[str, AcceptedSession]:
    """Sessions an earlier session of this run accepted: prompt → the reply and the call that wrote it.

    Lets a resumed run keep a session even when it would now ask another role first (the role
    policy changed between sessions of the run): the prompt is the same, so is the session."""
    return {prompt: AcceptedSession(text=text, role=call.role, call_seq=call.seq)
            for _, call, prompt, text in accepted_calls(record)}


def _shapes_text(raw: Mapping[str, object]) -> dict[str, object]:
    """What decides the generated text: the realizer settings and which model plays each realizer
    role. A resumed run must match these; other parts of the resolved configuration (timeouts,
    concurrency, roles the realizer never calls) may differ between sessions of one run."""
    config = RealizeConfig.of(raw)
    roles = config.models.models
    picked: dict[str, tuple[str | None, str | None, str | None]] = {}
    for role in ("realizer", "realizer_strong"):
        spec = roles.get(role) or roles.get("default") or ResolvedModel()
        picked[role] = (spec.backend, spec.model, spec.base_url)
    return {"settings": config.settings, "roles": picked}


async def realize_suite(request: RealizeRequest, llm_config: LLMConfig, *, cache: ResponseStore | None = None,
                        backend_factory: BackendFactory | None = None,
                        progress: Callable[[str], None] | None = None, signals: bool = False) -> RealizeSummary:
    """Realize the chosen specs into ``request.out`` (resuming what an earlier run finished)."""
    specs_all = load_specs(request.specs_path)
    specs = select_specs(specs_all, request.episodes, request.specs_path)
    registry = request.specs_path.parent / FACT_TYPES_FILE
    fact_types = load_fact_types(registry) if registry.exists() else []
    request.out.mkdir(parents=True, exist_ok=True)
    record = request.out / GENERATION_DIR
    config = {"suite": "generate-episodes", "settings": request.settings.config(), "models": llm_config.resolved()}
    config["fingerprint"] = fingerprint(config)

    def check(previous_config: dict[str, Any]) -> None:
        previous = RealizeConfig.of(previous_config).fingerprint
        if previous != config["fingerprint"] and _shapes_text(previous_config) != _shapes_text(config):
            raise RecordingError(f"{record} was made with other settings or models (fingerprint {previous} ≠ "
                                 f"{config['fingerprint']}). Resume with the same flags, or pass another --out.")

    resumed = (record / HEADER_FILE).exists()
    responses = read_resume(record, check=check).responses  # one pass, the header check first
    accepted: dict[str, AcceptedSession] = accepted_sessions(record) if resumed else {}
    if request.recheck:
        for failure in recheck_written(request.out, record, specs_all):
            if progress is not None:
                progress(f"{failure.episode_id}: redone, session {failure.session_idx} ({failure.session_type}) "
                         f"breaks the current rules: {'; '.join(failure.problems)}")
    for episode_id in withdraw_exclusions(request.out, request.retry_excluded):
        if progress is not None:
            progress(f"{episode_id}: exclusion withdrawn, tried again")
    run_id = "generate-episodes-" + dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    header = None if resumed else new_header(run_id, "generate", config, collect_provenance(
        config, inputs=input_hashes(config), prompt_modules=PROMPT_MODULES))
    started = time.monotonic()
    # The one recorded-run lifecycle: open spans closed as cancelled and run_end written on any
    # exit; with ``signals`` (the CLI), SIGTERM (e.g. from ``timeout``) stops it like Ctrl-C.
    async with recorded_run(record, header=header, suite="generate-episodes", resumed=resumed,
                            signals=signals) as run:
        recorder = run.recorder
        chat = ChatClient(llm_config, recorder=recorder, cache=RecordedResponses(responses, cache),
                          backend_factory=backend_factory)
        run.scrub = chat.scrub
        realizer = Realizer(chat, recorder, request.out, fact_types, request.settings, progress=progress,
                            accepted=accepted,
                            on_written=lambda: write_suite_files(request.out, specs_all, request.specs_path))
        try:
            with recorder.span("generate episodes", "run"):
                stats = await realizer.run(specs, concurrency=request.concurrency)
        finally:
            await chat.aclose()
            write_suite_files(request.out, specs_all, request.specs_path)
    return RealizeSummary(stats=stats, wall_s=time.monotonic() - started, recording=record, resumed=resumed)


def withdraw_exclusions(out: Path, episode_ids: tuple[str, ...]) -> list[str]:
    """Take ``episode_ids`` out of ``out/excluded.jsonl`` (all or nothing); the ids taken out."""
    path = out / EXCLUDED_FILE
    if not episode_ids or not path.exists():
        return []
    kept: list[bytes] = []
    withdrawn: list[str] = []
    for line in path.read_bytes().splitlines():
        if not line.strip():
            continue
        episode_id = str(orjson.loads(line).get("episode_id"))
        if episode_id in episode_ids:
            withdrawn.append(episode_id)
        else:
            kept.append(line)
    if withdrawn:
        replace_lines(path, kept)
    return withdrawn
