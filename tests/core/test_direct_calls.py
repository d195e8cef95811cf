"""`await tools.a.b(x)` compiles to a direct call (no proxies): it must mean exactly what
the proxy path means, report the same call site, and never apply where `tools` might not
be the global."""

from __future__ import annotations

from typing import Any

import pytest

from codemodekit import (
    CodeMode,
    ErrorCode,
    RuntimeOptions,
    ToolError,
    allow_all_tool_calls,
    define_tool,
    local,
)
from codemodekit.compiler.compile import CodeCompiler

OBJ: dict[str, Any] = {"type": "object"}
PROXY_PATH = "\nconst __keeps_the_proxy_path = typeof tools;"
"""Any use of `tools` other than `tools.x` keeps a script on the proxy path."""


def _fail(_args: dict[str, Any]) -> Any:
    raise ToolError("disk full", code="507")


def _code_mode(mode: str = "process") -> CodeMode:
    tools = {
        "echo": define_tool(description="e", input_schema=OBJ, execute=lambda a: a),
        "fail": define_tool(description="f", input_schema=OBJ, execute=_fail),
    }
    return CodeMode(
        sources=[local("fs", tools)],
        policy=allow_all_tool_calls(),
        runtime=RuntimeOptions(mode=mode),  # type: ignore[arg-type]
    )


def _lowered(code: str) -> bool:
    return CodeCompiler().compile(code, max_source_bytes=1 << 20).javascript.startswith("[(async")


SAME_AS_PROXY = {
    "sequential": "let n = 0;\nfor (let i = 0; i < 5; i++) n += (await tools.fs.echo({ i })).structuredContent.i;\nreturn n;",
    "no arguments": "return (await tools.fs.echo()).structuredContent;",
    "extra arguments ignored": "return (await tools.fs.echo({ a: 1 }, { b: 2 })).structuredContent;",
    "caught failure": "try { await tools.fs.fail({}); } catch (e) {\n  return [e.name, e.code, e.upstreamCode, e.tool, e.message, e instanceof Error];\n}",
    "uncaught failure": "const x = 1;\n  await tools.fs.fail({ x });",
    "failure in a nested function": "async function save(v: number) {\n  return await tools.fs.fail({ v });\n}\nawait save(1);",
    "arguments that are not JSON": "await tools.fs.echo({ n: 10n });",
    "caught bad arguments": "try { await tools.fs.echo({ m: new Map() }); } catch (e) { return [e.code, e.details.path]; }",
    "unknown tool": "await tools.fs.ech({});",
    "unknown source": "await tools.fz.echo({});",
    "mixed with the proxy path": "const p = tools.fs.echo({ a: 1 });\nconst b = await tools.fs.echo({ b: 2 });\nreturn [(await p).structuredContent, b.structuredContent];",
    "order of evaluation": "const seen: number[] = [];\nconst v = await tools.fs.echo({ a: (seen.push(1), 1) });\nseen.push(2);\nreturn [seen, v.structuredContent];",
}


@pytest.mark.parametrize("mode", ["process", "inline"])
@pytest.mark.parametrize("code", list(SAME_AS_PROXY.values()), ids=list(SAME_AS_PROXY))
async def test_a_direct_call_means_what_the_proxy_path_means(mode: str, code: str) -> None:
    assert _lowered(code) and not _lowered(code + PROXY_PATH)
    async with _code_mode(mode) as cm:
        direct = await cm.run(code)
        proxied = await cm.run(code + PROXY_PATH)
    assert direct.ok == proxied.ok
    assert direct.value == proxied.value
    assert direct.warnings == proxied.warnings
    if proxied.diagnostic is None:
        assert direct.diagnostic is None
    else:
        assert direct.diagnostic is not None
        assert direct.diagnostic.code == proxied.diagnostic.code
        assert direct.diagnostic.message == proxied.diagnostic.message
        assert direct.diagnostic.location == proxied.diagnostic.location


