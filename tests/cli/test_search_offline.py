"""`codemode search` answers from codemode.lock.json, starts only what the lock cannot stand
in for, lists one source's tools, and refuses an empty query before starting anything
(issue 20 item 10). Each source start is counted in a file, so "not started" is a fact."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from codemodekit.cli import main
from tests.servers import SERVER_SCRIPT


def counted(name: str, starts: Path) -> str:
    """A stdio source running the test server that appends its name to ``starts``."""
    code = (
        f"import runpy, sys; open({str(starts)!r}, 'a').write({name!r} + '\\n'); "
        f"sys.argv = ['server']; runpy.run_path({str(SERVER_SCRIPT)!r}, run_name='__main__')"
    )
    return (
        f'\n[sources.{name}]\ntype = "mcp"\ncommand = "{sys.executable}"\n'
        f'args = ["-c", {json.dumps(code)}]\n'
    )


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    monkeypatch.delenv("CODEMODE_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    starts = tmp_path / "starts.txt"
    config = tmp_path / "codemode.toml"
    config.write_text(
        'version = 1\nname = "offline"\n[policy]\ndefault = "allow"\n' + counted("up", starts),
        encoding="utf-8",
    )
    assert main(["lock", "-c", str(config)]) == 0
    return config, starts


def started(starts: Path) -> list[str]:
    return starts.read_text(encoding="utf-8").split() if starts.exists() else []


def search(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["search", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_current_lock_answers_without_starting_the_source(
    project: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    config, starts = project
    assert started(starts) == ["up"]  # `codemode lock` reached it once
    code, out, err = search(capsys, "echo text back", "-c", str(config))
    assert code == 0, err
    assert "tools.up.echo" in out
    assert "up from codemode.lock.json" in err
    assert started(starts) == ["up"]  # search itself started nothing


def test_only_the_sources_the_lock_cannot_stand_in_for_start(
    project: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    config, starts = project
    config.write_text(config.read_text(encoding="utf-8") + counted("late", starts))
    code, out, err = search(capsys, "echo", "-c", str(config))
    assert code == 0, err
    assert "tools.up.echo" in out and "tools.late.echo" in out
    assert started(starts) == ["up", "late"]  # `late` is not in the lock: started alone
    code, out, err = search(capsys, "echo", "-c", str(config), "--source", "up")
    assert code == 0, err
    assert started(starts) == ["up", "late"]


def test_one_source_s_tools_are_listed(
    project: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    config, starts = project
    code, out, err = search(capsys, "-c", str(config), "--source", "up")
    assert code == 0, err
    listed = [line.split()[0] for line in out.splitlines()]
    assert "tools.up.echo" in listed and "tools.up.add" in listed
    assert listed == sorted(listed)
    code, out, _ = search(capsys, "-c", str(config), "--source", "up", "--json")
    assert code == 0
    assert {"address": "tools.up.echo", "description": "Return the text unchanged."} in (
        json.loads(out)["tools"]
    )
    assert started(starts) == ["up"]


def test_an_empty_query_is_refused_before_anything_starts(
    project: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    config, starts = project
    (config.parent / "codemode.lock.json").unlink()  # nothing could come from the lock
    code, out, err = search(capsys, "", "-c", str(config))
    assert (code, out) == (2, "")
    assert "query must be a non-empty string" in err
    assert "codemode search --source NAME" in err
    assert started(starts) == ["up"]
