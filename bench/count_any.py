"""Count bare ``Any`` annotations (parameters, returns, annotated fields/variables) in packages.

Bare: the annotation is ``Any`` itself, or a union / Optional of ``Any`` with None (``Any | None``).
``dict[str, Any]``, ``list[Any]`` and other containers holding JSON are not counted."""
import ast, sys
from pathlib import Path

def bare(node):
    if node is None: return False
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try: node = ast.parse(node.value, mode="eval").body
        except SyntaxError: return False
    if isinstance(node, ast.Name): return node.id == "Any"
    if isinstance(node, ast.Attribute): return node.attr == "Any"
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        parts = [node.left, node.right]
        return any(bare(p) for p in parts) and all(bare(p) or (isinstance(p, ast.Constant) and p.value is None) for p in parts)
    if isinstance(node, ast.Subscript) and getattr(node.value, "id", getattr(node.value, "attr", "")) == "Optional":
        return bare(node.slice)
    return False

def count(path):
    hits = []
    for f in sorted(Path(path).rglob("*.py")):
        tree = ast.parse(f.read_text())
        for n in ast.walk(tree):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = n.args
                for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs, *( [a.vararg] if a.vararg else []), *([a.kwarg] if a.kwarg else [])]:
                    if bare(arg.annotation): hits.append((f, n.lineno, f"param {arg.arg}"))
                if bare(n.returns): hits.append((f, n.lineno, f"return of {n.name}"))
            elif isinstance(n, ast.AnnAssign) and bare(n.annotation):
                hits.append((f, n.lineno, "field/variable " + ast.unparse(n.target)))
    return hits

if __name__ == "__main__":
    total = 0
    for pkg in sys.argv[1:] or ["memprobe_engine", "memprobe_tui"]:
        hits = count(pkg); total += len(hits)
        print(f"{pkg}: {len(hits)}")
        if "-v" in sys.argv: pass
    print(f"total: {total}")
