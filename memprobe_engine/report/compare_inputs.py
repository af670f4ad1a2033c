"""What ``memprobe compare`` compares: two selections (``REC`` or ``REC:SYSTEM``) and how their runs differ.

The warning printed before any number lists every difference between the two runs' headers other
than the systems compared: the configuration (inputs, caps, policy, models, sampling), the package
versions (memory libraries, model runtimes) and the provenance block (input and prompt hashes,
model quantization, MemProbe's version and commit). Keys that name the system under test itself
(``systems``, the imported run's ``release_*`` names, protocol B's per-system ``input_protocols``)
and per-run bookkeeping (run id, creation time, fingerprint, shard) are not differences.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from memprobe_engine.errors import ConfigError
from memprobe_engine.events.header import RecordingHeader, read_header
from memprobe_engine.events.header_config import HeaderConfig

#: Configuration keys that name the systems compared or one run's bookkeeping, never a difference.
SYSTEM_KEYS = frozenset({"systems", "fingerprint", "shard", "input_protocols", "release_run",
                         "release_retrieve_run", "release_reports", "missing_shards"})
#: Model-spec keys that say where a spec came from, not what it is.
_SPEC_NOISE = frozenset({"origin"})


@dataclass(frozen=True)
class Selection:
    """One side of a comparison: a recording and, optionally, one system in it."""

    path: Path
    system: str | None = None

    @property
    def name(self) -> str:
        return f"{self.path}:{self.system}" if self.system else str(self.path)


def parse_selection(text: str) -> Selection:
    """``REC`` or ``REC:SYSTEM``; ConfigError naming the text when no such recording exists."""
    whole = Path(text)
    if whole.is_dir():
        return Selection(whole)
    if ":" in text:
        left, system = text.rsplit(":", 1)
        if Path(left).is_dir() and system:
            return Selection(Path(left), system)
    raise ConfigError(f"{text}: no such recording. Pass a recording folder, or REC:SYSTEM to pick one system "
                      f"of a recording (e.g. recordings/sample-quick-fixed-user_001:longctx_full).")


def _flatten(value: object, prefix: str, out: dict[str, object]) -> None:
    if isinstance(value, dict):
        for key, inner in value.items():
            if key in _SPEC_NOISE:
                continue
            _flatten(inner, f"{prefix}.{key}" if prefix else str(key), out)
    else:
        out[prefix] = value


def _config_view(header: RecordingHeader) -> dict[str, object]:
    """The configuration flattened to dotted keys; each role's model as its one spec string (the
    resolved fields — timeouts, retries, concurrency — say how it was called, not which model)."""
    config: dict[str, object] = {k: v for k, v in header.config.items() if k not in SYSTEM_KEYS}
    if "models" in config:
        config["models"] = {role: spec.spec if spec.spec is not None else spec.model_dump(exclude_unset=True)
                            for role, spec in HeaderConfig.of(header).models.models.items()}
    flat: dict[str, object] = {}
    _flatten(config, "", flat)
    return flat


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "…"


def header_differences(base: RecordingHeader, other: RecordingHeader) -> list[str]:
    """Every difference between two runs' headers except the systems compared, one line each."""
    if base.run_id == other.run_id and base.created == other.created:
        return []  # one recording on both sides (REC:SYSTEM against REC:SYSTEM)
    lines: list[str] = []
    packages: tuple[dict[str, object], dict[str, object]] = (dict(base.packages), dict(other.packages))
    for label, left, right in (("config", _config_view(base), _config_view(other)), ("package", *packages)):
        for key in sorted(set(left) | set(right)):
            if left.get(key) != right.get(key):
                lines.append(f"{label} {key}: {_short(left.get(key, '(absent)'))} vs "
                             f"{_short(right.get(key, '(absent)'))}")
    if base.provenance is None or other.provenance is None:
        missing = [name for name, header in (("base", base), ("other", other)) if header.provenance is None]
        lines.append(f"provenance not recorded in the {' and '.join(missing)} run (made before MemProbe recorded "
                     f"it): inputs, prompts and model files cannot be compared")
        return lines
    a, b = base.provenance, other.provenance
    for key in sorted(set(a.inputs) | set(b.inputs)):
        if a.inputs.get(key) != b.inputs.get(key):
            lines.append(f"input {key}: {a.inputs.get(key, '(absent)')} vs {b.inputs.get(key, '(absent)')}")
    # A run records the templates it can use; one only the other protocol or version records is not a change.
    changed = sorted(k for k in set(a.prompts) & set(b.prompts) if a.prompts[k] != b.prompts[k])
    if changed:
        shown = ", ".join(changed[:4]) + (f" and {len(changed) - 4} more" if len(changed) > 4 else "")
        lines.append(f"prompt templates differ ({len(changed)}): {shown}")
    for role in sorted(set(a.models) | set(b.models)):
        left_q, right_q = (a.models.get(role) or {}).get("quantization"), (b.models.get(role) or {}).get("quantization")
        if left_q != right_q:
            lines.append(f"model {role} quantization: {left_q} vs {right_q}")
    if a.memprobe.get("version") != b.memprobe.get("version") or a.memprobe.get("commit") != b.memprobe.get("commit"):
        lines.append(f"memprobe {a.memprobe.get('version')}@{str(a.memprobe.get('commit') or '?')[:10]} vs "
                     f"{b.memprobe.get('version')}@{str(b.memprobe.get('commit') or '?')[:10]}")
    return lines


def run_differences(base: Selection, other: Selection) -> list[str]:
    """:func:`header_differences` of the two selections' recordings."""
    return header_differences(read_header(base.path), read_header(other.path))


def pair_systems(base: Selection, base_systems: list[str], other: Selection,
                 other_systems: list[str]) -> list[tuple[str, str]]:
    """One to one when each side has one system, else the systems both runs hold, by name."""
    if len(base_systems) == 1 and len(other_systems) == 1:
        return [(base_systems[0], other_systems[0])]
    common = sorted(set(base_systems) & set(other_systems))
    if not common:
        raise ConfigError(f"{base.name} ({', '.join(base_systems) or 'no scores'}) and {other.name} "
                          f"({', '.join(other_systems) or 'no scores'}) share no system; pick one of each with "
                          f"REC:SYSTEM.")
    return [(s, s) for s in common]
