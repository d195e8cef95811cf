"""What a new user meets with `codemode run` (issue 20, items 7-9): sources start in the
config's folder, a script that does not compile starts nothing, and a source that died says
why (its own stderr, scrubbed) without promising a background retry."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from codemodekit.cli import main
from tests.servers import SERVER_SCRIPT


def write_spec(folder: Path, sources: str) -> Path:
    config = folder / "codemode.toml"
    config.write_text(
        f'version = 1\nname = "newcomer"\n[policy]\ndefault = "allow"\n{sources}',
        encoding="utf-8",
    )
    return config


def stdio(name: str, *args: str, extra: str = "") -> str:
    quoted = ", ".join(f'"{a}"' for a in args)
    return (
        f'\n[sources.{name}]\ntype = "mcp"\ncommand = "{sys.executable}"\n'
        f"args = [{quoted}]\n{extra}"
    )


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder other than the project's, where the user types the command."""
    monkeypatch.delenv("CODEMODE_CONFIG", raising=False)
    other = tmp_path / "elsewhere"
    other.mkdir()
    monkeypatch.chdir(other)
    return other


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["run", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_relative_args_resolve_against_the_config_folder(
    tmp_path: Path, elsewhere: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "project"
    (project / "tools").mkdir(parents=True)
    shutil.copy(SERVER_SCRIPT, project / "server.py")
    config = write_spec(
        project,
        stdio("here", "server.py") + stdio("there", "../server.py", extra='cwd = "tools"\n'),
    )
    script = project / "where.ts"
    script.write_text(
        "const a = await tools.here.cwd({}), b = await tools.there.cwd({});\n"
        "return [a.structuredContent.result, b.structuredContent.result];\n",
        encoding="utf-8",
    )
    code, out, err = run(capsys, str(script), "-c", str(config), "--json")
    assert code == 0, err
    here, there = json.loads(out)["value"]
    assert Path(str(here)).resolve() == project.resolve()
    assert Path(str(there)).resolve() == (project / "tools").resolve()


def test_a_syntax_error_is_reported_before_any_source_starts(
    tmp_path: Path, elsewhere: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = tmp_path / "started"
    config = write_spec(tmp_path, stdio("slow", "-c", f"open({str(marker)!r}, 'w')"))
    script = tmp_path / "broken.ts"
    script.write_text("const x = await tools.slow.go({});\nreturn (x;\n", encoding="utf-8")
    code, out, err = run(capsys, str(script), "-c", str(config))
    assert (code, out) == (1, "")
    assert "error[COMPILE_ERROR]" in err
    assert "broken.ts:2:" in err
    assert "0 of 1 source started" in err
    assert not marker.exists()  # the source was never started


def test_a_dead_source_shows_its_last_stderr_lines_scrubbed(
    tmp_path: Path,
    elsewhere: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DEAD_TOKEN", "tok-4f9e1c77")
    down = tmp_path / "down"
    down.touch()
    config = write_spec(
        tmp_path,
        stdio(
            "dead",
            str(SERVER_SCRIPT),
            "--down-file",
            str(down),
            "--stderr-env",
            "DEAD_TOKEN",
            extra='env = { DEAD_TOKEN = "${DEAD_TOKEN}" }\n',
        ),
    )
    script = tmp_path / "call.ts"
    script.write_text('return await tools.dead.echo({ text: "x" });\n', encoding="utf-8")
    code, _out, err = run(capsys, str(script), "-c", str(config))
    assert code == 1
    assert "its last stderr lines:" in err
    assert f"  | test server is down: {down} exists" in err
    assert "  | token was ***" in err
    assert "tok-4f9e1c77" not in err
    assert "host log" not in err  # a one-shot command has none
    assert "reconnect" not in err  # nor a background retry


def test_a_source_that_dies_during_the_run_shows_its_stderr(
    tmp_path: Path, elsewhere: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_spec(tmp_path, stdio("up", str(SERVER_SCRIPT)))
    script = tmp_path / "crash.ts"
    script.write_text("return await tools.up.crash({});\n", encoding="utf-8")
    code, _out, err = run(capsys, str(script), "-c", str(config))
    assert code == 1
    assert "error[SOURCE_UNAVAILABLE]" in err
    assert "warning: source 'up' stopped during the run" in err
    assert "  | fatal: crashing on purpose" in err
    assert "host log" not in err
    assert "reconnect" not in err


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (
            '\n[sources.lost]\ntype = "mcp"\ncommand = "./no-such-server"\n',
            "the command was not found",
        ),
        (
            '\n[sources.lost]\ntype = "mcp"\ncommand = "no-such-server-anywhere"\n'
            'env = { KEY = "${CODEMODE_TEST_UNSET_VARIABLE}" }\n',
            "environment variable CODEMODE_TEST_UNSET_VARIABLE is not set",
        ),
    ],
)
def test_an_unfixable_start_failure_promises_no_retry(
    tmp_path: Path,
    elsewhere: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    source: str,
    expected: str,
) -> None:
    monkeypatch.delenv("CODEMODE_TEST_UNSET_VARIABLE", raising=False)
    config = write_spec(tmp_path, source)
    script = tmp_path / "call.ts"
    script.write_text("return await tools.lost.anything({});\n", encoding="utf-8")
    code, _out, err = run(capsys, str(script), "-c", str(config))
    assert code == 1
    assert expected in err
    assert "fix it and restart codemode" in err
    assert "reconnect" not in err and "retrying" not in err


def test_progress_lines_the_bound_drops_are_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("CODEMODE_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    assert main(["init", "."]) == 0
    calls = 30
    script = tmp_path / "many.ts"
    script.write_text(
        f"for (let i = 0; i < {calls}; i++) await tools.demo.get_cart({{}});\nreturn 1;\n",
        encoding="utf-8",
    )
    code, out, err = run(capsys, str(script))
    assert (code, out) == (0, "1\n"), err
    lines = [line for line in err.splitlines() if line.startswith("[progress] ")]
    notes = [line for line in lines if line.endswith("(progress is bounded in rate and count)")]
    shown = len(lines) - len(notes)
    dropped = sum(int(line.split()[2]) for line in notes)
    assert notes  # 60 events in a burst: the rate bound dropped some, and said so
    assert shown + dropped == 2 * calls  # one "calling" and one "finished" line per call
