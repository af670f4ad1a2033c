"""The run's settings as a readable panel (``i`` on any screen of a recording): what was run, with
which models per role, dimensions, k, turn cap and the rest of the resolved configuration the
header holds — so a score can be read next to the choices that produced it."""

from __future__ import annotations


import orjson
from rich.text import Text

from memprobe_engine.events.header import RecordingHeader
from memprobe_engine.events.header_config import HeaderConfig, ResolvedModel
from memprobe_engine.replay.run_history import Attempt
from memprobe_tui.render import Lines, field, heading
from memprobe_tui.timefmt import local_time

#: Plain-language names of the configuration keys runs record (others are shown by their key).
LABELS: dict[str, str] = {
    "suite": "suite", "sessions": "sessions folder", "users": "users", "dimensions": "dimensions",
    "systems": "memory systems", "modes": "access modes (dump_all = full store, retrieve = top-k)",
    "max_turns": "turn cap per task", "k": "k (retrieval top-k for slot-fill)", "agent_k": "agent's top-k per turn",
    "seed": "seed", "temperature": "temperature", "agent_max_tokens": "agent max tokens",
    "simulator_max_tokens": "simulator max tokens", "judge_max_tokens": "judge max tokens",
    "preference_judge_max_tokens": "preference judge max tokens",
    "preference_judge": "preference judge", "shard": "shard", "embeddings": "embeddings",
    "fingerprint": "fingerprint (resume guard)",
}


def _value(value: object) -> str:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return f"{', '.join(value)} ({len(value)})" if len(value) > 3 else ", ".join(value)
    if isinstance(value, bool):
        return "on" if value else "off"
    return value if isinstance(value, str) else orjson.dumps(value).decode()


def model_roles(header: RecordingHeader) -> dict[str, ResolvedModel]:
    """role -> resolved spec entry, from the header config's ``models``."""
    return dict(HeaderConfig.of(header).models.models)


def history_lines(history: list[Attempt]) -> Lines:
    """One line per run session that wrote the recording: a failed attempt, then its resume."""
    lines: Lines = [heading(f"run history ({len(history)} run sessions wrote this recording)")]
    for attempt in history:
        kind = "resume" if attempt.resumed else ("first run" if attempt.number == 1 else "run")
        when = local_time(attempt.started) if attempt.started else "?"
        span = f"seq {attempt.first_seq}–{attempt.last_seq if attempt.last_seq is not None else '…'}"
        text = Text(f"  {attempt.number}. {kind} · {when} · {span} · ")
        text.append(attempt.status, style="green" if attempt.status == "completed" else "bold yellow")
        if attempt.reason:
            text.append(f": {attempt.reason}", style="yellow")
        if attempt.note:
            text.append(f" ({attempt.note})", style="dim")
        lines.append(text)
    if any(a.resumed for a in history):
        lines.append(Text("  A resume re-runs the units its earlier attempt left unfinished; the replay shows "
                          "each unit's latest attempt.", style="dim"))
    return lines


def settings_lines(header: RecordingHeader, history: list[Attempt] | None = None) -> Lines:
    config = header.config
    lines: Lines = [heading("run"), field("run id", header.run_id), field("suite", header.suite),
                    field("created", local_time(header.created)), field("schema version", str(header.schema_version))]
    if history:
        lines += history_lines(history)
    lines.append(heading("benchmark settings"))
    for key, value in config.items():
        if key == "models":
            continue
        lines.append(field(LABELS.get(key, key), _value(value)))
    roles = model_roles(header)
    if roles:
        lines.append(heading("models per role"))
        width = max(len(r) for r in roles)
        for role, entry in roles.items():
            spec = str(entry.spec or f"{entry.backend}:{entry.model}")
            text = Text(f"  {role:<{width}}  ", style="bold")
            text.append(spec, style="cyan")
            if entry.origin:
                text.append(f"  (from {entry.origin})", style="dim")
            lines.append(text)
    else:
        lines += [heading("models per role"), Text("  not recorded in this recording's header", style="dim")]
    if header.packages or header.python:
        lines.append(heading("software"))
        if header.python:
            lines.append(field("python", header.python))
        lines += [field(name, version) for name, version in header.packages.items()]
    return lines
