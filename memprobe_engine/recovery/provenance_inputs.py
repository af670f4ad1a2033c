"""Protocol A's inputs as the header's provenance names them: content hashes of the dimension pool, the
selected users' banks, tasks and profiles, and the fixed dialogues a run read."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from memprobe_engine.provenance import files_hash
from memprobe_engine.recovery.config import RecoveryConfig

#: Protocol A's prompt modules (paths under ``memprobe_engine/``), hashed into the provenance block.
PROMPT_MODULES: tuple[str, ...] = ("recovery/prompts.py", "recovery/prompts_embedded.py", "recovery/generate.py")


def input_hashes(raw: Mapping[str, object]) -> dict[str, str]:
    """Content hashes of the inputs a protocol-A configuration names (what exists on disk)."""
    config = RecoveryConfig.of(raw)
    found: dict[str, str] = {}
    sessions = config.sessions
    if sessions is not None and Path(sessions).is_dir():
        root = Path(sessions)
        pool = files_hash([root / "pool.json"], root)
        if pool:
            found["pool"] = pool
        users = config.users
        user_dirs = [root / "users" / u for u in users] if users is not None else \
            sorted(p for p in (root / "users").glob("*") if p.is_dir())
        for name in ("bank", "tasks", "profile"):
            digest = files_hash([d / f"{name}.json" for d in user_dirs], root)
            if digest:
                found["banks" if name == "bank" else name] = digest
    dialogues = config.dialogues
    if dialogues is not None:
        digest = files_hash([Path(dialogues.recording) / "events.jsonl"])
        if digest:
            found["dialogues"] = digest
    return {k: v for k, v in found.items() if v}
