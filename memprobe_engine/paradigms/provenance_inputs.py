"""Protocol B's inputs as the header's provenance names them: one hash over the suite's episodes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memprobe_engine.provenance import files_hash, short_hash

#: Protocol B's prompt modules (paths under ``memprobe_engine/``), hashed into the provenance block.
PROMPT_MODULES: tuple[str, ...] = ("paradigms/reader.py", "paradigms/realize/prompts.py")


def input_hashes(config: dict[str, Any]) -> dict[str, str]:
    """The hash of the suite a protocol-B configuration names: its episodes' digests, else its files."""
    sessions = config.get("sessions")
    if not isinstance(sessions, str) or not Path(sessions).is_dir():
        return {}
    digests = config.get("episode_digests")
    if isinstance(digests, dict):
        return {"suite": short_hash("\n".join(f"{k}={v}" for k, v in sorted(digests.items())).encode())}
    found = files_hash(Path(sessions).rglob("*.json"), Path(sessions))
    return {"suite": found} if found else {}
