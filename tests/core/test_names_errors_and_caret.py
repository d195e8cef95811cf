"""Issue 13: every advertised name is callable (3), caught errors keep their detail (7), the
caret points at the failing call (8). Through ``CodeMode.run`` and the CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from codemodekit import CodeMode, ErrorCode, ToolError, allow_all_tool_calls, define_tool, local
from codemodekit.errors import MAX_DETAIL_VALUE_CHARS, MAX_DETAILS, Location

OBJ: dict[str, Any] = {"type": "object"}

# Names that are also keys of JavaScript's own protocols or of Object/Function prototypes.
TRICKY = [
    "then",
    "constructor",
    "valueOf",
    "toString",
    "toJSON",
    "__proto__",
    "toLocaleString",
    "hasOwnProperty",
    "isPrototypeOf",
    "name",
    "length",
    "prototype",
    "call",
    "catch",
    "finally",
]


def _named(value: str) -> Any:
    return define_tool(description=value, input_schema=OBJ, execute=lambda _a: value)


@pytest.mark.parametrize("name", TRICKY)
async def test_every_advertised_address_is_callable(name: str) -> None:
    async with CodeMode(
        sources=[local("app", {name: _named(f"app.{name}")}), local(name, {"x": _named("x")})],
        policy=allow_all_tool_calls(),
    ) as cm:
        for tool in cm.catalog.tools:
            r = await cm.run(f"return (await {tool.address}({{}})).structuredContent;")
            assert r.ok, (tool.address, r.diagnostic)
            assert r.value == f"{tool.source}.{tool.name}".removeprefix(f"{name}.")


async def test_protocols_still_work_on_sources_with_tricky_tool_names() -> None:
    tools = {n: _named(n) for n in ("then", "toJSON", "toString", "valueOf", "echo")}
    async with CodeMode(sources=[local("app", tools)], policy=allow_all_tool_calls()) as cm:
        r = await cm.run(
            "const ns = await tools.app;\n"  # awaiting a namespace neither hangs nor calls
            "const ref = await tools.app.echo;\n"  # nor does awaiting an uncalled tool
            "console.log(tools.app, tools.app.echo);\n"
            "return [typeof ns, typeof ref, String(tools.app), `${tools.app.echo}`,\n"
            "        JSON.stringify({ a: tools.app.echo, b: 1 })];"
        )
        assert r.ok, r.diagnostic
        assert r.value == ["object", "function", "[tools.app]", "[tools.app.echo]", '{"b":1}']
        assert [e.message for e in r.logs] == ["[tools.app] [Function: tools.app.echo]"]
        assert r.tool_calls == 0


async def test_dotted_tool_names_are_reachable_both_ways() -> None:
    tools = {"contacts.find": _named("find"), "contacts": _named("contacts")}
    async with CodeMode(sources=[local("crm", tools)], policy=allow_all_tool_calls()) as cm:
        r = await cm.run(
            "const a = await tools.crm.contacts.find({});\n"
            'const b = await tools.crm["contacts.find"]({});\n'
            "const c = await tools.crm.contacts({});\n"
            "return [a.structuredContent, b.structuredContent, c.structuredContent];"
        )
        assert r.ok, r.diagnostic
        assert r.value == ["find", "find", "contacts"]
        missing = await cm.run("return await tools.crm.contacts.fnd({});")
        assert missing.diagnostic is not None
        assert missing.diagnostic.code is ErrorCode.TOOL_NOT_FOUND
        assert "contacts.fnd" in missing.diagnostic.message
        assert "contacts.find" in missing.diagnostic.message  # did you mean


async def test_call_apply_and_bind_keep_their_function_meaning() -> None:
    tools = {"echo": define_tool(description="e", input_schema=OBJ, execute=lambda a: a)}
    tools["echo.call"] = _named("echo.call")
    async with CodeMode(sources=[local("t", tools)], policy=allow_all_tool_calls()) as cm:
        r = await cm.run(
            "const a = await tools.t.echo.call(null, { c: 1 });\n"
            "const b = await tools.t.echo.apply(null, [{ a: 1 }]);\n"
            "const c = await tools.t.echo.bind(null, { b: 1 })();\n"
            'const d = await tools.t["echo.call"]({});\n'
            "return [a, b, c, d].map((r) => r.structuredContent);"
        )
    assert r.ok, r.diagnostic
    assert r.value == [{"c": 1}, {"a": 1}, {"b": 1}, "echo.call"]


async def test_tool_references_cannot_be_modified() -> None:
    async with CodeMode(
        sources=[local("app", {"x": _named("x")})], policy=allow_all_tool_calls()
    ) as cm:
        r = await cm.run(
            '"use strict";\n'
            "const out = [];\n"
            "for (const f of [() => { tools.app.x = 1; }, () => { tools.app.x.y = 1; },\n"
            "  () => { delete tools.app.x; }, () => Object.setPrototypeOf(tools.app.x, {}),\n"
            "  () => Object.defineProperty(tools, 'app', { value: 1 })]) {\n"
            "  try { f(); out.push('changed'); } catch (e) { out.push(e.name); }\n"
            "}\n"
            "return [out, (await tools.app.x({})).structuredContent];"
        )
    assert r.ok, r.diagnostic
    assert r.value == [["TypeError"] * 5, "x"]


# -- 7. caught errors keep their detail ---------------------------------------------------------
async def test_a_caught_error_exposes_upstream_code_and_bounded_details() -> None:
    def refuse(args: dict[str, Any]) -> Any:
        raise ToolError(
            "rate limited",
            code=str(args["status"]),
            details={"retry_after": "30", "long": "z" * 5000, "nested": {"a": [1]}}
            | {f"k{i}": i for i in range(40)},
        )

    tools = {"refuse": define_tool(description="r", input_schema=OBJ, execute=refuse)}
    async with CodeMode(sources=[local("api", tools)], policy=allow_all_tool_calls()) as cm:
        r = await cm.run(
            "const seen = [];\n"
            "for (const status of [404, 429]) {\n"
            "  try { await tools.api.refuse({ status }); }\n"
            "  catch (e) { seen.push([e.code, e.upstreamCode, e.details.retry_after,\n"
            "                        Object.isFrozen(e.details), e.details]); }\n"
            "}\n"
            "return seen;"
        )
        assert r.ok, r.diagnostic
        (a, b) = r.value
        assert a[:4] == ["TOOL_ERROR", 404, "30", True]
        assert b[:2] == ["TOOL_ERROR", 429]
        details = a[4]
        assert len(details) <= MAX_DETAILS
        assert len(details["long"]) <= MAX_DETAIL_VALUE_CHARS
        assert details["nested"] == '{"a":[1]}'


async def test_a_caught_input_error_has_details_and_no_upstream_code() -> None:
    schema = {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}
    tools = {"get": define_tool(description="g", input_schema=schema, execute=lambda a: a)}
    async with CodeMode(sources=[local("app", tools)], policy=allow_all_tool_calls()) as cm:
        r = await cm.run(
            "try { await tools.app.get({ id: 7 }); }\n"
            "catch (e) { return [e.code, e.upstreamCode === undefined, e.details.path]; }"
        )
    assert r.value == ["TOOL_INPUT_INVALID", True, "$.id"]


# -- 8. the caret points at the failing call ----------------------------------------------------
CARET_CASES = [
    (
        "const before = { c: 1 }; const other = 'o';\n"
        "await tools.fs.write_file({ path: 'out.txt', content: other + before.c });",
        Location(2, 7),
    ),
    (
        "const before = { c: 1 };\n"
        "const r = await tools.fs.write_file({\n"
        "  path: 'out.txt',\n"
        "  content: JSON.stringify(before) + String(before.c),\n"
        "});",
        Location(2, 17),
    ),
    ("const x = [1];\n  await tools.fs.write_file({ n: x.length + x[0] });", Location(2, 9)),
    # Read for a later call: the read is not the call; the call's own line is reported.
    ("const f = tools.fs.write_file;\nawait f({ a: [1].map((v) => v + 1) });", Location(2, 0)),
]


@pytest.mark.parametrize(("code", "where"), CARET_CASES)
async def test_the_location_is_the_failing_call_expression(code: str, where: Location) -> None:
    def fail(_args: dict[str, Any]) -> Any:
        raise ToolError("disk full")

    tools = {"write_file": define_tool(description="w", input_schema=OBJ, execute=fail)}
    async with CodeMode(sources=[local("fs", tools)], policy=allow_all_tool_calls()) as cm:
        r = await cm.run(code)
    assert r.diagnostic is not None and r.diagnostic.code is ErrorCode.TOOL_ERROR
    location = r.diagnostic.location
    assert location is not None and location.line == where.line
    if where.column:
        assert location.column == where.column


def test_cli_caret_marks_the_tool_call(tmp_path: Path) -> None:
    (tmp_path / "fstools.py").write_text(
        "from codemodekit import ToolError, define_tool\n"
        "def _fail(args):\n"
        "    raise ToolError('disk full')\n"
        "write_file = define_tool(description='w', input_schema={'type': 'object'},"
        " execute=_fail)\n"
    )
    (tmp_path / "codemode.toml").write_text(
        'version = 1\nname = "t"\n[policy]\ndefault = "allow"\n'
        '[sources.fs]\ntype = "python"\nmodule = "fstools"\n'
    )
    (tmp_path / "main.ts").write_text(
        "const before = { c: 1 }; const other = 'o';\n"
        "await tools.fs.write_file({ path: 'out.txt', content: other + before.c });\n"
    )
    r = subprocess.run(
        [sys.executable, "-m", "codemodekit", "run", "main.ts"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 1, r.stderr
    out = r.stdout + r.stderr
    lines = out.splitlines()
    (index,) = [i for i, line in enumerate(lines) if "await tools.fs.write_file(" in line]
    code_line, caret_line = lines[index], lines[index + 1]
    assert caret_line.index("^") == code_line.index("tools.fs.write_file")
