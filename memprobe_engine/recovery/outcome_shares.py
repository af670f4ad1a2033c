"""How often each branch of protocol A's control flow was taken, measured on earlier recordings.

The calls a run makes depend on its own outcomes: a fill that is "unknown" goes to no judge; a
case scored ≥ 0.75 is not attributed; a task that cannot invite the evidence (stage 0) stops
attribution there; a value disclosed in the dialogue (stage 1) skips stage 2. The dry run's
expected calls take each branch's share from the recordings beside the new one that were made with
the same model for the role that decides it: the slot-filler and recovery judge for the first two
(and the same feed, fixed dialogues or a live rollout, since a short live dialogue reveals less), the
attribution judge for the stages (stage 1 also on the same feed). A live rollout adds one more: the
simulator's reply that ends the episode ("satisfied"), from live runs with the same simulator and
framing; it sets how many turns an episode is expected to last. Each share is the recovery
release's share (``RELEASE``, measured on the paper's own runs) as a prior worth
:data:`PRIOR_WEIGHT` cases, updated by the ``k`` of ``n`` cases measured: (k + w·p) / (n + w). With
nothing measured it is the release's share; with many cases it is the measured one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from memprobe_engine.events.header_config import HeaderConfig
from memprobe_engine.recovery.config import RecoveryConfig
from memprobe_engine.recovery.schemas import OK_THRESHOLD

#: Shares of the recovery release (its 558 scored cases of the two-user sample, all systems with
#: memory): fills judged (not "unknown"), cases recovered (≥ 0.75), stage-0 "can invite", stage-1
#: "disclosed".
RELEASE = {"judged": 0.88, "recovered": 0.40, "can_invite": 0.98, "disclosed": 0.92}
#: The simulator's chance of ending an episode at each turn before anything is measured: one in three
#: (about three turns when the cap does not bind; the release publishes no such share).
SATISFIED_PRIOR = 1 / 3
#: How many measured cases the release's share is worth.
PRIOR_WEIGHT = 2.0
#: At most this many recordings are read (the newest), so a large folder keeps the dry run quick.
MAX_RECORDINGS = 40
_NO_MEMORY = "nomem"


@dataclass
class Tally:
    """``hits`` of ``seen`` cases took the branch; ``recordings`` where they were counted."""

    prior: float
    hits: int = 0
    seen: int = 0
    recordings: set[str] = field(default_factory=set)

    def count(self, hit: bool, recording: str) -> None:
        self.hits += int(hit)
        self.seen += 1
        self.recordings.add(recording)

    @property
    def share(self) -> float:
        return (self.hits + PRIOR_WEIGHT * self.prior) / (self.seen + PRIOR_WEIGHT)

    def describe(self) -> str:
        return f"{self.hits}/{self.seen} → {self.share:.2f}" if self.seen else f"none measured → {self.share:.2f}"


@dataclass
class OutcomeShares:
    """Measured branch shares of protocol A (see the module docstring)."""

    #: Memory-system cases whose fill went to the recovery judge (not "unknown"), per system.
    judged: dict[str, Tally] = field(default_factory=dict)
    #: Memory-system cases scored ≥ 0.75, per system.
    recovered: dict[str, Tally] = field(default_factory=dict)
    #: First stage-0 verdicts per (user, dimension) that were "can invite".
    can_invite: Tally = field(default_factory=lambda: Tally(RELEASE["can_invite"]))
    #: Stage-1 verdicts that were "disclosed".
    disclosed: Tally = field(default_factory=lambda: Tally(RELEASE["disclosed"]))
    #: Simulated-user replies (live runs) that ended the episode as satisfied.
    satisfied: Tally = field(default_factory=lambda: Tally(SATISFIED_PRIOR))
    #: The model specs the recordings were matched on (role → spec); empty when nothing was read.
    specs: dict[str, str] = field(default_factory=dict)
    #: No recording was looked for (a report's estimate: the same wherever the recording lies).
    release_only: bool = False

    def of_system(self, table: dict[str, Tally], system: str) -> Tally:
        """The system's own tally, or every memory system's pooled when it has none."""
        own = table.get(system)
        if own is not None and own.seen:
            return own
        pooled = Tally(RELEASE["judged"] if table is self.judged else RELEASE["recovered"])
        for tally in table.values():
            pooled.hits += tally.hits
            pooled.seen += tally.seen
            pooled.recordings |= tally.recordings
        return pooled

    def expected_turns(self, cap: int) -> list[float]:
        """The chance that an episode reaches each turn 1..cap: the simulator ends it at each turn with
        the satisfied share."""
        keep = 1 - self.satisfied.share
        return [keep ** (turn - 1) for turn in range(1, cap + 1)]

    def describe(self, systems: Sequence[str], live: bool = False) -> str:
        """Where the shares came from, for the dry run's notes."""
        memory = [s for s in systems if s != _NO_MEMORY]
        parts = [f"{system} judged {self.of_system(self.judged, system).describe()}, recovered {self.of_system(self.recovered, system).describe()}" for system in memory]
        parts += [f"stage 0 can invite {self.can_invite.describe()}", f"stage 1 disclosed {self.disclosed.describe()}"]
        if live:
            parts.append(f"simulator satisfied per turn {self.satisfied.describe()}")
        sources = set(self.can_invite.recordings) | self.disclosed.recordings | self.satisfied.recordings
        for table in (self.recovered, self.judged):
            for tally in table.values():
                sources |= tally.recordings
        where = f"{len(sources)} earlier recording(s) ({', '.join(sorted(sources)[:4])}{', …' if len(sources) > 4 else ''})" \
            if sources else "no earlier recording"
        judge = self.specs.get("attribution_judge")
        models = f" (attribution judge {judge})" if judge else ""
        if self.release_only:
            return (f"expected judge and attribution calls follow the runner's branches, each share the release's, "
                    f"as a report's estimate reads no other recording{models}: {'; '.join(parts)}")
        return (f"expected judge and attribution calls follow the runner's branches, each share the release's "
                f"updated by {where} with the same models{models}: {'; '.join(parts)}")


