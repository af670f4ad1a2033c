"""Where a fixed-dialogue run (``memprobe run --dialogues SOURCE``) takes its dialogues from.

SOURCE is ``RECORDING`` or ``RECORDING@SYSTEM``: the system whose transcripts to use may be left
out when the recording holds one system (or a ``nomem`` unit, which is then taken). Kept apart
from the replay itself (:mod:`.fixed_dialogues`) so the report and the dry run can name a source
without importing the rollout.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from memprobe_engine.errors import ConfigError, MemProbeError
from memprobe_engine.events.reader import open_recording
from memprobe_engine.events.run import SpanBegin
from memprobe_engine.recovery.config import RecoveryConfig

#: How a fixed-dialogue run is named in the header, ``--dry-run`` and every report table.
PHRASE = "fixed dialogues from"


@dataclass(frozen=True)
class DialogueSource:
    """A recording and the system whose transcripts a fixed-dialogue run feeds to memory."""

    recording: Path
    system: str

    def describe(self) -> str:
        return f"{PHRASE} {self.recording} ({self.system})"

    def config(self) -> dict[str, str]:
        """The header's ``dialogues`` entry (part of the fingerprint)."""
        return {"recording": str(self.recording), "system": self.system}


def description(config: RecoveryConfig) -> str | None:
    """``fixed dialogues from …`` for a header config of a fixed-dialogue run, else None."""
    entry = config.dialogues
    return None if entry is None else f"{PHRASE} {entry.recording} ({entry.system})"


def parse_source(text: str) -> DialogueSource:
    """``RECORDING[@SYSTEM]`` → a checked source (the recording opens and holds that system)."""
    path_text, _, system = text.partition("@")
    recording = Path(path_text)
    systems = _unit_systems(recording)
    if system:
        if system not in systems:
            raise ConfigError(f"--dialogues {text}: {recording} holds no {system} run (it holds "
                              f"{', '.join(sorted(systems)) or 'no protocol-A unit'}).")
        return DialogueSource(recording, system)
    if len(systems) == 1:
        return DialogueSource(recording, next(iter(systems)))
    if "nomem" in systems:
        return DialogueSource(recording, "nomem")
    raise ConfigError(f"--dialogues {text}: {recording} holds {', '.join(sorted(systems)) or 'no protocol-A unit'}; "
                      f"name the system whose transcripts to use, e.g. --dialogues {recording}@"
                      f"{min(systems) if systems else 'nomem'}.")


def source_damage(source: DialogueSource) -> str | None:
    """The damage warning of the recording a fixed-dialogue run replays (None when intact): its
    damaged lines and unfinished episodes are left out, as every reader of a recording says."""
    from memprobe_engine.events.integrity import damage_warning_of

    with open_recording(source.recording) as reader:
        return damage_warning_of(reader)


def _unit_systems(recording: Path) -> set[str]:
    try:
        with open_recording(recording) as reader:
            if reader.header.suite != "recovery":
                raise ConfigError(f"--dialogues {recording}: a {reader.header.suite} recording; a fixed-dialogue "
                                  f"run needs a protocol-A (recovery) recording.")
            return {e.system for e in reader.iter_events(kinds=["span_begin"])
                    if isinstance(e, SpanBegin) and e.span_kind == "unit" and e.system is not None}
    except ConfigError:
        raise
    except MemProbeError as err:
        raise ConfigError(f"--dialogues {recording}: not a readable recording ({err}). Pass a recording folder "
                          f"(header.json, events.jsonl), e.g. sessions/release-a/dialogues.") from None
