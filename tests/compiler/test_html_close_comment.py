"""`-->` after a line terminator is an HTML-like comment for QuickJS (to the end of its line)
and `x-- > …` for tree-sitter: every such `-->` is refused, whichever of the five line
terminators precedes it and however it is hidden (in a block comment, after a line comment,
in erased type syntax); a `-->` with no line break before it keeps TypeScript's `x-- > y`.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from codemodekit import CodeMode, RuntimeOptions, allow_all_tool_calls, define_tool, local
from codemodekit.errors import ErrorCode, Location
from tests.compiler.jsrun import compile_ts, failure, run_ts

TERMINATORS = {"LF": "\n", "CR": "\r", "CRLF": "\r\n", "LS": "\u2028", "PS": "\u2029"}

# `{t}` is a line terminator; the refused `-->` is on the line after it, at `column`.
LEADING = {
    "bare": ("let x = 5; x{t}--> 1\nreturn x", 1),
    "indented": ("let x = 5; x{t} \t--> 1\nreturn x", 3),
    "block_comment_holding_it": ("let x = 5; x /*{t}*/ --> 1\nreturn x", 4),
    "block_comments_around_it": ("let x = 5; x /*a*/ /*{t}*/ /*b*/--> 1\nreturn x", 9),
    "after_line_comment": ("let x = 5; x // c{t}--> 1\nreturn x", 1),
    "after_non_null": ("let x = 5; x!{t}--> 1\nreturn x", 1),
    "after_erased_type_holding_it": ("let x = 5; x<{t}number>--> 1\nreturn x", 8),
    "start_of_line_after_statement": ("let x = 5;{t}-->x\nreturn x", 1),
}


@pytest.mark.parametrize("terminator", list(TERMINATORS), ids=list(TERMINATORS))
@pytest.mark.parametrize("case", list(LEADING), ids=list(LEADING))
def test_a_line_leading_close_comment_is_refused(case: str, terminator: str) -> None:
    template, column = LEADING[case]
    diagnostic = failure(template.format(t=TERMINATORS[terminator]))
    assert diagnostic.code is ErrorCode.UNSUPPORTED_SYNTAX
    assert "HTML-like comments" in diagnostic.message
    assert diagnostic.location == Location(2, column)


def test_a_close_comment_first_in_the_code_is_refused() -> None:
    assert failure("--> 1\nreturn 1").location == Location(1, 1)
    assert failure(" /* c */ --> 1\nreturn 1").location == Location(1, 10)


@pytest.mark.parametrize(
    "source",
    [
        "let x = 5; x--> 1\nreturn x",
        "let x = 5; x --> 1\nreturn x",
        "let x = 5; x /* c */--> 1\nreturn x",
        "let x = 5; x /* c */ /* d */ --> 1\nreturn x",
        "let x = 5\nx /* c */ --> 1\nreturn x",
        "let x = 5, n = 0;\nwhile (x\t-->\u00a00) n++\nreturn [x, n]",
    ],
)
def test_a_close_comment_inside_a_line_is_a_decrement(source: str) -> None:
    assert run_ts(source) in (4, [-1, 5])


@pytest.mark.parametrize("terminator", list(TERMINATORS), ids=list(TERMINATORS))
@pytest.mark.parametrize(
    "template",
    [
        "const s = '-->';{t}const t = `{t}-->{t}`; // -->{t}return [s, t]",
        "/*{t}-->{t}*/ return 1",
    ],
)
def test_close_comment_text_in_strings_templates_and_comments_is_fine(
    template: str, terminator: str
) -> None:
    compile_ts(template.format(t=TERMINATORS[terminator]))


ESCAPE = (
    "0{t}--> `\n"
    "}}); var topLevel = (function () {{ return this === globalThis }})(); (async () => {{\n"
    "0{t}--> `\n"
    "return ['ran at script top level:', topLevel]"
)


@pytest.mark.parametrize("terminator", list(TERMINATORS), ids=list(TERMINATORS))
def test_code_does_not_leave_the_function_body_through_a_close_comment(
    terminator: str,
) -> None:
    echo = define_tool(description="echo", input_schema={"type": "object"}, execute=lambda a: a)

    async def run() -> Any:
        async with CodeMode(
            sources=[local("app", {"echo": echo})],
            policy=allow_all_tool_calls(),
            runtime=RuntimeOptions(mode="inline"),
        ) as code_mode:
            return await code_mode.run(ESCAPE.format(t=TERMINATORS[terminator]))

    result = asyncio.run(asyncio.wait_for(run(), 120))
    assert not result.ok
    assert result.diagnostic is not None
    # Refused, as an HTML-like comment or (where tree-sitter reads one) a syntax error.
    assert result.diagnostic.code in (ErrorCode.UNSUPPORTED_SYNTAX, ErrorCode.COMPILE_ERROR)


_LONG_SCRIPTS = textwrap.dedent(
    """
    from codemodekit.compiler.compile import CodeCompiler
    from codemodekit.errors import CompileFailure

    compiler = CodeCompiler(parse_budget_ms=10**9)
    size = 2 << 20
    for source in ("let x = 9; " + "x-->0;" * (size // 6), "let x = 9;" + "\\n-->0" * (size // 5)):
        try:
            compiler.compile(source, max_source_bytes=size * 2)
        except CompileFailure:
            pass
    """
)


def test_many_close_comments_are_checked_in_one_pass() -> None:
    # 2 MiB of `x-->0;`: linear, this takes seconds; the per-occurrence scan took minutes.
    done = subprocess.run(
        [sys.executable, "-c", _LONG_SCRIPTS], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
