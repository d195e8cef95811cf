"""Failures the command line ends with one clear line (issue 14, item 9)."""

from __future__ import annotations

from pathlib import Path

import pytest

from codemodekit import CodeMode, define_tool, local
from codemodekit.bridge.policy import allow_all_tool_calls
from codemodekit.cli import main
from tests.conftest import codemode_cli

TOOLS_MODULE = """
from codemodekit import define_tool

def _boom(args):
    raise RuntimeError("internal detail")

boom = define_tool(description="Fails", input_schema={"type": "object"}, execute=_boom)
"""
SPEC = """version = 1
name = "t"
[policy]
default = "allow"
[sources.app]
type = "python"
module = "one_line_tools"
"""
BROKEN = '[sources.broken]\ntype = "mcp"\ncommand = "/nonexistent/codemode-one-line"\n'


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("CODEMODE_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "one_line_tools.py").write_text(TOOLS_MODULE, encoding="utf-8")
    (tmp_path / "codemode.toml").write_text(SPEC + BROKEN, encoding="utf-8")
    (tmp_path / "s.ts").write_text("return await tools.app.boom({});\n", encoding="utf-8")
    return tmp_path


def test_an_internal_tool_error_has_no_traceback_unless_verbose(project: Path) -> None:
    done = codemode_cli(project, "run", "s.ts")
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert "TOOL_INTERNAL_ERROR" in done.stderr
    assert "run with --verbose for the traceback" in done.stderr
    assert "internal detail" not in done.stderr  # the cause stays in the host log
    verbose = codemode_cli(project, "run", "s.ts", "--verbose")
    assert verbose.returncode == 1
    assert "Traceback" in verbose.stderr and "RuntimeError: internal detail" in verbose.stderr


def test_serve_with_stdin_from_dev_null_is_one_line(project: Path) -> None:
    done = codemode_cli(project, "serve")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith("codemode serve: standard input is not connected to an MCP")


def test_check_does_not_promise_a_reconnect_as_it_exits(project: Path) -> None:
    done = codemode_cli(project, "check")
    assert done.returncode == 1
    assert "broken" in done.stdout
    assert "reconnecting" not in done.stdout + done.stderr


def test_a_source_that_is_down_is_named_once_in_the_diagnostic(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "d.ts").write_text("return await tools.broken.anything({});\n")
    assert main(["run", "d.ts"]) == 1
    err = capsys.readouterr().err
    assert "source 'broken' is unavailable; its tools are not known yet" in err
    assert "unavailable (unavailable)" not in err
    [warning] = [line for line in err.splitlines() if line.startswith("warning:")]
    assert "reconnecting" not in warning  # the process is about to exit


async def test_did_you_mean_shows_the_form_code_must_write() -> None:
    echo = define_tool(description="e", input_schema={"type": "object"}, execute=lambda a: a)
    cm = CodeMode(
        sources=[local("deploy-api", {"list-jobs": echo}), local("github", {"search": echo})],
        policy=allow_all_tool_calls(),
    )
    async with cm:
        wrong_source = await cm.run('return await tools["deploy-apx"]["list-jobs"]({});')
        wrong_tool = await cm.run('return await tools["deploy-api"]["list-job"]({});')
        plain = await cm.run("return await tools.githb.search({});")
    assert wrong_source.diagnostic is not None and wrong_tool.diagnostic is not None
    assert 'Did you mean `tools["deploy-api"]`?' in wrong_source.diagnostic.message
    assert 'Did you mean `tools["deploy-api"]["list-jobs"]`?' in wrong_tool.diagnostic.message
    assert plain.diagnostic is not None
    assert "Did you mean `tools.github`?" in plain.diagnostic.message
