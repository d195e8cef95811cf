"""A `#!` line ends at the first line terminator, whichever of the five it is, as in
JavaScript and TypeScript: the code after it is compiled and run, never erased with it."""

from __future__ import annotations

import pytest

from codemodekit.compiler.compile import CodeCompiler
from codemodekit.errors import CompileFailure, ErrorCode, Location
from tests.compiler.jsrun import body_of, compile_ts, failure, run_ts

TERMINATORS = {"LF": "\n", "CR": "\r", "CRLF": "\r\n", "LS": "\u2028", "PS": "\u2029"}


@pytest.mark.parametrize("terminator", list(TERMINATORS), ids=list(TERMINATORS))
@pytest.mark.parametrize(
    ("line", "code", "expected"),
    [
        ("#!/usr/bin/env codemode", "const n: number = 7; return n", 7),
        ("#!", "return 1", 1),
        ("#! é 😀 tools.a.b", "let s: string = 'x'\nreturn s", "x"),
        ("#!/bin/x", "// after\nreturn 2", 2),
    ],
)
def test_the_code_after_the_hashbang_line_runs(
    terminator: str, line: str, code: str, expected: object
) -> None:
    source = line + TERMINATORS[terminator] + code
    assert run_ts(source) == expected  # also checks every position is kept
    assert body_of(compile_ts(source)).startswith(" " * len(line) + TERMINATORS[terminator])


@pytest.mark.parametrize("terminator", list(TERMINATORS), ids=list(TERMINATORS))
def test_code_after_the_hashbang_line_is_checked(terminator: str) -> None:
    t = TERMINATORS[terminator]
    diagnostic = failure(f"#!/bin/x{t}enum E {{ A }}")
    assert diagnostic.code is ErrorCode.UNSUPPORTED_SYNTAX
    assert diagnostic.location == Location(2, 1)
    with pytest.raises(CompileFailure):
        compile_ts(f"#!/bin/x{t}}}); globalThis.escaped = 1; (async () => {{")


@pytest.mark.parametrize("terminator", list(TERMINATORS), ids=list(TERMINATORS))
def test_sources_named_after_the_hashbang_line_are_referenced(terminator: str) -> None:
    source = f"#!/bin/x{TERMINATORS[terminator]}return await tools.app.echo({{}})"
    assert CodeCompiler().referenced_sources(source) == frozenset({"app"})
