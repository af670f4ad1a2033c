"""CLI help text and flag checks: flags show no `<bool>` type, `[models]` survives Rich markup, and
`--model SPEC` without a role is refused with the form to use."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from memprobe_engine.cli import app
from memprobe_engine.model_flags import role_specs
from memprobe_engine.errors import ConfigError

runner = CliRunner()


def _help(*command: str) -> str:
    result = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    return result.output


def test_run_help_names_the_models_table_and_shows_flags_without_a_type() -> None:
    text = _help("run")
    assert "TOML config with [models]" in text
    flag_lines = [line for line in text.splitlines() if "--no-cache" in line or "--dry-run" in line]
    assert flag_lines and not any("<bool>" in line for line in flag_lines)
    assert "<int>" in next(line for line in text.splitlines() if "--max-turns" in line)  # valued options keep it


def test_a_bare_model_spec_is_refused_with_the_role_form() -> None:
    assert role_specs(["default=local:fast", "slot_filler=openai:m@http://h:1/v1?a=b"]) == [
        "default=local:fast", "slot_filler=openai:m@http://h:1/v1?a=b"]
    with pytest.raises(ConfigError, match=r"--model default=local:fast"):
        role_specs(["local:fast"])
    with pytest.raises(ConfigError, match="ROLE=SPEC"):
        role_specs(["openai:gpt@http://host/v1?x=y"])  # an "=" inside the spec is not a role


@pytest.mark.parametrize("flag", ["--agent-max-tokens", "--simulator-max-tokens", "--judge-max-tokens",
                                  "--preference-judge-max-tokens"])
def test_a_negative_reply_cap_is_refused_with_the_flag_named(flag: str, tmp_path: Path) -> None:
    result = runner.invoke(app, ["run", "--record", str(tmp_path / "never"), "--users", "sim_01", "--systems", "nomem",
                                 flag, "-5", "--dry-run"])
    assert isinstance(result.exception, ConfigError), result.output  # the entry point prints it as one line
    assert f"{flag} -5" in str(result.exception) and "0 for no cap" in str(result.exception)
    assert not (tmp_path / "never").exists()


@pytest.mark.parametrize(("args", "named"), [
    (["--suite", "paradigms", "--sessions", "sessions/paradigms/upstream-sample", "--systems", "latest_value",
      "--max-turns", "3", "--policy", "audit", "--users", "sim_01"], "--users, --max-turns, --policy"),
    (["--suite", "paradigms", "--sessions", "sessions/paradigms/upstream-sample", "--systems", "latest_value",
      "--no-preference-judge"], "--no-preference-judge"),
    (["--users", "sim_01", "--systems", "nomem", "--ingest", "session", "--k", "3"], "--ingest, --k"),
    (["--users", "sim_01", "--systems", "nomem", "--episodes", "PILOT-01A"], "--episodes"),
])
def test_a_flag_of_the_other_protocol_is_refused(args: list[str], named: str, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Before, nine protocol-A flags were silently ignored under --suite paradigms (and the reverse)."""
    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    result = runner.invoke(app, ["run", "--record", str(tmp_path / "never"), *args])
    assert isinstance(result.exception, ConfigError), result.output
    assert str(result.exception).startswith(f"{named}: only a --suite ")
    assert not (tmp_path / "never").exists()


def test_the_protocols_own_options_are_real_options_of_run() -> None:
    """Each built-in protocol's options are flags of run (the registry derives who may read which)."""
    from memprobe_engine.protocols import BUILT_IN

    text = _help("run")
    for spec in BUILT_IN.values():
        for name in spec.options.model_fields:
            assert "--" + name.replace("_", "-") in text, (spec.name, name)
