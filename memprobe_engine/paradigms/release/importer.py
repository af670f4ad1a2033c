"""``memprobe import release-b``: the upstream protocol-B results as recordings, re-scored by our rules.

Input is a checkout in the upstream layout: ``data/<suite>/`` (``latent_specs.json`` and/or
``episodes.jsonl``) and ``results/<suite>/reports/*.json``. A report maps each system (e.g.
``amem_full``, ``full_context``) to episodes, each with ``answers``: ``{probe_type, gold, predicted,
match, reason}``. For every report and system we write one recording (header suite
``paradigms``; run → episode span with the episode's labels → probe span with ``probe_answer`` and
our ``probe_score``; when ``data/`` holds the episode it is stored once as the episode span's
``inputs_ref`` payload, as a live run stores it, so the replay shows its sessions and gold), compare our label with the upstream ``match`` label, and write every
disagreement to ``import-report.json``. A missing or unreadable file, or an episode the data does
not hold, is a problem named by file — never fatal.
"""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from memprobe_engine.errors import ConfigError
from memprobe_engine.events.header import new_header
from memprobe_engine.events.paradigms import ProbeAnswer, ProbeScore
from memprobe_engine.events.recorder import Recorder
from memprobe_engine.events.run import Metric, RunEnd, RunStart
from memprobe_engine.events.writer import open_writer
from memprobe_engine.imports.problems import ProblemLog, count_levels, write_report
from memprobe_engine.paradigms.read.report import UPSTREAM_LABELS_LAYER
from memprobe_engine.paradigms.scoring import (
    DEFAULT_SCORING,
    SCORER_VERSIONS,
    SCORING_MODES,
    label,
    mode_layer,
    parse_answer_json,
    score_probe,
)
from memprobe_engine.paradigms.suite import (
    PROBE_TYPES,
    Episode,
    LatentSpec,
    Probe,
    load_episodes,
    load_specs,
)
from memprobe_engine.provenance import collect_provenance
from memprobe_engine.paradigms.provenance_inputs import input_hashes

REPORT_FILE = "import-report.json"
#: Top-level report keys that are not systems (upstream compute_metrics skips the same).
NON_SYSTEM_KEYS = frozenset({"episode_metadata", "stored_memories", "meta"})
#: Upstream labels we compare against; "execution_error" and "skip" mean excluded on our side.
UPSTREAM_LABELS = frozenset({"correct", "partial", "incorrect", "execution_error", "skip"})
_LABEL_SCORE = {"correct": 1.0, "partial": 0.5, "incorrect": 0.0}


@dataclass
class ReportAgreement:
    """Our labels in each scoring mode against the upstream ``match`` labels for one report file
    (all its systems); ``agree`` / ``by_system`` / ``disagreements`` are the default mode's."""

    report: str
    agree: int = 0
    compared: int = 0
    by_system: dict[str, list[int]] = field(default_factory=dict)  # system -> [agree, compared]
    recordings: list[str] = field(default_factory=list)
    disagreements: list[dict[str, Any]] = field(default_factory=list)
    agree_by_mode: dict[str, int] = field(default_factory=dict)
    disagreements_by_mode: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    @property
    def line(self) -> str:
        parts = []
        for mode in SCORING_MODES:
            agree = self.agree_by_mode.get(mode, 0)
            share = 100.0 * agree / self.compared if self.compared else 0.0
            parts.append(f"{mode} {agree}/{self.compared} ({share:.1f}%)")
        return "agreement with upstream labels: " + ", ".join(parts) + " probes"


@dataclass
class ReleaseBResult:
    out: Path
    reports: list[ReportAgreement]
    problems: ProblemLog
    wall_s: float = 0.0


def _same(ours: str, upstream: str) -> bool:
    if upstream in ("execution_error", "skip"):
        return ours == "excluded"
    return ours == upstream