def header_specs(config: Mapping[str, object]) -> dict[str, str]:
    """Role → model spec string of a header config's ``models`` (as ``LLMConfig.resolved`` writes it)."""
    return HeaderConfig.of(config).models.specs()


def candidate_recordings(folders: Iterable[Path], exclude: Path | None = None) -> list[Path]:
    """Protocol-A run recordings directly inside ``folders`` (newest first, at most MAX_RECORDINGS),
    without ``exclude``."""
    skip = exclude.resolve() if exclude is not None else None
    found: dict[Path, float] = {}
    for folder in folders:
        try:
            children = list(folder.iterdir()) if folder.is_dir() else []
        except OSError:
            continue
        for child in children:
            header = child / "header.json"
            try:
                if header.is_file() and child.resolve() != skip:
                    found[child.resolve()] = header.stat().st_mtime
            except OSError:
                continue
    return sorted(found, key=lambda path: -found[path])[:MAX_RECORDINGS]


def measure_shares(folders: Iterable[Path], specs: dict[str, str], fixed_dialogues: bool, framing: str = "release",
                   exclude: Path | None = None) -> OutcomeShares:
    """Branch shares over the protocol-A runs in ``folders`` whose deciding role had the same model
    spec as ``specs`` gives it now (and the same feed where it matters: ``fixed_dialogues``; for the
    simulator also the same ``framing``); imports, other protocols and unreadable recordings are skipped."""
    from memprobe_engine.errors import MemProbeError
    from memprobe_engine.events.header import read_header
    from memprobe_engine.events.reader import open_recording

    shares = OutcomeShares(specs=dict(specs))
    for recording in candidate_recordings(folders, exclude):
        try:
            header = read_header(recording)
            if HeaderConfig.of(header).suite != "recovery" or HeaderConfig.of(header).source:
                continue
            config = RecoveryConfig.of(header)
        except MemProbeError:
            continue
        used = config.models.specs()
        same_feed = (config.dialogues is not None) == fixed_dialogues
        voice = not fixed_dialogues and same_feed and config.framing == framing and \
            used.get("simulator") == specs.get("simulator")
        fills = same_feed and used.get("slot_filler") == specs.get("slot_filler")
        scores = fills and used.get("recovery_judge") == specs.get("recovery_judge")
        stages = used.get("attribution_judge") == specs.get("attribution_judge")
        if not (fills or stages or voice):
            continue
        name = recording.name
        try:
            with open_recording(recording) as reader:
                for event in reader.iter_events(kinds=["judge_score", "attribution_stage", "message"]):
                    if event.layer is not None or event.system is None:
                        continue
                    if event.kind == "message":
                        if voice and event.role == "user" and event.turn and event.is_done is not None:
                            shares.satisfied.count(event.is_done, name)
                    elif event.kind == "judge_score" and fills and event.system != _NO_MEMORY \
                            and event.rescore_of is None:
                        shares.judged.setdefault(event.system, Tally(RELEASE["judged"])).count(event.call_seq is not None, name)
                        if scores and event.score is not None:
                            shares.recovered.setdefault(event.system, Tally(RELEASE["recovered"])).count(event.score >= OK_THRESHOLD,
                                                                                     name)
                    elif event.kind == "attribution_stage" and stages and not event.cached:
                        if event.stage == 0 and event.verdict in ("can_invite", "cannot_invite"):
                            shares.can_invite.count(event.verdict == "can_invite", name)
                        elif event.stage == 1 and same_feed and event.verdict in ("disclosed", "not_disclosed"):
                            shares.disclosed.count(event.verdict == "disclosed", name)
        except (MemProbeError, OSError):
            continue
    return shares
