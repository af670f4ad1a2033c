"""The engine must stay importable without Textual: no module under memprobe_engine imports it."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ENGINE = Path(__file__).resolve().parents[2] / "memprobe_engine"
FORBIDDEN = ("textual", "memprobe_tui")


def test_no_engine_module_imports_the_ui() -> None:
    offenders = []
    for path in ENGINE.rglob("*.py"):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f"{path.relative_to(ENGINE.parent)}: {n}" for n in names if n.split(".")[0] in FORBIDDEN]
    assert not offenders, offenders


def test_engine_imports_without_textual_loaded() -> None:
    code = ("import sys, importlib, pkgutil, memprobe_engine\n"
            "for m in pkgutil.walk_packages(memprobe_engine.__path__, 'memprobe_engine.'):\n"
            "    if m.name.endswith('__main__'): continue\n"
            "    importlib.import_module(m.name)\n"
            "print('textual' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
