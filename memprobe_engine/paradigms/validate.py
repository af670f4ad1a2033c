"""The paper's E.1 schema and gold-label checks for a protocol-B suite, every problem named.

A suite folder (``episodes.jsonl`` and/or ``latent_specs.json``, either layout) is read line by line
so one bad episode does not hide the others. Checked, per episode: required top-level, latent-spec,
session and metadata fields; session indices 0..n−1 in order; phase labels and their order
(encoding before the perturbation, nothing but filler / post-perturbation after it); the split
metadata (perturbation parts present as ``perturbation_p1`` then ``perturbation_p2`` sessions, the
recorded number of perturbation sessions); the probe list against the spec; and the structured gold
each probe type needs. Specs are checked for the same gold rules and split consistency. Every
problem names the file (with line), the episode and the field.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from memprobe_engine.errors import ConfigError
from memprobe_engine.paradigms.normalize import value_match
from memprobe_engine.paradigms.scoring import gold_source_class
from memprobe_engine.paradigms.suite import (
    EPISODES_FILE,
    FACT_TYPES_FILE,
    SPECS_FILE,
    Episode,
    LatentSpec,
    load_fact_types,
    load_specs,
    parse_episode,
)

PHASES = frozenset({"encoding", "filler", "perturbation", "post_perturbation"})
AFTER_PERTURBATION = frozenset({"filler", "post_perturbation", "perturbation"})
EPISODE_FIELDS = ("episode_id", "group_id", "paradigm", "condition", "expected_behavior", "latent_spec", "sessions",
                  "probes", "metadata")
SESSION_FIELDS = ("session_idx", "phase", "session_type", "dialogue", "metadata")


@dataclass(frozen=True)
class SuiteProblem:
    """One E.1 violation: where (file, optional line), which episode, which field, what is wrong."""

    file: str
    episode: str | None
    field: str
    message: str

    def __str__(self) -> str:
        where = self.file + (f" episode {self.episode}" if self.episode else "")
        return f"{where}: {self.field}: {self.message}"


def is_paradigm_suite(path: Path) -> bool:
    """Whether ``path`` is a protocol-B suite folder or episodes file (protocol A has users/ and pool.json)."""
    if path.is_file():
        return path.name in (EPISODES_FILE, SPECS_FILE)
    if (path / EPISODES_FILE).exists() or (path / SPECS_FILE).exists():
        return True
    # A folder under sessions/paradigms/ that holds neither file yet (a realization not started or
    # still running) is a paradigm suite with nothing in it, not a protocol-A sessions tree.
    return "paradigms" in path.resolve().parts and not (path / "pool.json").exists()


def _gold_problems(spec: LatentSpec, probe_types: Sequence[str], add: Callable[[str, str], None]) -> None:
    gold = spec.gold
    update = spec.expected_behavior == "should_update"
    if gold.has_changed != update:
        add("latent_spec.gold.has_changed", f"is {gold.has_changed} but expected_behavior is {spec.expected_behavior}")
    expected_current = spec.canonical_new if update else spec.canonical_initial
    if not value_match(expected_current, gold.current_value).matched:
        add("latent_spec.gold.current_value", f"is {gold.current_value!r}; a {spec.expected_behavior} episode's "
            f"current value is {expected_current!r}")
    for kind in probe_types:
        if kind == "previous_value" and not (gold.previous_value or (gold.has_changed and gold.original_value)):
            add("latent_spec.gold.previous_value", "a previous_value probe needs a previous (or original) value")
        elif kind == "source" and gold_source_class(spec, gold) == "unknown":
            add("latent_spec.gold", f"a source probe needs a known source class: condition {spec.condition!r} "
                "maps to none and there is no conflict_gold.source")
        elif kind == "conflict_value":
            cg = gold.conflict_gold
            if cg is None:
                add("latent_spec.gold.conflict_gold", "a conflict_value probe needs conflict_gold")
            else:
                if not cg.conflict_value.strip():
                    add("latent_spec.gold.conflict_gold.conflict_value", "is empty")
                if cg.applies_to_target and not update:
                    add("latent_spec.gold.conflict_gold.applies_to_target", "is true in a should_preserve episode")
        elif kind == "temporal" and gold.temporal_gold is not None:
            tg = gold.temporal_gold
            if tg.changed != gold.has_changed:
                add("latent_spec.gold.temporal_gold.changed", f"is {tg.changed}, has_changed is {gold.has_changed}")
            if tg.changed and not value_match(gold.current_value, tg.new_value).matched:
                add("latent_spec.gold.temporal_gold.new_value", f"is {tg.new_value!r}, current value "
                    f"{gold.current_value!r}")
            if not tg.trigger.strip():
                add("latent_spec.gold.temporal_gold.trigger", "is empty; the temporal rule needs a trigger")


def check_spec(spec: LatentSpec, file: str) -> list[SuiteProblem]:
    """Gold per probe type and split consistency of one latent spec."""
    problems: list[SuiteProblem] = []

    def add(field: str, message: str) -> None:
        problems.append(SuiteProblem(file, spec.episode_id, field.removeprefix("latent_spec.") if file.endswith(
            SPECS_FILE) else field, message))

    probe_types = [p.type for p in spec.probes]
    if spec.probe_types and list(spec.probe_types) != probe_types:
        add("latent_spec.probe_types", f"{spec.probe_types} differs from the probes' types {probe_types}")
    split = spec.is_split
    parts = spec.perturbation_parts
    if split and parts != ["perturbation_p1", "perturbation_p2"]:
        add("latent_spec.perturbation_parts", f"a split spec lists its parts as [perturbation_p1, perturbation_p2], "
            f"not {parts}")
    if not split and parts not in (["perturbation"], []):
        add("latent_spec.perturbation_parts", f"{parts} for a spec without split_perturbation")
    if spec.num_perturbation_sessions is not None and spec.num_perturbation_sessions != max(len(parts), 1):
        add("latent_spec.num_perturbation_sessions", f"is {spec.num_perturbation_sessions} for {len(parts)} part(s)")
    _gold_problems(spec, probe_types, add)
    return problems


def check_episode(raw: dict[str, Any], episode: Episode, file: str) -> list[SuiteProblem]:
    """Every E.1 rule on one parsed episode (``raw`` is its JSON object, to see which fields are present)."""
    eid = episode.episode_id
    problems: list[SuiteProblem] = []

    def add(field: str, message: str) -> None:
        problems.append(SuiteProblem(file, eid, field, message))

    for name in EPISODE_FIELDS:
        if name not in raw:
            add(name, "missing (required top-level field)")
    spec = episode.latent_spec
    for name in ("episode_id", "paradigm", "condition", "expected_behavior"):
        if getattr(spec, name) != getattr(episode, name):
            add(f"latent_spec.{name}", f"{getattr(spec, name)!r} differs from the episode's {getattr(episode, name)!r}")
    for i, session_raw in enumerate(raw.get("sessions") or []):
        for name in SESSION_FIELDS:
            if isinstance(session_raw, dict) and name not in session_raw:
                add(f"sessions.{i}.{name}", "missing (each session has index, phase, type, dialogue, metadata)")
    seen_perturbation = False
    parts: list[str] = []
    for i, session in enumerate(episode.sessions):
        where = f"sessions.{i}"
        if session.session_idx != i:
            add(f"{where}.session_idx", f"is {session.session_idx}; sessions are indexed 0..n-1 in order")
        if session.phase not in PHASES:
            add(f"{where}.phase", f"{session.phase!r} is not one of {', '.join(sorted(PHASES))}")
        if not session.dialogue:
            add(f"{where}.dialogue", "is empty")
        if session.phase == "perturbation":
            seen_perturbation = True
            parts.append(session.session_type)
        elif session.phase == "encoding" and seen_perturbation:
            add(f"{where}.phase", "an encoding session after the perturbation")
        elif session.phase == "post_perturbation" and not seen_perturbation:
            add(f"{where}.phase", "post_perturbation before any perturbation session")
    n_encoding = sum(1 for s in episode.sessions if s.phase == "encoding")
    if not n_encoding:
        add("sessions", "no encoding session: the initial memory is never established")
    elif spec.num_encoding_sessions is not None and n_encoding != spec.num_encoding_sessions:
        add("sessions", f"{n_encoding} encoding sessions, latent_spec.num_encoding_sessions is "
            f"{spec.num_encoding_sessions}")
    if not parts:
        add("sessions", "no perturbation session")
    if spec.is_split:
        wanted = ["perturbation_p1", "perturbation_p2"]
        if [p for p in parts if p in wanted] != wanted:
            add("sessions", f"a split episode needs perturbation_p1 then perturbation_p2 sessions; found {parts}")
    elif any(p in ("perturbation_p1", "perturbation_p2") for p in parts):
        add("sessions", f"split perturbation sessions {parts} in an episode whose spec is not split")
    meta = episode.metadata
    if isinstance(meta.get("split_perturbation"), bool) and meta["split_perturbation"] != spec.is_split:
        add("metadata.split_perturbation", f"is {meta['split_perturbation']}, the spec says {spec.is_split}")
    if isinstance(meta.get("total_sessions"), int) and meta["total_sessions"] != len(episode.sessions):
        add("metadata.total_sessions", f"is {meta['total_sessions']}, the episode has {len(episode.sessions)}")
    probe_types = [p.probe_type for p in episode.probes]
    if not probe_types:
        add("probes", "no probes")
    if spec.probe_types and sorted(probe_types) != sorted(spec.probe_types):
        add("probes", f"types {probe_types} differ from latent_spec.probe_types {list(spec.probe_types)}")
    for i, probe in enumerate(episode.probes):
        if not probe.question.strip():
            add(f"probes.{i}.question", "is empty")
        if probe.expected_behavior is not None and probe.expected_behavior != episode.expected_behavior:
            add(f"probes.{i}.expected_behavior", f"{probe.expected_behavior} differs from the episode's "
                f"{episode.expected_behavior}")
        if probe.probe_type == "temporal" and spec.gold.temporal_gold is None and not probe.gold_answer.strip():
            add(f"probes.{i}.gold_answer", "a temporal probe needs temporal_gold or a gold_answer")
    problems += [SuiteProblem(file, eid, p.field, p.message) for p in check_spec(spec, file)]
    return problems


def validate_suite(path: Path | str) -> list[SuiteProblem]:
    """Every problem of a suite folder or episodes file; an empty list means it passes E.1."""
    root = Path(path)
    folder = root.parent if root.is_file() else root
    episodes_path = root if root.is_file() and root.name == EPISODES_FILE else folder / EPISODES_FILE
    problems: list[SuiteProblem] = []
    if not folder.exists():
        return [SuiteProblem(str(root), None, "(path)", "no such suite folder")]
    if episodes_path.exists() and not episodes_path.is_file():
        return [SuiteProblem(str(episodes_path), None, "(file)", "not a regular file (a folder, pipe or device); "
                                                                  "put the episodes file there")]
    first_line: dict[str, int] = {}
    episodes_seen = 0
    if episodes_path.exists():
        for number, line in enumerate(episodes_path.read_bytes().splitlines(), start=1):
            if not line.strip():
                continue
            episodes_seen += 1
            where = f"{episodes_path}:{number}"
            try:
                raw = orjson.loads(line)
            except orjson.JSONDecodeError as err:
                problems.append(SuiteProblem(where, None, "(line)", f"not valid JSON ({err})"))
                continue
            eid = str(raw.get("episode_id", "?")) if isinstance(raw, dict) else "?"
            if not isinstance(raw, dict):
                problems.append(SuiteProblem(where, None, "(line)", "not a JSON object"))
                continue
            try:
                episode = parse_episode(raw, where)
            except ConfigError as err:
                detail = str(err).split(": field ", 1)
                field, _, message = (detail[1] if len(detail) > 1 else str(err)).partition(": ")
                problems.append(SuiteProblem(where, eid, field if message else "(episode)", message or str(err)))
                continue
            problems += check_episode(raw, episode, where)
            if episode.episode_id in first_line:
                problems.append(SuiteProblem(where, eid, "episode_id", f"repeats the id of line "
                                             f"{first_line[episode.episode_id]}; give each episode its own id (a run "
                                             f"keeps one of the two and drops the other's probes)"))
            first_line.setdefault(episode.episode_id, number)
    specs_path = folder / SPECS_FILE
    specs_seen = 0
    if specs_path.exists() and (not root.is_file() or root.name == SPECS_FILE):
        try:
            spec_ids: set[str] = set()
            for spec in load_specs(specs_path):
                specs_seen += 1
                problems += check_spec(spec, str(specs_path))
                if spec.episode_id in spec_ids:
                    problems.append(SuiteProblem(str(specs_path), spec.episode_id, "episode_id",
                                                 "repeats an earlier spec's id; give each spec its own id"))
                spec_ids.add(spec.episode_id)
        except ConfigError as err:
            problems.append(SuiteProblem(str(specs_path), None, "(file)", str(err)))
    if (folder / FACT_TYPES_FILE).exists():
        try:
            load_fact_types(folder / FACT_TYPES_FILE)
        except ConfigError as err:
            problems.append(SuiteProblem(str(folder / FACT_TYPES_FILE), None, "(file)", str(err)))
    if not episodes_path.exists() and not specs_path.exists():
        problems.append(SuiteProblem(str(root), None, "(path)", f"neither {EPISODES_FILE} nor {SPECS_FILE} is there"))
    elif not problems and episodes_seen == 0 and specs_seen == 0:
        problems.append(SuiteProblem(str(root), None, "(suite)", "holds no episode and no latent spec; realize "
                                     "episodes with `memprobe generate episodes` or pass a suite that has some"))
    return problems
