"""``memprobe systems list``: kinds, library versions and why an adapter cannot run here."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memprobe_engine.cli import app
from memprobe_engine.errors import ConfigError
from memprobe_engine.memory import registry
from memprobe_engine.memory.registry import (
    ADAPTER_SYSTEMS,
    list_systems,
    load_system_class,
)


def _installed(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def test_every_system_has_a_kind_and_adapters_name_their_library_version_or_what_is_missing() -> None:
    rows = {row.name: row for row in list_systems()}
    assert rows["memoryos"].kind == "built-in" and rows["memoryos"].unavailable is None
    for name in ADAPTER_SYSTEMS:
        row = rows[name]
        assert row.kind == "adapter"
        cls = getattr(__import__(ADAPTER_SYSTEMS[name].split(":")[0], fromlist=["_"]), ADAPTER_SYSTEMS[name].split(":")[1])
        own = getattr(cls, "installed_version", None)  # cognee: its own virtual environment
        assert row.version == (own() if callable(own) else _installed(cls.distribution))
        if row.version is None:
            assert row.unavailable is not None and cls.extra in row.unavailable
        else:
            assert row.unavailable is None


def test_a_missing_library_is_one_clear_error_naming_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "_installed_version", lambda distribution: None)
    with pytest.raises(ConfigError, match=r"pip install 'memprobe\[mem0ai\]'"):
        load_system_class("mem0ai")
    row = next(row for row in list_systems() if row.name == "mem0ai")
    assert row.version is None and row.unavailable is not None and "memprobe[mem0ai]" in row.unavailable


def test_cognee_outside_its_venv_names_the_install_command(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MEMPROBE_COGNEE_VENV", str(tmp_path / "no-venv"))
    with pytest.raises(ConfigError, match=r"memprobe systems install cognee"):
        load_system_class("cognee")
    row = next(row for row in list_systems() if row.name == "cognee")
    assert row.version is None and row.unavailable is not None and str(tmp_path / "no-venv") in row.unavailable
    # a venv with cognee's metadata in it is what counts as installed (no interpreter is started to ask)
    info = tmp_path / "venv" / "lib" / "python3.11" / "site-packages" / "cognee-1.6.5.dist-info"
    info.mkdir(parents=True)
    (tmp_path / "venv" / "bin").mkdir()
    (tmp_path / "venv" / "bin" / "python").touch()
    monkeypatch.setenv("MEMPROBE_COGNEE_VENV", str(tmp_path / "venv"))
    assert next(row for row in list_systems() if row.name == "cognee").version == "1.6.5"


def test_the_command_prints_kind_and_version_columns() -> None:
    result = CliRunner().invoke(app, ["systems", "list"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "kind" in result.output and "version" in result.output
    assert "memoryos" in result.output and "mem0ai" in result.output and "adapter" in result.output