def _load_specs(data: Path, log: ProblemLog, root: Path) -> tuple[dict[str, LatentSpec], dict[str, Episode]]:
    specs: dict[str, LatentSpec] = {}
    episodes: dict[str, Episode] = {}
    for name, loader in (("episodes.jsonl", load_episodes), ("latent_specs.json", load_specs)):
        path = data / name
        rel = str(path.relative_to(root))
        if not path.exists():
            log.add("warning", rel, "missing; episodes are taken from the other data file")
            continue
        try:
            loaded = loader(path)
        except ConfigError as err:
            log.add("error", rel, f"could not be read: {err}")
            continue
        for item in loaded:
            if isinstance(item, Episode):
                episodes[item.episode_id] = item
                specs.setdefault(item.episode_id, item.latent_spec)
            else:
                specs[item.episode_id] = item
    return specs, episodes


def _answers(entry: object) -> list[dict[str, Any]]:
    """The answers of one episode entry, in the shapes upstream writes (object with answers, list, one)."""
    if isinstance(entry, dict) and isinstance(entry.get("answers"), list):
        return [a for a in entry["answers"] if isinstance(a, dict)]
    if isinstance(entry, list):
        return [a for a in entry if isinstance(a, dict)]
    if isinstance(entry, dict) and "probe_type" in entry:
        return [entry]
    return []


def _question(episode: Episode | None, probe_type: str, used: set[int]) -> str:
    """The probe's question from the episode (first unused probe of that type), when the data has it."""
    if episode is None:
        return ""
    for i, probe in enumerate(episode.probes):
        if i not in used and probe.probe_type == probe_type:
            used.add(i)
            return probe.question
    return ""


def _system_protocol(system: str) -> str:
    for name in ("full_context", "naive_rag", "time_aware_rag", "oracle_rag"):
        if system.startswith(name):
            return name
    if system in ("judge",):
        return "judge"
    if system.startswith(("latest_value", "always_update", "always_preserve", "source_preference")):
        return "heuristic"
    return "memory"


def _iter_systems(data: object) -> Iterator[tuple[str, dict[str, Any]]]:
    if not isinstance(data, dict):
        return
    for key, value in data.items():
        if key not in NON_SYSTEM_KEYS and isinstance(value, dict):
            yield str(key), value


