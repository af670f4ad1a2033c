"""Protocol-B suite models and loading: fact types, latent specs, episodes, probes.

Two on-disk layouts load into the same :class:`Suite`:

- the upstream release layout (``data/suite56/``): ``episodes.jsonl`` (one episode per line),
  ``latent_specs.json`` (``{"specs": [...]}``) and ``value_pairs.json`` (``{"fact_types": [...]}``);
- ours (``sessions/paradigms/<suite>/``): the same three file names, so a realized suite and the
  upstream data are read by one code path. Either file set may lack episodes (specs only) or specs
  (episodes only: each episode carries its own ``latent_spec``).

Upstream fields we do not model are kept (``extra="allow"``) so nothing is lost on a round trip.
Every failure is a :class:`~memprobe_engine.errors.ConfigError` naming the file, the line or
episode, and the field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, get_args

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from memprobe_engine.errors import ConfigError

Paradigm = Literal["interference", "misinformation", "consolidation", "reconsolidation"]
ProbeType = Literal["current_value", "previous_value", "change_detection", "source", "conflict_value",
                    "temporal"]
ExpectedBehavior = Literal["should_update", "should_preserve"]
Role = Literal["user", "assistant", "tool_output"]

PARADIGMS: tuple[str, ...] = get_args(Paradigm)
PROBE_TYPES: tuple[str, ...] = get_args(ProbeType)
#: Probe types whose gold is a single value to contain (the paper's "value probes").
VALUE_PROBES: frozenset[str] = frozenset({"current_value", "previous_value"})

EPISODES_FILE = "episodes.jsonl"
SPECS_FILE = "latent_specs.json"
FACT_TYPES_FILE = "value_pairs.json"


class _Open(BaseModel):
    """Keeps upstream fields we do not model, so loading and saving loses nothing."""

    model_config = ConfigDict(extra="allow")


# --- fact types ------------------------------------------------------------------------------------

class ValuePair(_Open):
    canonical_initial: str
    canonical_new: str
    surface_initial: str = ""
    surface_new: str = ""


class FactType(_Open):
    """One of the suite's fact families (e.g. ``current_gym``) with its value pair and distractors."""

    fact_type: str
    domain: str
    paradigm_target: str | None = None
    readable: str = ""
    value_pair: ValuePair
    distractor_values: list[str] = []


# --- latent specs ----------------------------------------------------------------------------------

class Encoding(_Open):
    support_count: int
    mention_contexts: list[str] = []


class Perturbation(_Open):
    """Where the competing value comes from and how strong/authoritative it is."""

    source_type: str
    evidence_strength: str
    authoritative: bool
    reactivation: bool = False
    wording_hint: str = ""


class PostFillerPlan(_Open):
    total: int = 0
    types: list[str] = []


class FillerPlan(_Open):
    """Counts of filler sessions by type before the perturbation (plus ``total``) and the types after."""

    pre_perturbation: dict[str, int] = {}
    post_perturbation: PostFillerPlan = PostFillerPlan()


class SplitPlan(_Open):
    """A split perturbation: P1 gives the trigger/source, fillers interleave, P2 names the value."""

    p1_hint: str
    p2_hint: str
    interleave_fillers: int = 0
    interleave_types: list[str] = []


class ProbeSpec(_Open):
    type: ProbeType
    question_hint: str = ""
    gold_hint: str | None = None


class ConflictGold(_Open):
    """Gold for a conflict-value probe, decomposed as the scorer decomposes the answer."""

    conflict_value: str
    mentioned: bool = True
    source: str
    source_label: str = ""
    status: str
    applies_to_target: bool
    target_remains: str = ""


class TemporalGold(_Open):
    changed: bool
    order: str = ""
    trigger: str = ""
    reason: str = ""
    old_value: str = ""
    new_value: str = ""
    exact_time_required: bool = False


class Gold(_Open):
    """Structured gold of an episode; each probe type reads the part it needs."""

    current_value: str
    previous_value: str | None = None
    original_value: str | None = None
    has_changed: bool
    source_of_change: str | None = None
    invalid_sources: list[str] = []
    conflict_gold: ConflictGold | None = None
    temporal_gold: TemporalGold | None = None


