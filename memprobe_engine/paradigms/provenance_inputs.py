"""Protocol B's inputs as the header's provenance names them: one hash over the suite's episodes."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from memprobe_engine.paradigms.config import ParadigmConfig
from memprobe_engine.provenance import files_hash, short_hash

#: Protocol B's prompt modules (paths under ``memprobe_engine/``), hashed into the provenance block.
PROMPT_MODULES: tuple[str, ...] = ("paradigms/reader.py", "paradigms/realize/prompts.py")


def input_hashes(raw: Mapping[str, object]) -> dict[str, str]:
    """The hash of the suite a protocol-B configuration names: its episodes' digests, else its files."""
    config = ParadigmConfig.of(raw)
    sessions = config.sessions
    if sessions is None or not Path(sessions).is_dir():
        return {}
    digests = config.episode_digests
    if digests is not None:
        return {"suite": short_hash("\n".join(f"{k}={v}" for k, v in sorted(digests.items())).encode())}
    found = files_hash(Path(sessions).rglob("*.json"), Path(sessions))
    return {"suite": found} if found else {}
