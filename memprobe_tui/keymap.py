"""The user's keymap: ``~/.config/memprobe/keymap.toml`` maps binding ids to keys.

Every binding in the app has an id (``screen.action``); the file overrides the keys of any of them,
for example ``"transcript.next_event" = "j,down,ctrl+n"``, at the top level or under ``[keymap]``.
Textual applies it through :meth:`textual.app.App.set_keymap`. Users read about it in docs/tui.md.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

DEFAULT_KEYMAP = Path("~/.config/memprobe/keymap.toml").expanduser()


def load_keymap(path: Path | None) -> tuple[dict[str, str], str | None]:
    """(binding id -> keys, problem or None). A missing file is no problem; a bad one is reported,
    never fatal, so a typo in the keymap cannot lock anyone out of the app."""
    if path is None or not path.exists():
        return {}, None
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as err:
        return {}, f"{path}: not a readable TOML file ({err}); default keys are used."
    table = data.get("keymap", data)
    keymap: dict[str, str] = {}
    bad: list[str] = []
    for binding_id, keys in table.items():
        if isinstance(keys, str) and keys.strip():
            keymap[str(binding_id)] = keys
        elif isinstance(keys, list) and keys and all(isinstance(k, str) for k in keys):
            keymap[str(binding_id)] = ",".join(keys)
        else:
            bad.append(str(binding_id))
    problem = (f"{path}: {', '.join(bad)}: expected a key string like \"j,down\"; those entries are ignored."
               if bad else None)
    return keymap, problem


def unknown_ids(keymap: dict[str, str], known: set[str]) -> list[str]:
    """Binding ids in the keymap that no binding has (likely typos)."""
    return sorted(set(keymap) - known)