class LatentSpec(_Open):
    """The latent specification of one episode: what is encoded, perturbed, controlled and probed."""

    episode_id: str
    group_id: str = ""
    group_role: str | None = None
    paradigm: Paradigm
    condition: str
    domain: str
    fact_type: str
    length_tier: str | None = None
    initial_value: str = ""
    new_value: str = ""
    canonical_initial: str
    canonical_new: str
    distractor_values: list[str] = []
    expected_behavior: ExpectedBehavior
    encoding: Encoding
    perturbation: Perturbation
    filler_plan: FillerPlan = FillerPlan()
    num_encoding_sessions: int | None = None
    num_pre_perturbation_fillers: int | None = None
    num_perturbation_sessions: int | None = None
    num_post_perturbation_fillers: int | None = None
    perturbation_type: str | None = None
    probes: list[ProbeSpec] = []
    gold: Gold
    probe_types: list[ProbeType] = []
    #: Upstream writes ``false``/absent for unsplit specs and the plan object for split ones.
    split_perturbation: SplitPlan | bool | None = None
    perturbation_parts: list[str] = ["perturbation"]
    num_perturbation_events: int | None = None
    paradigm_metadata: dict[str, Any] = {}

    @property
    def is_split(self) -> bool:
        return isinstance(self.split_perturbation, SplitPlan) or len(self.perturbation_parts) > 1


# --- episodes --------------------------------------------------------------------------------------

class Turn(_Open):
    role: Role
    content: str


class Session(_Open):
    """One session of an episode, ingested as a whole (all roles, tool outputs included)."""

    session_idx: int
    phase: str
    session_type: str
    dialogue: list[Turn]
    metadata: dict[str, Any] = {}


class Probe(_Open):
    """A question asked after the last session. ``gold`` is the episode's structured gold (filled
    from the latent spec on load); ``gold_answer`` is the upstream free-text gold."""

    probe_type: ProbeType
    question: str
    expected_behavior: ExpectedBehavior | None = None
    gold_answer: str = ""
    gold: Gold | None = None
    #: The episode's latent spec (condition, canonical values) for the scorer; set on load, never
    #: saved. A plain excluded field rather than a private attribute: the scorer reads it per probe,
    #: and pydantic's private-attribute lookup costs more than the rest of a value probe's scoring.
    episode_spec: LatentSpec | None = Field(default=None, exclude=True, repr=False)

    @property
    def spec(self) -> LatentSpec | None:
        return self.episode_spec

    def attach_spec(self, spec: LatentSpec) -> None:
        """Give the probe its episode's spec (and the spec's gold where the probe has none)."""
        self.episode_spec = spec
        if self.gold is None:
            self.gold = spec.gold


class Episode(_Open):
    episode_id: str
    group_id: str = ""
    paradigm: Paradigm
    condition: str
    expected_behavior: ExpectedBehavior
    latent_spec: LatentSpec
    sessions: list[Session]
    probes: list[Probe]
    metadata: dict[str, Any] = {}

    @property
    def is_split(self) -> bool:
        return self.latent_spec.is_split or bool(self.metadata.get("split_perturbation"))


class Suite(BaseModel):
    """A loaded suite: its episodes (possibly none), latent specs and fact types, in file order."""

    model_config = ConfigDict(extra="forbid")

    name: str
    episodes: list[Episode] = []
    specs: list[LatentSpec] = []
    fact_types: list[FactType] = []
    #: The folder it was read from (for messages).
    root: str = ""

    def episode(self, episode_id: str) -> Episode:
        for episode in self.episodes:
            if episode.episode_id == episode_id:
                return episode
        raise ConfigError(f"{self.root}: no episode {episode_id!r} in suite {self.name!r}; it holds "
                          f"{', '.join(e.episode_id for e in self.episodes) or 'no episodes'}.")

    def spec(self, episode_id: str) -> LatentSpec:
        for spec in self.specs:
            if spec.episode_id == episode_id:
                return spec
        raise ConfigError(f"{self.root}: no latent spec {episode_id!r} in suite {self.name!r}.")


# --- loading ---------------------------------------------------------------------------------------

def _field_path(err: ValidationError) -> str:
    first = err.errors()[0]
    return f"field {'.'.join(map(str, first['loc'])) or '(top level)'}: {first['msg']}"


def regular_file(path: Path) -> Path:
    """``path``, refused when it is a pipe, device or folder: reading a FIFO would block for ever."""
    if path.exists() and not path.is_file():
        raise ConfigError(f"{path}: not a regular file (a folder, pipe or device); put the suite file there.")
    return path


def _read_json(path: Path) -> object:
    regular_file(path)
    try:
        return orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as err:
        raise ConfigError(f"{path}: not valid JSON ({err}). Fix the file or re-export it.") from None
    except OSError as err:
        raise ConfigError(f"{path}: cannot be read ({err.strerror}).") from None


def _listed(path: Path, data: object, key: str) -> list[Any]:
    """Upstream wraps lists in an object (``{"specs": [...]}``); a bare list is accepted too."""
    if isinstance(data, dict) and isinstance(data.get(key), list):
        return list(data[key])
    if isinstance(data, list):
        return data
    raise ConfigError(f"{path}: expected a JSON object with a \"{key}\" list (or a bare list).")


