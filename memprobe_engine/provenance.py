"""What produced a recording: the header's ``provenance`` block (``events/header.py`` declares it).

Reproduction gaps in this field come from what was not written down — library versions, prompts,
judge models, inputs. Every command that creates a recording asks :func:`collect_provenance` for:

* ``memprobe``: the version and, when the package runs from a git checkout, the source commit and
  whether the working tree had uncommitted changes;
* ``inputs``: content hashes of what the run read, as its protocol names them — protocol A's dimension
  pool, the selected users' banks, tasks and profiles and fixed dialogues; a protocol-B suite's episodes;
* ``prompts``: a hash of every prompt template, read from the source of the modules that hold them
  (module-level upper-case string constants), so the hash changes when a prompt's wording does;
* ``models``: per role, the spec, backend, model and quantization (the embedded model's GGUF file).

Library and runtime versions are the header's ``packages``. Hashes are ``sha256:`` and the first 16
hex digits. Nothing here knows a protocol: each names its inputs' hashes and its prompt modules, which
are parsed, not imported, so collecting provenance never changes what a run loads.
"""

from __future__ import annotations

import ast
import hashlib
import re
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

PACKAGE_ROOT = Path(__file__).resolve().parent

#: The shared modules that hold prompt templates (paths under ``memprobe_engine/``): the memory systems'.
#: A protocol adds its own (its runner's ``prompt_modules``).
PROMPT_MODULES: tuple[str, ...] = (
    "memory/amem.py", "memory/mem0.py", "memory/memoryos_prompts.py", "memory/memt_prompts.py")
#: A module-level constant is a template when its name is upper case and its value a string this long.
_TEMPLATE_MIN_CHARS = 40
_QUANT = re.compile(r"(?:^|[-_.])(q\d(?:_[a-z0-9]+)*|f16|bf16|f32)(?=[-_.]|$)", re.IGNORECASE)


def short_hash(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()[:16]


def files_hash(paths: Iterable[Path], root: Path | None = None) -> str | None:
    """One hash over the files' names (relative to ``root``) and contents; None when none exists."""
    digest = hashlib.sha256()
    found = False
    for path in sorted(paths):
        if not path.is_file():
            continue
        found = True
        name = str(path.relative_to(root)) if root is not None and path.is_relative_to(root) else path.name
        digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return "sha256:" + digest.hexdigest()[:16] if found else None


def source_commit() -> dict[str, Any]:
    """The git commit of the checkout this package runs from (none for an installed wheel)."""
    root = PACKAGE_ROOT.parent
    if not (root / ".git").exists():
        return {}
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=5, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return {}
    return {"commit": head, "dirty": bool(dirty)} if head else {}


def prompt_hashes(modules: Sequence[str] = ()) -> dict[str, str]:
    """``module.CONSTANT`` → hash, for every prompt template of :data:`PROMPT_MODULES` and ``modules``."""
    found: dict[str, str] = {}
    for relative in dict.fromkeys((*PROMPT_MODULES, *modules)):
        path = PACKAGE_ROOT / relative
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (OSError, SyntaxError):
            continue
        module = relative.removesuffix(".py").replace("/", ".")
        for node in tree.body:
            target, value = _assignment(node)
            if target is None or not target.isupper():
                continue
            try:
                text = ast.literal_eval(value) if value is not None else None
            except (ValueError, SyntaxError, TypeError):
                continue  # built at import time (f-strings, joins): its parts are constants of their own
            if isinstance(text, str) and len(text) >= _TEMPLATE_MIN_CHARS:
                found[f"{module}.{target}"] = short_hash(text.encode())
    return found


def _assignment(node: ast.stmt) -> tuple[str | None, ast.expr | None]:
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
        return node.targets[0].id, node.value
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return node.target.id, node.value
    return None, None


def model_provenance(config: Mapping[str, object]) -> dict[str, dict[str, Any]]:
    """Per role: spec, backend, model and quantization, from the resolved models in ``config``."""
    from memprobe_engine.events.header_config import HeaderConfig
    from memprobe_engine.llm.model_assets import TIER_ALIASES, TIERS

    out: dict[str, dict[str, Any]] = {}
    for role, spec in HeaderConfig.of(config).models.models.items():
        backend, model = spec.backend, spec.model
        entry: dict[str, Any] = {"spec": spec.spec, "backend": backend, "model": model,
                                 "quantization": spec.quantization}
        if backend == "local" and isinstance(model, str):
            tier = TIERS.get(TIER_ALIASES.get(model.lower(), model.lower()))
            if tier is not None:
                match = _QUANT.search(tier.filename.removesuffix(".gguf"))
                entry["quantization"] = match.group(1).upper() if match else \
                    "not named by the GGUF file (see its sha256)"
                entry["weights"] = {"file": tier.filename, "sha256": tier.sha256[:16], "description": tier.description}
        elif entry["quantization"] is None:
            entry["quantization"] = "as the endpoint serves it (not reported)"
        out[str(role)] = entry
    return out


def memprobe_version() -> str | None:
    try:
        return metadata.version("memprobe")
    except metadata.PackageNotFoundError:
        return None


def collect_provenance(config: dict[str, Any], *, inputs: Mapping[str, str] | None = None,
                       prompt_modules: Sequence[str] = (), own_prompts: bool = True) -> dict[str, Any]:
    """The header's ``provenance`` block for a run of ``config`` (see the module docstring): ``inputs``
    are the protocol's input hashes, ``prompt_modules`` its prompt modules besides the shared ones.
    ``own_prompts=False`` (an imported release) leaves ``prompts`` empty: the release was made with
    its authors' prompts, not this MemProbe's."""
    return {"memprobe": {"version": memprobe_version(), **source_commit()},
            "inputs": dict(inputs or {}), "prompts": prompt_hashes(prompt_modules) if own_prompts else {},
            "models": model_provenance(config)}
