"""Which codemode.toml a command uses: -c (before or after the subcommand), then
$CODEMODE_CONFIG, then the nearest one from the current folder upward."""

from __future__ import annotations

from pathlib import Path

import pytest

from codemodekit.cli import main


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("CODEMODE_CONFIG", raising=False)
    assert main(["init", str(tmp_path / "proj")]) == 0
    return tmp_path / "proj"


def check(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["check", *argv]) if "check" not in argv else main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_found_from_a_nested_folder(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    nested = project / "scripts" / "deep"
    nested.mkdir(parents=True)
    monkeypatch.chdir(nested)
    code, out, err = check(capsys)
    assert code == 0, err
    assert "../../codemode.toml: spec is valid" in out


def test_not_found_anywhere_says_how_to_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("CODEMODE_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert main(["search", "x"]) == 2
    err = capsys.readouterr().err
    assert "codemode.toml does not exist" in err and "CODEMODE_CONFIG" in err


@pytest.mark.parametrize("before", [True, False])
def test_dash_c_before_or_after_the_subcommand(
    project: Path,
    tmp_path: Path,
    before: bool,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    config = str(project / "codemode.toml")
    argv = ["-c", config, "check"] if before else ["check", "-c", config]
    code, out, err = check(capsys, *argv)
    assert code == 0, err
    assert f"{config}: spec is valid" in out


def test_environment_variable_overrides_the_search_and_dash_c_overrides_it(
    project: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    broken = tmp_path / "broken.toml"
    broken.write_text("version = 1\nname = 3\n", encoding="utf-8")
    monkeypatch.chdir(project)  # a valid codemode.toml is right here
    monkeypatch.setenv("CODEMODE_CONFIG", str(broken))
    code, _, err = check(capsys)
    assert code == 2 and "broken.toml" in err
    # A folder is accepted as well as a file.
    code, _, err = check(capsys, "-c", str(project))
    assert code == 0, err