async def test_the_site_is_the_start_of_the_call_expression() -> None:
    code = "const v = 2;\nasync function save() {\n  const r = await tools.fs.fail({ v, w: v + 1 });\n}\nawait save();"
    async with _code_mode() as cm:
        result = await cm.run(code)
    assert result.diagnostic is not None and result.diagnostic.code is ErrorCode.TOOL_ERROR
    location = result.diagnostic.location
    assert location is not None and (location.line, location.column) == (3, 19)


SHADOWED = {
    "a local const": "const tools = { fs: { echo: async () => 'mine' } };\nreturn await tools.fs.echo({});",
    "a parameter": "async function f(tools: any) { return await tools.fs.echo({}); }\nreturn await f({ fs: { echo: async () => 'mine' } });",
    "a destructured name": "const { tools } = { tools: { fs: { echo: async () => 'mine' } } };\nreturn await tools.fs.echo({});",
    "a catch parameter": "try { throw { fs: { echo: async () => 'mine' } }; } catch (tools) {\n  return await tools.fs.echo({});\n}",
    "a with statement": "const o = { tools: { fs: { echo: async () => 'mine' } } };\nwith (o) { return await tools.fs.echo({}); }",
}


@pytest.mark.parametrize("code", list(SHADOWED.values()), ids=list(SHADOWED))
async def test_a_script_where_tools_may_be_another_binding_keeps_its_meaning(code: str) -> None:
    assert not _lowered(code)
    async with _code_mode() as cm:
        result = await cm.run(code)
    assert result.value == "mine", result.diagnostic


async def test_the_call_table_cannot_be_named_by_the_script() -> None:
    code = (
        "const r = await tools.fs.echo({ a: 1 });\n"
        "return [typeof $cm, typeof $cm1, typeof $cm2, r.structuredContent];"
    )
    assert _lowered(code)
    async with _code_mode() as cm:
        result = await cm.run(code)
    assert result.value == ["undefined", "undefined", "undefined", {"a": 1}], result.diagnostic


async def test_a_forgotten_await_is_still_pointed_out() -> None:
    async with _code_mode() as cm:
        result = await cm.run(
            "const r = tools.fs.echo({ a: 1 });\nawait tools.fs.echo({});\nreturn r.structuredContent;"
        )
    assert result.ok and result.value is None
    assert any("did you forget `await`" in w for w in result.warnings), result.warnings


LOWERING = {
    "awaited call": ("await tools.fs.echo({});", ["fs", "echo"]),
    "two calls": (
        "await tools.fs.echo({});\nreturn await tools.fs.fail({});",
        ["fs", "echo", "fs", "fail"],
    ),
    "in a string or a comment": (
        "const s = 'await tools.fs.echo({})'; // await tools.fs.fail()",
        [],
    ),
    "optional call": ("await tools.fs.echo?.({});", []),
    "tagged template": ("await tools.fs.echo`x`;", []),
    "not awaited": ("const p = tools.fs.echo({});\nawait p;", []),
    "parenthesized": ("await (tools.fs.echo({}));", []),
    "dotted tool name": ("await tools.fs.a.b({});", []),
    "computed name": ("await tools.fs['echo']({});", []),
    "line break after await": ("await\n  tools.fs.echo({});", []),
}


@pytest.mark.parametrize(("code", "sites"), list(LOWERING.values()), ids=list(LOWERING))
def test_only_awaited_calls_of_plain_names_are_lowered(code: str, sites: list[str]) -> None:
    javascript = CodeCompiler().compile(code, max_source_bytes=1 << 20).javascript
    if not sites:
        assert not javascript.startswith("[(async") and "$cm" not in javascript
        return
    table = __import__("json").loads(javascript[javascript.rindex("}), ") + 4 : -1])
    assert [x for i, x in enumerate(table) if i % 4 < 2] == sites
    assert len(javascript.splitlines()) == len(code.splitlines()) + 2  # every line kept
