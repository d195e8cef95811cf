"""A name written with `\\u` escapes is the name it spells: `\\u0074ools` binds `tools`.

The compiler's checks that `tools` is the global (direct calls) and which sources a script
names (`codemode run`) compare names' text; an escaped spelling must not get past them, in
any of its forms, while escapes in strings, templates, regular expressions and comments
change nothing.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from codemodekit import CodeMode, RunResult, RuntimeOptions, allow_all_tool_calls, define_tool
from codemodekit import local as local_source
from codemodekit.compiler.compile import CodeCompiler

SPELLINGS = {
    "first": "\\u0074ools",
    "middle": "to\\u006fls",
    "last": "tool\\u0073",
    "braced": "\\u{74}ools",
    "braced_padded": "\\u{000074}ools",
    "all": "\\u0074\\u006f\\u006f\\u006c\\u0073",
}

# `{name}` is an escaped spelling of `tools`; each binds a local `tools` TypeScript calls.
SHADOWS = {
    "const": "const {name} = {{ app: {{ echo: async (a: any) => 'local' }} }};\n"
    "return await tools.app.echo({{}})",
    "parameter": "async function f({name}: any) {{ return await tools.app.echo({{}}) }}\n"
    "return await f({{ app: {{ echo: async () => 'local' }} }})",
    "destructured": "const {{ {name} }} = {{ tools: {{ app: {{ echo: async () => 'local' }} }} }};\n"
    "return await tools.app.echo({{}})",
    "catch": "try {{ throw {{ app: {{ echo: async () => 'local' }} }} }} catch ({name}) {{\n"
    "  return await tools.app.echo({{}})\n}}",
    "function": "function {name}() {{}}\n{name}.app = {{ echo: async () => 'local' }};\n"
    "return await tools.app.echo({{}})",
}


def _run(*codes: str) -> tuple[list[RunResult], list[Any]]:
    calls: list[Any] = []

    def echo(arguments: Any) -> Any:
        calls.append(arguments)
        return "real tool"

    tool = define_tool(description="echo", input_schema={"type": "object"}, execute=echo)

    async def run() -> list[RunResult]:
        async with CodeMode(
            sources=[local_source("app", {"echo": tool})],
            policy=allow_all_tool_calls(),
            runtime=RuntimeOptions(mode="inline"),
        ) as code_mode:
            return [await code_mode.run(code) for code in codes]

    return asyncio.run(asyncio.wait_for(run(), 120)), calls


@pytest.mark.parametrize("spelling", list(SPELLINGS), ids=list(SPELLINGS))
def test_an_escaped_local_tools_is_called_as_typescript_calls_it(spelling: str) -> None:
    results, calls = _run(*(code.format(name=SPELLINGS[spelling]) for code in SHADOWS.values()))
    for shape, result in zip(SHADOWS, results, strict=True):
        assert result.ok, (shape, result.diagnostic)
        assert result.value == "local", shape
    assert calls == []


@pytest.mark.parametrize(
    "name", ["\\u0024cm", "\\u{24}cm", "$\\u0063m", "$c\\u006d", "\\u0024cm1", "$\\u{63}m0"]
)
def test_the_direct_call_table_cannot_be_named_with_escapes(name: str) -> None:
    (result,), calls = _run(f"await tools.app.echo({{}});\nreturn typeof {name}")
    assert result.ok, result.diagnostic
    assert result.value == "undefined"
    assert len(calls) == 1


@pytest.mark.parametrize(
    "code",
    [
        *(f'return await {s}["app"].echo({{}})' for s in SPELLINGS.values()),
        *(f"return await {s}.app.echo({{}})" for s in SPELLINGS.values()),
        "const g = \\u0067lobalThis; return g['to' + 'ols'].app.echo({})",
        "const g = globalT\\u{68}is; return g['to' + 'ols'].app.echo({})",
        "const o = { \\u0074ools }; return o.tools.app.echo({})",
    ],
)
def test_an_escaped_name_makes_the_referenced_sources_unknown(code: str) -> None:
    assert CodeCompiler().referenced_sources(code) is None
    (result,), calls = _run(code)
    assert result.ok, result.diagnostic
    assert len(calls) == 1


ESCAPES_ELSEWHERE = [
    "const s = '\\u0074ools';",
    'const s = "\\\\u0074ools";',
    "const s = `\\u0074ools ${1} \\u{74}`;",
    "const r = /\\u0074ools/u;",
    "// \\u0074ools\n",
    "/* \\u0074ools */",
    "type T = '\\u0074ools';",
]


@pytest.mark.parametrize("prefix", ESCAPES_ELSEWHERE)
def test_escapes_outside_names_keep_direct_calls_and_known_sources(prefix: str) -> None:
    code = prefix + "\nreturn await tools.app.echo({})"
    compiler = CodeCompiler()
    assert compiler.referenced_sources(code) == frozenset({"app"})
    assert compiler.compile(code, max_source_bytes=1 << 20).javascript.startswith("[(async")
    (result,), calls = _run(code)
    assert result.ok, result.diagnostic
    assert len(calls) == 1
