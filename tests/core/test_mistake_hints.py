"""Issue 13, item 9: common mistakes get a hint ("did you forget `await`?") in
``RunResult.warnings`` (and ``to_json``, the MCP text, the CLI), and in the diagnostic where
the mistake is what failed the run."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from codemodekit import CodeMode, ErrorCode, ToolError, allow_all_tool_calls, define_tool, local
from codemodekit.server.tools import run_result_to_mcp

OBJ: dict[str, Any] = {"type": "object"}


def _fail(_args: dict[str, Any]) -> Any:
    raise ToolError("no such record", code="404")


async def _slow(_args: dict[str, Any]) -> Any:
    await asyncio.sleep(30)
    return 1


TOOLS = {
    "get": define_tool(description="g", input_schema=OBJ, execute=lambda a: {"n": 1}),
    "fail": define_tool(description="f", input_schema=OBJ, execute=_fail),
    "slow": define_tool(description="s", input_schema=OBJ, execute=_slow),
}


@pytest.fixture
async def cm() -> Any:
    async with CodeMode(sources=[local("app", TOOLS)], policy=allow_all_tool_calls()) as cm:
        yield cm


FORGOTTEN = "did you forget `await`"


async def test_returning_unawaited_promises_warns(cm: CodeMode) -> None:
    r = await cm.run("return [tools.app.get({}), tools.app.get({})];")
    assert r.ok and r.value == [{}, {}]
    assert any("2 tool call promises" in w and FORGOTTEN in w for w in r.warnings), r.warnings
    assert r.to_json()["warnings"] == list(r.warnings)


async def test_logging_a_promise_warns_and_says_what_it_is(cm: CodeMode) -> None:
    r = await cm.run("const p = tools.app.get({});\nconsole.log(p);\nawait p;\nreturn 1;")
    assert r.ok
    assert [e.message for e in r.logs] == ["Promise { <pending tools.app.get> }"]
    assert any("logged" in w and FORGOTTEN in w for w in r.warnings), r.warnings


async def test_an_unawaited_call_that_failed_leaves_a_trace(cm: CodeMode) -> None:
    r = await cm.run("tools.app.fail({});\nawait tools.app.get({});\nreturn 1;")
    assert r.ok and r.value == 1
    (warning,) = r.warnings
    assert "tools.app.fail failed (TOOL_ERROR: no such record)" in warning
    assert FORGOTTEN in warning


async def test_an_unawaited_call_still_running_at_the_end_is_reported(cm: CodeMode) -> None:
    r = await cm.run("tools.app.slow({});\nreturn 2;")
    assert r.ok and r.value == 2
    assert any("tools.app.slow" in w and "still running" in w for w in r.warnings), r.warnings


async def test_no_return_after_tool_calls_warns(cm: CodeMode) -> None:
    r = await cm.run("const x = await tools.app.get({});")
    assert r.ok and r.value is None
    assert any("no `return`" in w for w in r.warnings), r.warnings
    quiet = await cm.run("const x = 1;")  # no tools called: nothing to say
    assert quiet.warnings == ()


async def test_reading_a_property_of_a_pending_promise_explains_the_failure(cm: CodeMode) -> None:
    r = await cm.run("const r = tools.app.get({});\nreturn r.structuredContent.n;")
    assert not r.ok and r.diagnostic is not None
    assert r.diagnostic.code is ErrorCode.UNCAUGHT_EXCEPTION
    assert FORGOTTEN in r.diagnostic.message
    assert "`.structuredContent` was read from the promise of tools.app.get" in r.diagnostic.message
    assert any("structuredContent" in w for w in r.warnings)


@pytest.mark.parametrize(
    "code",
    [
        "return (await tools.app.get({})).structuredContent;",
        "const [a, b] = await Promise.all([tools.app.get({}), tools.app.get({})]);\nreturn 1;",
        "return await tools.app.get({}).then((r) => r.structuredContent);",
        "try { await tools.app.fail({}); } catch (e) { return e.upstreamCode; }",
        "const r = await tools.app.fail({}).catch((e) => e.code);\nreturn r;",
        "const p = tools.app.get({});\nconst q = p.finally(() => 0);\nawait q;\nreturn p instanceof Promise;",
        "return await Promise.race([tools.app.get({}), tools.app.get({})]).then(() => 1);",
    ],
)
async def test_correct_code_gets_no_warning(cm: CodeMode, code: str) -> None:
    r = await cm.run(code)
    assert r.ok, r.diagnostic
    assert r.warnings == ()


async def test_warnings_reach_the_mcp_text(cm: CodeMode) -> None:
    code = "return [tools.app.get({})];"
    r = await cm.run(code)
    mcp = run_result_to_mcp(r, code)
    text = "\n".join(c.text for c in mcp.content if hasattr(c, "text"))
    assert "warning:" in text and FORGOTTEN in text
    assert mcp.structured_content is not None
    assert mcp.structured_content["warnings"] == list(r.warnings)


def test_cli_prints_warnings(tmp_path: Path) -> None:
    (tmp_path / "apptools.py").write_text(
        "from codemodekit import define_tool\n"
        "get = define_tool(description='g', input_schema={'type': 'object'},"
        " execute=lambda a: {'n': 1})\n"
    )
    (tmp_path / "codemode.toml").write_text(
        'version = 1\nname = "t"\n[policy]\ndefault = "allow"\n'
        '[sources.app]\ntype = "python"\nmodule = "apptools"\n'
    )
    (tmp_path / "main.ts").write_text("await tools.app.get({});\n")
    r = subprocess.run(
        [sys.executable, "-m", "codemodekit", "run", "main.ts"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert "warning:" in r.stderr and "no `return`" in r.stderr
