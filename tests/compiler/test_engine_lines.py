"""Runtime locations count lines the way compile errors do (LF, CR, CRLF, U+2028 and U+2029
each end a line), wherever the terminator is: QuickJS itself does not count CR, U+2028 or
U+2029 inside a block comment, nor a U+2028/U+2029 that ends a `//` comment or continues a
string. And such a terminator ends a `return` as in TypeScript."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from codemodekit import (
    CodeMode,
    RunResult,
    RuntimeOptions,
    ToolError,
    allow_all_tool_calls,
    define_tool,
    local,
)
from codemodekit.errors import ErrorCode, Location
from tests.compiler.jsrun import assert_positions_preserved, compile_ts
from tests.compiler.test_against_tsc import _outcome, _transpile

TERMINATORS = {"LF": "\n", "CR": "\r", "CRLF": "\r\n", "LS": "\u2028", "PS": "\u2029"}

# `{t}` is a line terminator; the failing `null.x` (or tool call) is at the location given.
CONTEXTS: dict[str, tuple[str, Location]] = {
    "between_tokens": ("let a = 1;{t}null.x", Location(2, 1)),
    "block_comment": ("/* a{t}b */ null.x", Location(2, 6)),
    "block_comment_twice": ("let a = 1 /*{t}{t}*/; null.x", Location(3, 5)),
    "block_comments_on_two_lines": ("/*{t}*/ let a = 1;\n/*{t}*/ null.x", Location(4, 4)),
    "ends_line_comment": ("// c{t}null.x", Location(2, 1)),
    "ends_line_comment_after_code": ("let a = 1; // c{t}null.x", Location(2, 1)),
    "string_continuation": ("const s = 'a\\{t}b'; null.x", Location(2, 5)),
    "comment_in_erased_type": ("let x: /*{t}*/ number = 1; null.x", Location(2, 16)),
    "comment_in_template_substitution": ("`${{ /*{t}*/ 1}}`; null.x", Location(2, 9)),
    "before_a_direct_call": ("/* c{t}*/ await tools.app.fail({{}})", Location(2, 10)),
    "before_a_proxied_call": (
        "/* c{t}*/ await tools.app.fail({{}}); typeof tools",
        Location(2, 10),
    ),
}


def _fail(_arguments: Any) -> Any:
    raise ToolError("no")


def _run(mode: str, codes: list[str]) -> list[RunResult]:
    fail = define_tool(description="fail", input_schema={"type": "object"}, execute=_fail)

    async def run() -> list[RunResult]:
        async with CodeMode(
            sources=[local("app", {"fail": fail})],
            policy=allow_all_tool_calls(),
            runtime=RuntimeOptions(mode=mode),  # type: ignore[arg-type]
        ) as code_mode:
            return [await code_mode.run(code) for code in codes]

    return asyncio.run(asyncio.wait_for(run(), 300))


@pytest.mark.parametrize("mode", ["inline", "process"])
def test_runtime_locations_count_every_line_terminator(mode: str) -> None:
    cases = [
        (context, terminator, template.format(t=t), expected)
        for context, (template, expected) in CONTEXTS.items()
        for terminator, t in TERMINATORS.items()
    ]
    results = _run(mode, [code for _, _, code, _ in cases])
    wrong = {}
    for (context, terminator, _, expected), result in zip(cases, results, strict=True):
        assert result.diagnostic is not None, (context, terminator, result.value)
        assert result.diagnostic.code in (ErrorCode.UNCAUGHT_EXCEPTION, ErrorCode.TOOL_ERROR)
        if result.diagnostic.location != expected:
            wrong[context, terminator] = result.diagnostic.location
    assert wrong == {}


ENDS_RETURN = [
    "return // c{t} 1",
    "return /* c{t} */ 1",
    "let a = 1 /* c{t} */\n(a)\nreturn a",
    "const s = 'a\\{t}b'\nreturn s",
    "let n = 2\n// c{t}return n",
]


@pytest.mark.parametrize("terminator", list(TERMINATORS), ids=list(TERMINATORS))
def test_a_line_terminator_after_a_comment_means_what_it_means_in_typescript(
    terminator: str,
) -> None:
    sources = [template.format(t=TERMINATORS[terminator]) for template in ENDS_RETURN]
    for source, output in zip(sources, _transpile(sources), strict=True):
        expected = _outcome(output["js"].replace("export {};", "").rstrip().rstrip(";"))
        program = compile_ts(source)
        assert_positions_preserved(source, program)
        assert _outcome(program.javascript) == expected, source
