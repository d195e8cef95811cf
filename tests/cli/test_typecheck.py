"""`codemode typecheck` and `codemode run --typecheck` with the real TypeScript compiler."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from codemodekit.cli import main
from tests.conftest import missing, node_tool


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    tsc = node_tool("tsc")
    monkeypatch.setenv("PATH", f"{tsc.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.delenv("CODEMODE_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    assert main(["init", "."]) == 0
    return tmp_path


def typecheck(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["typecheck", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_starter_script_type_checks(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = typecheck(capsys, "hello.ts")
    assert (code, out) == (0, "")
    assert err.startswith("hello.ts: no type errors (TypeScript 5.") and err.endswith("tsc)\n")


def test_top_level_await_return_and_console_are_not_errors(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "s.ts").write_text(
        "const cart = await tools.demo.get_cart({});\n"
        "console.log('lines', cart.structuredContent?.lines.length);\n"
        "console.warn('w'); console.error('e'); console.info('i'); console.debug('d');\n"
        "return cart.structuredContent;\n",
        encoding="utf-8",
    )
    assert typecheck(capsys, "s.ts")[0] == 0


def test_errors_are_reported_at_the_scripts_own_lines_and_columns(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "bad.ts").write_text(
        "// a comment line\n"
        "const found = await tools.demo.search_products({ query: 1 });\n"
        "const items = found.structuredContent?.itemz;\n"
        "await tools.demo.no_such_tool({});\n"
        "return items;\n",
        encoding="utf-8",
    )
    code, out, err = typecheck(capsys, "bad.ts")
    assert (code, out) == (1, "")
    lines = err.splitlines()
    assert lines[0].startswith("bad.ts:2:50: error TS2322: Type 'number' is not assignable")
    assert lines[1].startswith("bad.ts:3:40: error TS2551: Property 'itemz' does not exist")
    assert lines[2].startswith("bad.ts:4:18: error TS2339: Property 'no_such_tool' does not")
    assert lines[-1].startswith("bad.ts: 3 type errors (TypeScript ")


def test_an_unclosed_block_is_reported_inside_the_script(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "open.ts").write_text("if (1 > 0) {\n  console.log('x');\n", encoding="utf-8")
    code, _, err = typecheck(capsys, "open.ts")
    assert code == 1
    first = err.splitlines()[0]
    assert first.startswith("open.ts:") and "TS1005" in first
    line = int(first.split(":")[1])
    assert 1 <= line <= 2


def test_run_typecheck_stops_before_running(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "bad.ts").write_text("const n: number = 'one';\nreturn n;\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["run", "--typecheck", "bad.ts"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("bad.ts:1:7: error TS2322")
    assert "codemode run: compile" not in err  # it never ran
    capsys.readouterr()
    assert main(["run", "--typecheck", "hello.ts"]) == 0
    assert "Stoneware mug" in capsys.readouterr().out


def test_without_node_or_tsc_the_message_says_what_to_install(
    project: Path,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    empty = tmp_path_factory.mktemp("bin")
    monkeypatch.setenv("PATH", str(empty))
    code, _, err = typecheck(capsys, "hello.ts")
    assert code == 2
    assert "Node.js is not installed" in err and "npm install --save-dev typescript" in err

    node = shutil.which("node", path=os.defpath + os.pathsep + "/usr/local/bin")
    if node is None:
        missing("node", "install Node.js 20 and npm")
    (empty / "node").symlink_to(node)
    code, _, err = typecheck(capsys, "hello.ts")
    assert code == 2
    assert err == (
        "codemode typecheck: the TypeScript compiler (tsc) was not found; install it with "
        "`npm install --save-dev typescript` in your project "
        "(or `npm install --global typescript`)\n"
    )
