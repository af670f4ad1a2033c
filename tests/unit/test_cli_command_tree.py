"""The ``memprobe`` command tree — every command, its help text and each of its arguments and options —
is the one captured in ``tests/fixtures/cli-commands.json`` (from the tree before each protocol declared
its own commands through its spec). A command a protocol registers keeps its name, options and help.

Regenerate the fixture only for a deliberate change of the command line:
``python -m tests.unit.test_cli_command_tree > tests/fixtures/cli-commands.json``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from memprobe_tui.main import app

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "cli-commands.json"


def _param(param: Any) -> dict[str, Any]:
    """An argument's or option's name, flags, help, default and shape (typer's own parameter classes)."""
    descriptor = getattr(param, "type_descriptor", None)
    annotation = getattr(descriptor, "annotation", None)
    return {"name": param.name, "kind": type(param).__name__, "opts": list(param.opts),
            "secondary_opts": list(param.secondary_opts), "help": getattr(param, "help", None),
            "default": repr(param.default), "required": param.required, "multiple": param.multiple,
            "nargs": param.nargs, "is_flag": getattr(param, "is_flag", False), "hidden": getattr(param, "hidden", False),
            "min": getattr(param, "min", None), "max": getattr(param, "max", None),
            "metavar": param.metavar, "envvar": param.envvar,
            "annotation": None if annotation is None else getattr(annotation, "__name__", repr(annotation))}


def command_tree() -> dict[str, Any]:
    """Every command path (``memprobe generate users``) → its help, its kind and its parameters."""
    root = typer.main.get_command(app)
    tree: dict[str, Any] = {}

    def walk(path: str, command: Any) -> None:
        entry: dict[str, Any] = {"help": command.help, "short_help": command.short_help,
                                 "no_args_is_help": getattr(command, "no_args_is_help", None),
                                 "params": [_param(p) for p in command.params]}
        subcommands = getattr(command, "commands", None)  # a group (typer's own click, or click's)
        if subcommands is not None:
            entry["commands"] = sorted(subcommands)
        tree[path] = entry
        if subcommands is not None:
            for name, sub in subcommands.items():
                walk(f"{path} {name}", sub)

    walk("memprobe", root)
    return tree


def test_every_command_keeps_its_name_options_and_help() -> None:
    expected = json.loads(FIXTURE.read_text())
    actual = json.loads(json.dumps(command_tree()))
    assert sorted(actual) == sorted(expected), "commands added or lost"
    for path, entry in expected.items():
        assert actual[path] == entry, path


if __name__ == "__main__":
    print(json.dumps(command_tree(), indent=1, ensure_ascii=False))
