"""Count bare ``Any`` annotations (parameters, returns, annotated fields and variables).

Bare: the annotation is ``Any`` itself, or ``Any`` joined with None (``Any | None``,
``Optional[Any]``). Containers holding JSON (``dict[str, Any]``, ``list[Any]``) are not counted.

    python bench/count_any.py [-v] [package ...]     # default: memprobe_engine memprobe_tui
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _bare(node: ast.expr | None) -> bool:
    if node is None:
        return False
    if isinstance(node, ast.Constant) and isinstance(node.value, str):  # a quoted annotation
        try:
            node = ast.parse(node.value, mode="eval").body
        except SyntaxError:
            return False
    if isinstance(node, ast.Name):
        return node.id == "Any"
    if isinstance(node, ast.Attribute):
        return node.attr == "Any"
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        parts = [node.left, node.right]
        return any(_bare(p) for p in parts) and all(
            _bare(p) or (isinstance(p, ast.Constant) and p.value is None) for p in parts)
    if isinstance(node, ast.Subscript) and getattr(node.value, "id", getattr(node.value, "attr", "")) == "Optional":
        return _bare(node.slice)
    return False


def count(package: str | Path) -> list[tuple[Path, int, str]]:
    """``(file, line, what)`` for every bare Any annotation under ``package``."""
    hits: list[tuple[Path, int, str]] = []
    for path in sorted(Path(package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = node.args
                every = [*args.posonlyargs, *args.args, *args.kwonlyargs,
                         *([args.vararg] if args.vararg else []), *([args.kwarg] if args.kwarg else [])]
                hits += [(path, node.lineno, f"param {a.arg}") for a in every if _bare(a.annotation)]
                if _bare(node.returns):
                    hits.append((path, node.lineno, f"return of {node.name}"))
            elif isinstance(node, ast.AnnAssign) and _bare(node.annotation):
                hits.append((path, node.lineno, f"field/variable {ast.unparse(node.target)}"))
    return hits


def main(argv: list[str]) -> None:
    verbose = "-v" in argv
    packages = [a for a in argv if a != "-v"] or ["memprobe_engine", "memprobe_tui"]
    total = 0
    for package in packages:
        hits = count(ROOT / package)
        total += len(hits)
        print(f"{package}: {len(hits)}")
        if verbose:
            for path, line, what in hits:
                print(f"  {path.relative_to(ROOT)}:{line} {what}")
    print(f"total: {total}")


if __name__ == "__main__":
    main(sys.argv[1:])