def load_specs(path: Path) -> list[LatentSpec]:
    """Latent specs from ``latent_specs.json``; an invalid one names its index, episode and field."""
    specs: list[LatentSpec] = []
    for i, raw in enumerate(_listed(path, _read_json(path), "specs")):
        episode_id = raw.get("episode_id", f"#{i}") if isinstance(raw, dict) else f"#{i}"
        try:
            specs.append(LatentSpec.model_validate(raw))
        except ValidationError as err:
            raise ConfigError(f"{path}: spec {i} (episode {episode_id}): {_field_path(err)}. "
                              f"Fix that field in the file.") from None
    return specs


def load_fact_types(path: Path) -> list[FactType]:
    found: list[FactType] = []
    for i, raw in enumerate(_listed(path, _read_json(path), "fact_types")):
        try:
            found.append(FactType.model_validate(raw))
        except ValidationError as err:
            raise ConfigError(f"{path}: fact type {i}: {_field_path(err)}.") from None
    return found


def parse_episode(raw: object, where: str) -> Episode:
    """Validate one episode dict and attach the structured gold to each probe."""
    episode_id = raw.get("episode_id", "?") if isinstance(raw, dict) else "?"
    try:
        episode = Episode.model_validate(raw)
    except ValidationError as err:
        raise ConfigError(f"{where} (episode {episode_id}): {_field_path(err)}. Fix that field.") from None
    for probe in episode.probes:
        probe.attach_spec(episode.latent_spec)
    return episode


def load_episodes(path: Path) -> list[Episode]:
    """Episodes from a JSON-lines file; blank lines are skipped, a bad line is named by number."""
    episodes: list[Episode] = []
    try:
        lines = regular_file(path).read_bytes().splitlines()
    except OSError as err:
        raise ConfigError(f"{path}: cannot be read ({err.strerror}).") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            raw = orjson.loads(line)
        except orjson.JSONDecodeError as err:
            raise ConfigError(f"{path}:{number}: not valid JSON ({err}).") from None
        episodes.append(parse_episode(raw, f"{path}:{number}"))
    return episodes


def load_suite(path: Path | str, *, name: str | None = None) -> Suite:
    """Load a suite folder (or a single ``episodes.jsonl`` file) in either layout.

    At least one of the three files must exist. When specs are absent, the episodes' embedded
    ``latent_spec`` objects serve as the specs.
    """
    root = Path(path)
    if root.is_file():
        episodes_path, folder = root, root.parent
    else:
        episodes_path, folder = root / EPISODES_FILE, root
    if not folder.exists():
        raise ConfigError(f"{root}: no such suite folder. Pass a folder holding {EPISODES_FILE} "
                          f"and/or {SPECS_FILE} (e.g. sessions/paradigms/upstream-sample).")
    specs_path, types_path = folder / SPECS_FILE, folder / FACT_TYPES_FILE
    if not (episodes_path.exists() or specs_path.exists()):
        raise ConfigError(f"{root}: not a paradigm suite: neither {EPISODES_FILE} nor {SPECS_FILE} "
                          f"is there. Realize one with `memprobe generate episodes` or pass the "
                          f"upstream data/suite56 folder.")
    episodes = load_episodes(episodes_path) if episodes_path.exists() else []
    specs = load_specs(specs_path) if specs_path.exists() else [e.latent_spec for e in episodes]
    fact_types = load_fact_types(types_path) if types_path.exists() else []
    ids = [e.episode_id for e in episodes]
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        raise ConfigError(f"{episodes_path}: episode id(s) {', '.join(repeated)} appear more than once; give each "
                          f"episode its own id (memprobe sessions validate {folder} lists the lines).")
    return Suite(name=name or folder.name, episodes=episodes, specs=specs, fact_types=fact_types,
                 root=str(folder))


def dump_episode(episode: Episode) -> bytes:
    """One episode as a JSON line in the upstream format (probe ``gold`` left out: it is the spec's)."""
    data = episode.model_dump(mode="json", exclude_unset=True)
    for probe in data.get("probes", []):
        probe.pop("gold", None)
    return orjson.dumps(data) + b"\n"


__all__ = [
    "PARADIGMS",
    "PROBE_TYPES",
    "VALUE_PROBES",
    "ConflictGold",
    "Encoding",
    "Episode",
    "ExpectedBehavior",
    "FactType",
    "FillerPlan",
    "Gold",
    "LatentSpec",
    "Paradigm",
    "Perturbation",
    "PostFillerPlan",
    "Probe",
    "ProbeSpec",
    "ProbeType",
    "Role",
    "Session",
    "SplitPlan",
    "Suite",
    "TemporalGold",
    "Turn",
    "ValuePair",
    "dump_episode",
    "load_episodes",
    "load_fact_types",
    "load_specs",
    "load_suite",
    "parse_episode",
]
