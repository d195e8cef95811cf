"""Test helpers: compile through the public API and run the result in a bare QuickJS context."""

from __future__ import annotations

import json
import re
from typing import Any

import quickjs

from codemodekit.compiler.compile import CodeCompiler
from codemodekit.errors import CompileFailure, Diagnostic
from codemodekit.sandbox.base import CompiledProgram

COMPILER = CodeCompiler()
LIMIT = 1 << 20
_LINE_TERMINATORS = "\n\r\u2028\u2029"
# Characters the compiler may write inside erased text so the JavaScript keeps its meaning.
_WRITTEN = " ;0,"


class JsError(Exception):
    """The program threw: ``stack`` is QuickJS's message and stack."""

    def __init__(self, stack: str) -> None:
        super().__init__(stack)
        self.stack = stack


def compile_ts(source: str) -> CompiledProgram:
    return COMPILER.compile(source, max_source_bytes=LIMIT)


def failure(source: str, *, limit: int = LIMIT) -> Diagnostic:
    try:
        COMPILER.compile(source, max_source_bytes=limit)
    except CompileFailure as exc:
        return exc.diagnostic
    raise AssertionError(f"expected a CompileFailure for {source!r}")


def run_js(javascript: str) -> Any:
    """Evaluate an expression yielding a Promise; return its JSON value or raise JsError."""
    ctx = quickjs.Context()
    ctx.set_time_limit(5)
    ctx.eval("globalThis.__tools = { calls: [] };")
    ctx.eval(
        "globalThis.tools = new Proxy({}, { get: (_, source) => new Proxy({}, {"
        " get: (_, tool) => async (args) => { __tools.calls.push([source, tool]);"
        " return { content: [], structuredContent: { source, tool, args } }; } }) });"
    )
    ctx.eval("globalThis.__state = 'pending';")
    ctx.eval("globalThis.__p = " + javascript)
    ctx.eval(
        "__p.then(v => { globalThis.__state = 'ok';"
        " globalThis.__value = JSON.stringify(v === undefined ? null : v) ?? '\"<not JSON>\"'; },"
        " e => { globalThis.__state = 'error';"
        " globalThis.__value = String(e) + '\\n' + (e && e.stack || ''); })"
    )
    while ctx.execute_pending_job():
        pass
    state = ctx.eval("__state")
    value = ctx.eval("__value")
    if state == "ok":
        return json.loads(value)
    if state == "error":
        raise JsError(value)
    raise AssertionError("the program never settled")


def run_ts(source: str) -> Any:
    program = compile_ts(source)
    assert_positions_preserved(source, program)
    return run_js(program.javascript)


def body_of(program: CompiledProgram) -> str:
    """The user's part of the JavaScript (after the wrapper head, before the tail)."""
    head_end = 0
    for _ in range(program.line_offset):
        head_end = program.javascript.index("\n", head_end) + 1
    return program.javascript[head_end : program.javascript.rindex("\n")]


def assert_positions_preserved(source: str, program: CompiledProgram) -> None:
    """Every character kept at its index; erased ones are blanks, line breaks stay put (one
    QuickJS would not count as a line may become LF)."""
    body = body_of(program)
    assert len(body) == len(source), (source, body)
    for index, (original, output) in enumerate(zip(source, body, strict=True)):
        if original in _LINE_TERMINATORS:
            assert output in (original, "\n"), f"line break moved at {index}: {body!r}"
        elif output != original:
            assert output in _WRITTEN, f"character {original!r} at {index} became {output!r}"


def stack_position(stack: str) -> tuple[int, int]:
    """The first `<input>:line:column` of a QuickJS stack."""
    match = re.search(r"<input>:(\d+):(\d+)", stack)
    assert match is not None, stack
    return int(match.group(1)), int(match.group(2))