def _import_system(target: Path, report_rel: str, system: str, entries: dict[str, Any],
                   specs: dict[str, LatentSpec], episodes: dict[str, Episode], agreement: ReportAgreement,
                   log: ProblemLog) -> None:
    protocol = _system_protocol(system)
    config = {"suite": "paradigms", "systems": [system], "input_protocols": {system: protocol},
              "imported_from": report_rel, "scoring_mode": DEFAULT_SCORING,
              "scorer_version": SCORER_VERSIONS[DEFAULT_SCORING],
              "score_layers": [m for m in (mode_layer(x) for x in SCORING_MODES) if m] + [UPSTREAM_LABELS_LAYER]}
    tmp = target.with_name(target.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    writer = open_writer(tmp, new_header(f"release-b:{Path(report_rel).stem}:{system}", "paradigms", config,
                                          collect_provenance(config, inputs=input_hashes(config), own_prompts=False)))
    recorder = Recorder(writer)
    counts = agreement.by_system.setdefault(system, [0, 0])
    try:
        with recorder.span("run", "run"):
            recorder.emit(RunStart(run_id=writer.header.run_id, suite="paradigms",
                                   note=f"imported from {report_rel}"))
            for episode_id, entry in entries.items():
                spec = specs.get(episode_id)
                if spec is None:
                    log.add("warning", report_rel, f"episode {episode_id} is not in data/ (episodes.jsonl / "
                            f"latent_specs.json); its answers are recorded unscored", run=system)
                _import_episode(recorder, report_rel, system, protocol, episode_id, _answers(entry), spec,
                                episodes.get(episode_id), agreement, counts)
            share = counts[0] / counts[1] if counts[1] else None
            recorder.emit(Metric(name="upstream_agreement", value=share, scope={"report": report_rel}))
            recorder.emit(RunEnd(status="completed"))
    finally:
        writer.close()
    if target.exists():
        shutil.rmtree(target)
    tmp.replace(target)
    agreement.recordings.append(str(target))


def _import_episode(recorder: Recorder, report_rel: str, system: str, protocol: str, episode_id: str,
                    answers: list[dict[str, Any]], spec: LatentSpec | None, episode: Episode | None,
                    agreement: ReportAgreement, counts: list[int]) -> None:
    attrs: dict[str, Any] = {"episode_id": episode_id, "input_protocol": protocol, "probes": len(answers)}
    if spec is not None:
        attrs.update(paradigm=spec.paradigm, condition=spec.condition, expected_behavior=spec.expected_behavior,
                     split=spec.is_split)
    used: set[int] = set()
    rows: list[tuple[str, str, str, Probe | None]] = []
    for answer in answers:
        probe_type = str(answer.get("probe_type", ""))
        predicted = answer.get("predicted")
        text = predicted if isinstance(predicted, str) else orjson.dumps(predicted).decode()
        question = _question(episode, probe_type, used)
        probe: Probe | None = None
        if spec is not None and probe_type in PROBE_TYPES:
            probe = Probe.model_validate({"probe_type": probe_type, "question": question,
                                          "expected_behavior": spec.expected_behavior,
                                          "gold_answer": str(answer.get("gold") or "")})
            probe.attach_spec(spec)
        rows.append((probe_type, text, question, probe))
    if episode is not None and all(row[3] is not None for row in rows):
        # The episode stored once as a payload, as a live run records it (``inputs_ref``), so the
        # replay shows its sessions and each probe's gold. Its probes are the ones scored here, in
        # the report's answer order: probe i of the payload is the gold of answer i.
        dumped = episode.model_dump(mode="json")
        dumped["probes"] = [row[3].model_dump(mode="json") for row in rows if row[3] is not None]
        attrs.update(inputs_ref=recorder.put_payload(dumped), sessions=len(episode.sessions))
    with recorder.span(f"{episode_id} × {system}", "episode", unit=episode_id, system=system, **attrs):
        for index, ((probe_type, text, question, probe), answer) in enumerate(zip(rows, answers, strict=True)):
            with recorder.span(f"probe {index}: {probe_type}", "probe", probe_index=index, probe_type=probe_type):
                parsed = parse_answer_json(text)
                error = text.strip() if text.strip().lower().startswith("[error:") else None
                recorder.emit(ProbeAnswer(episode_id=episode_id, input_protocol=protocol, probe_index=index,
                                          probe_type=probe_type, question=question, answer=parsed,
                                          answer_text=text, error=error))
                if probe is None:
                    continue
                ours: dict[str, Any] = {}
                for mode in SCORING_MODES:
                    scored = score_probe(probe, text, error=error, episode_id=episode_id, probe_index=index,
                                         system=system, mode=mode)
                    scored.layer = mode_layer(mode)
                    ours[mode] = recorder.emit(scored)
                upstream = str(answer.get("match", ""))
                if upstream not in UPSTREAM_LABELS:
                    continue
                recorder.emit(_label_score(upstream, answer, episode_id, index, probe_type, system))
                counts[1] += 1
                agreement.compared += 1
                for mode_name, score in ours.items():
                    if _same(label(score), upstream):
                        agreement.agree_by_mode[mode_name] = agreement.agree_by_mode.get(mode_name, 0) + 1
                        if mode_name == DEFAULT_SCORING:
                            counts[0] += 1
                            agreement.agree += 1
                        continue
                    row = {"system": system, "episode_id": episode_id, "probe_index": index,
                           "probe_type": probe_type, "upstream": upstream, "upstream_reason": answer.get("reason"),
                           "ours": label(score), "our_score": score.score, "our_reason": score.reason,
                           "gold": answer.get("gold"), "predicted": text[:500]}
                    agreement.disagreements_by_mode.setdefault(mode_name, []).append(row)
                    if mode_name == DEFAULT_SCORING:
                        agreement.disagreements.append(row)


def _label_score(upstream: str, answer: dict[str, Any], episode_id: str, index: int, probe_type: str,
                 system: str) -> ProbeScore:
    """The report's own label as a score of the ``upstream-labels`` layer."""
    excluded = upstream not in _LABEL_SCORE
    return ProbeScore(episode_id=episode_id, probe_index=index, probe_type=probe_type, system=system,
                      score=_LABEL_SCORE.get(upstream, 0.0), reason=str(answer.get("reason") or upstream)[:500],
                      excluded=excluded, exclusion_reason=upstream if excluded else None,
                      scorer_version="upstream-report", layer=UPSTREAM_LABELS_LAYER,
                      subscores=_upstream_subscores(answer))


def _upstream_subscores(answer: dict[str, Any]) -> dict[str, float]:
    """The report's conflict sub-scores (upstream pools their status part into source fidelity)."""
    subs = answer.get("conflict_sub_scores")
    names = {"value_identified": "value", "source_identified": "source", "status_classified": "status",
             "target_applicability": "applicability"}
    if isinstance(subs, dict):
        return {names[k]: 1.0 if v == "correct" else 0.0 for k, v in subs.items() if k in names}
    # Without them upstream reads "value=correct, source=…" from the reason, and so do we.
    found = re.findall(r"(value|source|status|applicability)=(correct|incorrect|partial)",
                       str(answer.get("reason") or "")) if answer.get("probe_type") == "conflict_value" else []
    return {part: 1.0 if verdict == "correct" else 0.0 for part, verdict in found}


def import_release_b(path: Path | str, out: Path | str, *, suite: str = "suite56",
                     progress: Callable[[str], None] | None = None) -> ReleaseBResult:
    """Import every report of ``results/<suite>/reports`` under ``path`` into ``out/recordings``."""
    started = time.perf_counter()
    root, out = Path(path), Path(out)
    if not root.is_dir():
        raise ConfigError(f"{root}: no such folder. Pass a checkout of the upstream repository "
                          f"(it holds data/{suite}/ and results/{suite}/reports/).")
    log = ProblemLog()
    data, reports_dir = root / "data" / suite, root / "results" / suite / "reports"
    if not data.is_dir() and not reports_dir.is_dir():  # nothing of the repository is there: a wrong folder
        raise ConfigError(f"{root}: not a checkout of the protocol-B repository: neither data/{suite}/ nor "
                          f"results/{suite}/reports/ is there. Pass the repository's root folder (or name the "
                          f"suite with --suite).")
    specs: dict[str, LatentSpec] = {}
    episodes: dict[str, Episode] = {}
    if data.is_dir():
        specs, episodes = _load_specs(data, log, root)
    else:
        log.add("error", f"data/{suite}", "missing: no specs or episodes, so no answer can be scored")
    report_files = sorted(reports_dir.glob("*.json")) if reports_dir.is_dir() else []
    if not reports_dir.is_dir():
        log.add("error", f"results/{suite}/reports", "missing: there are no reports to import")
    (out / "recordings").mkdir(parents=True, exist_ok=True)
    results: list[ReportAgreement] = []
    for report_path in report_files:
        rel = str(report_path.relative_to(root))
        try:
            data_obj = orjson.loads(report_path.read_bytes())
        except (orjson.JSONDecodeError, OSError) as err:
            log.add("error", rel, f"could not be read ({err}); skipped")
            continue
        agreement = ReportAgreement(report=rel)
        systems = list(_iter_systems(data_obj))
        if not systems:
            log.add("warning", rel, "holds no system results (expected {system: {episode_id: {answers: [...]}}})")
        for system, entries in systems:
            if progress:
                progress(f"{rel}: {system} ({len(entries)} episodes)")
            target = out / "recordings" / f"{report_path.stem}__{system}"
            _import_system(target, rel, system, entries, specs, episodes, agreement, log)
        results.append(agreement)
    result = ReleaseBResult(out=out, reports=results, problems=log, wall_s=time.perf_counter() - started)
    write_report(out / REPORT_FILE, {
        "source": str(root), "suite": suite, "scoring_mode": DEFAULT_SCORING,
        "scorer_version": SCORER_VERSIONS[DEFAULT_SCORING],
        "reports": [{"report": r.report, "agree": r.agree, "compared": r.compared, "line": r.line,
                     "agree_by_mode": r.agree_by_mode,
                     "by_system": {s: {"agree": a, "compared": c} for s, (a, c) in r.by_system.items()},
                     "recordings": r.recordings, "disagreements": r.disagreements,
                     "disagreements_by_mode": r.disagreements_by_mode} for r in results],
        "problems": log.as_dicts(), "problem_counts": count_levels(log.items), "wall_s": result.wall_s,
    })
    return result
