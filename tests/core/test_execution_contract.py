"""Rehearsal of issue 3's hidden suite: the execution core through the public API and CLI.

Written from DESIGN.md, the architecture seed and the issue text only.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from codemodekit import (
    CodeMode,
    ErrorCode,
    Limits,
    LogEntry,
    Phase,
    ProgressEvent,
    RunResult,
    ToolError,
    allow_all_tool_calls,
    define_tool,
    deny_all_tool_calls,
    local,
)
from codemodekit.providers.base import CallContext, ToolSpec
from codemodekit.providers.memory import InMemoryProvider, MemoryTool

OBJ: dict[str, Any] = {"type": "object"}


def _echo(args: dict[str, Any]) -> Any:
    return args


def _tools() -> dict[str, Any]:
    return {
        "echo": define_tool(description="echo", input_schema=OBJ, execute=_echo),
        "lookup": define_tool(
            description="Look up a record",
            input_schema={
                "type": "object",
                "properties": {"id": {"type": "string"}},
                "required": ["id"],
                "additionalProperties": False,
            },
            execute=lambda a: {"id": a["id"]},
        ),
    }


async def _run(code: str, **limits: Any) -> RunResult:
    async with CodeMode(
        sources=[local("app", _tools())],
        policy=allow_all_tool_calls(),
        limits=Limits(**limits) if limits else None,
    ) as cm:
        return await cm.run(code)


def _fail(result: RunResult, code: ErrorCode, phase: Phase | None = None) -> Any:
    assert not result.ok, result
    assert result.diagnostic is not None
    assert result.diagnostic.code == code, result.diagnostic
    if phase is not None:
        assert result.diagnostic.code.phase == phase
    return result.diagnostic


# -- compile errors at the user's line and column ---------------------------------------------

SYNTAX_ERRORS = [
    ("const x = ;", 1),
    ("const a = 1;\nconst b = a +* 2;\nreturn b;", 2),
    ("let s: string = 'x';\n\n\nif (s { return 1 }", 4),
    ("const o = { a: 1,, b: 2 };", 1),
    ("return 1;\nfunction f( {\n}", 2),
    ("const a: number = 1;\nconst = 3;", 2),
]


@pytest.mark.parametrize(("code", "line"), SYNTAX_ERRORS)
async def test_syntax_errors_point_at_the_users_line(code: str, line: int) -> None:
    d = _fail(await _run(code), ErrorCode.COMPILE_ERROR, Phase.COMPILE)
    assert d.location is not None
    assert d.location.line == line
    assert d.location.column >= 1
    assert d.message


async def test_unterminated_block_is_a_compile_error() -> None:
    d = _fail(await _run("if (true) {\n  return 1;\n"), ErrorCode.COMPILE_ERROR)
    assert d.location is not None and d.location.line >= 1


UNSUPPORTED = [
    ("const a = 1;\nenum Color { Red, Green }", 2, 1),
    ("const a = 1;\n  namespace N { export const x = 1; }", 2, 3),
    ("import fs from 'fs';", 1, 1),
    ("const x = 1;\nexport const y = 2;", 2, 1),
    ("const a = 1;\nconst fs = require('fs');", 2, 12),
    ("class A {\n  constructor(private x: number) {}\n}", 2, 15),
    ("function dec(t: any) { return t; }\n@dec\nclass B {}", 2, 1),
    ("const m = await import('fs');", 1, 17),
]


@pytest.mark.parametrize(("code", "line", "column"), UNSUPPORTED)
async def test_unsupported_syntax_has_exact_location(code: str, line: int, column: int) -> None:
    d = _fail(await _run(code), ErrorCode.UNSUPPORTED_SYNTAX, Phase.COMPILE)
    assert d.location is not None
    assert (d.location.line, d.location.column) == (line, column), d


async def test_type_only_syntax_is_erased_and_runs() -> None:
    code = """
interface P { name: string; age?: number }
type Id = string | number;
declare const ghost: number;
function pick<T extends object, K extends keyof T>(o: T, k: K): T[K] { return o[k]; }
function over(a: string): string;
function over(a: any): any { return a; }
abstract class Base { abstract area(): number; protected readonly tag: string = "b"; }
class Sq extends Base implements P {
  name!: string;
  public constructor(public_side: number) { super(); this.side = public_side; }
  private side: number;
  area(): number { return this.side * this.side; }
}
let later!: number;
later = 3;
const p = { name: "a" } satisfies P;
const v = (p as P).name!;
const opt = (x?: number) => x ?? 7;
return { v, s: new Sq(later).area(), k: pick<P, "name">(p, "name"), o: opt(), w: over("w") };
"""
    result = await _run(code)
    assert result.ok, result.diagnostic
    assert result.value == {"v": "a", "s": 9, "k": "a", "o": 7, "w": "w"}


async def test_source_too_large() -> None:
    d = _fail(await _run("return 1;//" + "x" * 200, source_bytes=64), ErrorCode.SOURCE_TOO_LARGE)
    assert d.code.phase == Phase.COMPILE


async def test_runtime_exception_points_at_users_line() -> None:
    code = "const a: string = 'x';\nconst b: number = 2;\nthrow new Error('boom');"
    d = _fail(await _run(code), ErrorCode.UNCAUGHT_EXCEPTION, Phase.SANDBOX)
    assert "boom" in d.message
    assert d.location is not None and d.location.line == 3


# -- explicit return ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "value"),
    [
        ("1 + 1", None),
        ("const x = 5;\nx;", None),
        ("return 42;", 42),
        ("return await Promise.resolve('a');", "a"),
        ("function f() { return 3; }\nreturn f() + 1;", 4),
        ("if (true) { return [1, 2]; }\nreturn 0;", [1, 2]),
        ("return;", None),
        ("return null;", None),
    ],
)
async def test_explicit_return_only(code: str, value: Any) -> None:
    result = await _run(code)
    assert result.ok, result.diagnostic
    assert result.value == value


async def test_top_level_await_of_tool() -> None:
    result = await _run("const r = await tools.app.lookup({ id: '1' });\nreturn r;")
    assert result.ok, result.diagnostic
    assert result.value["structuredContent"] == {"id": "1"}


# -- tool failures are catchable and carry code/tool/message ----------------------------------


async def test_denial_is_catchable_with_code_tool_message() -> None:
    async with CodeMode(sources=[local("app", _tools())], policy=deny_all_tool_calls()) as cm:
        caught = await cm.run(
            "try { await tools.app.lookup({ id: '1' }); return 'no'; }\n"
            "catch (e) { return { code: e.code, tool: e.tool, message: e.message,"
            " isError: e instanceof Error }; }"
        )
        uncaught = await cm.run("const a = 1;\nawait tools.app.lookup({ id: '1' });")
    assert caught.ok, caught.diagnostic
    assert caught.value["code"] == "TOOL_DENIED"
    assert caught.value["tool"] in ("app.lookup", "tools.app.lookup")
    assert caught.value["message"]
    assert caught.value["isError"] is True
    d = _fail(uncaught, ErrorCode.TOOL_DENIED, Phase.TOOL)
    assert d.tool in ("app.lookup", "tools.app.lookup")
    assert d.location is not None and d.location.line == 2


async def test_tool_error_message_reaches_code_cause_does_not() -> None:
    def fail(_: dict[str, Any]) -> Any:
        raise ToolError("order 7 is closed", cause=RuntimeError("db password=hunter2"))

    async with CodeMode(
        sources=[local("app", {"f": define_tool(description="f", input_schema=OBJ, execute=fail)})],
        policy=allow_all_tool_calls(),
    ) as cm:
        r = await cm.run("try { await tools.app.f({}); } catch (e) { return [e.code, e.message]; }")
        u = await cm.run("await tools.app.f({});")
    assert r.value[0] == "TOOL_ERROR"
    assert "order 7 is closed" in r.value[1]
    _fail(u, ErrorCode.TOOL_ERROR, Phase.TOOL)
    assert "hunter2" not in json.dumps(u.to_json())


# -- concurrency cap with unique call ids -------------------------------------------------------


async def test_concurrency_cap_queues_and_call_ids_are_unique() -> None:
    active = 0
    peak = 0
    release = asyncio.Event()

    async def slow(args: dict[str, Any], ctx: CallContext) -> Any:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        try:
            await asyncio.sleep(0.01)
            return {"i": args["i"]}
        finally:
            active -= 1

    provider = InMemoryProvider("m", {"slow": MemoryTool(ToolSpec("slow", "slow", OBJ), slow)})
    del release
    async with CodeMode(
        sources=[provider],
        policy=allow_all_tool_calls(),
        limits=Limits(max_concurrent_tool_calls=3, max_tool_calls=20),
    ) as cm:
        r = await cm.run(
            "const ps = [];\nfor (let i = 0; i < 12; i++) ps.push(tools.m.slow({ i }));\n"
            "const rs = await Promise.all(ps);\nreturn rs.map(r => r.structuredContent.i);"
        )
    assert r.ok, r.diagnostic
    assert r.value == list(range(12))
    assert peak == 3
    ids = [c.call_id for c in provider.calls]
    assert len(ids) == 12 and len(set(ids)) == 12
    assert {c.execution_id for c in provider.calls} == {r.execution_id}


# -- timeouts, each with its own code -----------------------------------------------------------


def _sleeper(seconds: float) -> Any:
    async def sleep(_: dict[str, Any]) -> Any:
        await asyncio.sleep(seconds)
        return {"slept": seconds}

    return define_tool(description="sleep", input_schema=OBJ, execute=sleep)


async def _run_sleep(code: str, **limits: Any) -> RunResult:
    async with CodeMode(
        sources=[local("app", {"sleep": _sleeper(30)})],
        policy=allow_all_tool_calls(),
        limits=Limits(**limits),
    ) as cm:
        return await cm.run(code)


async def test_tool_timeout_is_its_own_catchable_code() -> None:
    r = await _run_sleep(
        "try { await tools.app.sleep({}); } catch (e) { return e.code; }", tool_call_time_ms=50
    )
    assert r.value == "TOOL_TIMEOUT"
    u = await _run_sleep("await tools.app.sleep({});", tool_call_time_ms=50)
    d = _fail(u, ErrorCode.TOOL_TIMEOUT, Phase.TOOL)
    assert d.tool in ("app.sleep", "tools.app.sleep")


async def test_wall_limit_is_its_own_code() -> None:
    r = await _run_sleep("await tools.app.sleep({});", wall_time_ms=100, tool_call_time_ms=60000)
    _fail(r, ErrorCode.WALL_LIMIT, Phase.SANDBOX)


async def test_compute_limit_is_its_own_code_and_excludes_tool_waits() -> None:
    _fail(await _run("while (true) {}", compute_time_ms=100), ErrorCode.COMPUTE_LIMIT)
    _fail(
        await _run("const p = Promise.resolve();\nawait p;\nwhile (true) {}", compute_time_ms=100),
        ErrorCode.COMPUTE_LIMIT,
    )
    _fail(
        await _run("await Promise.resolve().then(() => { while (true) {} });", compute_time_ms=100),
        ErrorCode.COMPUTE_LIMIT,
    )
    async with CodeMode(
        sources=[local("app", {"sleep": _sleeper(0.3)})],
        policy=allow_all_tool_calls(),
        limits=Limits(compute_time_ms=100),
    ) as cm:
        r = await cm.run("await tools.app.sleep({});\nawait tools.app.sleep({});\nreturn 1;")
    assert r.ok, r.diagnostic


# -- cancellation reaches the provider -----------------------------------------------------------


class _Watched:
    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.cancelled = asyncio.Event()

    def tool(self) -> Any:
        async def hang(_: dict[str, Any]) -> Any:
            self.started.set()
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                self.cancelled.set()
                raise
            return None

        return define_tool(description="hang", input_schema=OBJ, execute=hang)


async def test_task_cancel_cancels_in_flight_tool_calls() -> None:
    w = _Watched()
    async with CodeMode(
        sources=[local("app", {"hang": w.tool(), "echo": _tools()["echo"]})],
        policy=allow_all_tool_calls(),
    ) as cm:
        task = asyncio.create_task(
            cm.run("await Promise.all([tools.app.hang({}), tools.app.hang({})]);")
        )
        await asyncio.wait_for(w.started.wait(), 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.wait_for(w.cancelled.wait(), 10)
        after = await cm.run("return (await tools.app.echo({ a: 1 })).structuredContent;")
    assert after.ok and after.value == {"a": 1}


async def test_cancel_event_reports_cancelled_and_reaches_provider() -> None:
    w = _Watched()
    cancel = asyncio.Event()
    async with CodeMode(
        sources=[local("app", {"hang": w.tool()})], policy=allow_all_tool_calls()
    ) as cm:
        task = asyncio.create_task(cm.run("await tools.app.hang({});", cancel=cancel))
        await asyncio.wait_for(w.started.wait(), 10)
        cancel.set()
        r = await asyncio.wait_for(task, 10)
        await asyncio.wait_for(w.cancelled.wait(), 10)
    _fail(r, ErrorCode.CANCELLED, Phase.SANDBOX)
    assert r.execution_id


async def test_cancel_event_stops_a_busy_loop() -> None:
    cancel = asyncio.Event()
    async with CodeMode(
        sources=[local("app", _tools())],
        policy=allow_all_tool_calls(),
        limits=Limits(compute_time_ms=20000, wall_time_ms=30000),
    ) as cm:
        task = asyncio.create_task(cm.run("while (true) {}", cancel=cancel))
        await asyncio.sleep(0.05)
        cancel.set()
        r = await asyncio.wait_for(task, 10)
    _fail(r, ErrorCode.CANCELLED)


async def test_cancel_event_already_set() -> None:
    cancel = asyncio.Event()
    cancel.set()
    async with CodeMode(sources=[local("app", _tools())], policy=allow_all_tool_calls()) as cm:
        r = await cm.run("return 1;", cancel=cancel)
    _fail(r, ErrorCode.CANCELLED)


# -- bounded logs ---------------------------------------------------------------------------------


def _markers(logs: tuple[LogEntry, ...]) -> list[int]:
    # The marker is recognisable by its level or its text; either is a fair reading of DESIGN.
    return [
        i
        for i, e in enumerate(logs)
        if e.level not in ("log", "info", "warn", "error", "debug")
        or "truncat" in e.message.lower()
        or "omitted" in e.message.lower()
    ]


async def test_log_entries_keep_head_and_tail_with_one_marker() -> None:
    r = await _run(
        "for (let i = 0; i < 50; i++) console.log('line ' + i);\nreturn 1;", log_entries=10
    )
    assert r.ok, r.diagnostic
    marks = _markers(r.logs)
    assert len(marks) == 1
    m = marks[0]
    head = [e.message for e in r.logs[:m]]
    tail = [e.message for e in r.logs[m + 1 :]]
    assert head and tail
    assert head == [f"line {i}" for i in range(len(head))]
    assert tail == [f"line {i}" for i in range(50 - len(tail), 50)]
    assert len(head) + len(tail) <= 10


async def test_log_bytes_bounded_with_one_marker() -> None:
    r = await _run(
        "for (let i = 0; i < 40; i++) console.log(i + ':' + 'x'.repeat(200));\nreturn 1;",
        log_bytes=2048,
    )
    assert r.ok
    assert len(_markers(r.logs)) == 1
    kept = [e for i, e in enumerate(r.logs) if i not in _markers(r.logs)]
    assert sum(len(e.message.encode()) for e in kept) <= 2048
    assert kept[0].message.startswith("0:") and kept[-1].message.startswith("39:")


async def test_single_huge_log_line_is_bounded() -> None:
    r = await _run("console.log('y'.repeat(100000));\nreturn 1;", log_bytes=1024)
    assert r.ok
    assert sum(len(e.message.encode()) for e in r.logs) <= 1024 + 200


async def test_log_levels_and_formatting() -> None:
    r = await _run(
        "console.log('a', 1, { b: 2 });\nconsole.info('i');\nconsole.warn('w');\n"
        "console.error('e');\nconsole.debug('d');\nreturn 0;"
    )
    assert [(e.level, e.message.split()[0]) for e in r.logs] == [
        ("log", "a"),
        ("info", "i"),
        ("warn", "w"),
        ("error", "e"),
        ("debug", "d"),
    ]
    assert "1" in r.logs[0].message and "b" in r.logs[0].message


async def test_logs_are_kept_on_failure() -> None:
    r = await _run("console.log('before');\nthrow new Error('x');")
    assert not r.ok
    assert [e.message for e in r.logs] == ["before"]


# -- escape attempts ------------------------------------------------------------------------------

ESCAPES = [
    "return typeof eval;",
    "return typeof Function === 'function' ? (Function as any)('return 1')() : 'absent';",
    "return (function () {}).constructor('return globalThis')();",
    "return (async function () {}).constructor('return 1')();",
    "return (function* () {}).constructor('yield 1')().next().value;",
    "return (async function* () {}).constructor('yield 1')();",
    "return [].constructor.constructor('return 1')();",
    "return Object.getPrototypeOf(async () => {}).constructor('return 1')();",
    "return Reflect.construct(Object.getPrototypeOf(function(){}).constructor, ['return 1'])();",
    "return new Proxy({}, { get: (t, k) => (t as any).constructor.constructor('return 1') }).x();",
    "return typeof (globalThis as any).require;",
    "return typeof (globalThis as any).process;",
    "return typeof (globalThis as any).std + typeof (globalThis as any).os;",
    "return typeof (globalThis as any).fetch;",
    "return typeof (globalThis as any).setTimeout + typeof (globalThis as any).setInterval;",
    "return typeof (globalThis as any).WebAssembly;",
    "return typeof (globalThis as any).SharedArrayBuffer + typeof (globalThis as any).Atomics;",
    "return Object.getOwnPropertyNames(globalThis).filter(n => /^(eval|Function|require|std|os|"
    "fetch|setTimeout|WebAssembly|SharedArrayBuffer|Atomics|process)$/.test(n));",
    "const g = (0, eval as any); return g('1+1');",
]

FORBIDDEN_VALUES = {"function", "object", 1, 2, "globalThis"}


@pytest.mark.parametrize("code", ESCAPES)
async def test_escape_attempt_fails_and_next_run_works(code: str) -> None:
    async with CodeMode(sources=[local("app", _tools())], policy=allow_all_tool_calls()) as cm:
        r = await cm.run(code)
        if r.ok:
            v = r.value
            assert v in ("undefined", "undefinedundefined", "absent", []), v
        else:
            assert r.diagnostic is not None
            assert r.diagnostic.code in (
                ErrorCode.UNCAUGHT_EXCEPTION,
                ErrorCode.UNSUPPORTED_SYNTAX,
                ErrorCode.COMPILE_ERROR,
            )
        nxt = await cm.run("return (await tools.app.echo({ ok: true })).structuredContent;")
    assert nxt.ok and nxt.value == {"ok": True}


async def test_tools_proxy_cannot_reach_host() -> None:
    r = await _run(
        "const t: any = tools;\nreturn [typeof t.constructor, String(t.app.echo.constructor === "
        "Function), Object.keys(t).length];"
    )
    # No `Function` global at all (docs/architecture.md): the probe itself is the error.
    assert (
        "ReferenceError: Function is not defined" in _fail(r, ErrorCode.UNCAUGHT_EXCEPTION).message
    )


async def test_sandbox_survives_bombs_and_next_run_works() -> None:
    bombs = [
        ("let s = 'x'; while (true) s += s;", ErrorCode.UNCAUGHT_EXCEPTION),  # string too long
        (
            "const a: number[][] = []; while (true) a.push(new Array(100000).fill(1));",
            ErrorCode.MEMORY_LIMIT,
        ),
        (
            "const a: string[] = [];\nwhile (true) a.push('ab'.repeat(1 << 20) + a.length);",
            ErrorCode.MEMORY_LIMIT,
        ),
        (
            "const b: ArrayBuffer[] = []; while (true) b.push(new ArrayBuffer(1 << 20));",
            ErrorCode.MEMORY_LIMIT,
        ),
        (  # RangeError: Maximum call stack size exceeded
            "function f(n: number): number { return f(n + 1) + 1; }\nreturn f(0);",
            ErrorCode.UNCAUGHT_EXCEPTION,
        ),
        (
            "const ps = []; for (let i = 0; i < 10000; i++) ps.push(Promise.resolve(i));\n"
            "return (await Promise.all(ps)).length;",
            "ok",
        ),
    ]
    async with CodeMode(
        sources=[local("app", _tools())],
        policy=allow_all_tool_calls(),
        limits=Limits(memory_bytes=32 * 1024 * 1024),
    ) as cm:
        for code, expected in bombs:
            r = await cm.run(code)
            if expected == "ok":
                assert r.ok and r.value == 10000
            else:
                _fail(r, expected, Phase.SANDBOX)
            assert (await cm.run("return 1 + 1;")).value == 2


# -- every error code reachable, with its documented phase ---------------------------------------


async def test_every_error_code_is_reachable_with_its_phase() -> None:
    seen: set[ErrorCode] = set()

    def internal(_: dict[str, Any]) -> Any:
        raise RuntimeError("kaboom")

    def circular(_: dict[str, Any]) -> Any:
        d: dict[str, Any] = {}
        d["self"] = d
        return d

    tools = {
        **_tools(),
        "bad_schema": define_tool(
            description="bad",
            input_schema={"type": "object", "properties": {"a": {"type": 12}}},
            execute=_echo,
        ),
        "internal": define_tool(description="i", input_schema=OBJ, execute=internal),
        "circular": define_tool(description="c", input_schema=OBJ, execute=circular),
        "big": define_tool(description="b", input_schema=OBJ, execute=lambda a: "z" * a["n"]),
        "err": define_tool(
            description="e",
            input_schema=OBJ,
            execute=lambda a: (_ for _ in ()).throw(ToolError("no")),
        ),
        "sleep": _sleeper(30),
    }
    down = InMemoryProvider("down", unavailable="cannot connect")
    limits = Limits(
        max_tool_calls=6,
        tool_result_bytes=5000,
        total_bridge_bytes=12000,
        final_result_bytes=1000,
        tool_call_time_ms=100,
        wall_time_ms=2000,
        compute_time_ms=200,
        memory_bytes=16 * 1024 * 1024,
        source_bytes=4000,
    )
    cases: list[tuple[str, ErrorCode]] = [
        ("x" * 5000, ErrorCode.SOURCE_TOO_LARGE),
        ("const = 1;", ErrorCode.COMPILE_ERROR),
        ("enum E { A }", ErrorCode.UNSUPPORTED_SYNTAX),
        ("throw new Error('x');", ErrorCode.UNCAUGHT_EXCEPTION),
        ("while (true) {}", ErrorCode.COMPUTE_LIMIT),
        (
            "const a: number[][] = []; while (true) a.push(new Array(1e5).fill(1));",
            ErrorCode.MEMORY_LIMIT,
        ),
        ("const a: any = {}; a.a = a; return a;", ErrorCode.RESULT_NOT_SERIALIZABLE),
        ("return 'y'.repeat(5000);", ErrorCode.RESULT_TOO_LARGE),
        ("await tools.nope.x({});", ErrorCode.SOURCE_NOT_FOUND),
        ("await tools.down.x({});", ErrorCode.SOURCE_UNAVAILABLE),
        ("await tools.app.nope({});", ErrorCode.TOOL_NOT_FOUND),
        ("await tools.app.bad_schema({});", ErrorCode.TOOL_SCHEMA_UNSUPPORTED),
        ("await tools.app.lookup({ id: 1 });", ErrorCode.TOOL_INPUT_INVALID),
        ("await tools.app.err({});", ErrorCode.TOOL_ERROR),
        ("await tools.app.internal({});", ErrorCode.TOOL_INTERNAL_ERROR),
        ("await tools.app.sleep({});", ErrorCode.TOOL_TIMEOUT),
        ("for (let i = 0; i < 7; i++) await tools.app.echo({});", ErrorCode.TOOL_CALL_LIMIT),
        ("await tools.app.circular({});", ErrorCode.TOOL_RESULT_INVALID),
        ("await tools.app.big({ n: 6000 });", ErrorCode.TOOL_RESULT_TOO_LARGE),
        ("for (let i = 0; i < 5; i++) await tools.app.big({ n: 4000 });", ErrorCode.BRIDGE_LIMIT),
    ]
    async with CodeMode(
        sources=[local("app", tools), down], policy=allow_all_tool_calls(), limits=limits
    ) as cm:
        for code, expected in cases:
            r = await cm.run(code)
            assert r.execution_id
            d = _fail(r, expected)
            assert d.code.phase == _PHASES[expected]
            seen.add(expected)
        denied = CodeMode(sources=[local("app", _tools())], policy=deny_all_tool_calls())
        async with denied:
            _fail(await denied.run("await tools.app.echo({});"), ErrorCode.TOOL_DENIED, Phase.TOOL)
            seen.add(ErrorCode.TOOL_DENIED)
        slow = CodeMode(
            sources=[local("app", {"sleep": _sleeper(30)})],
            policy=allow_all_tool_calls(),
            limits=Limits(wall_time_ms=100),
        )
        async with slow:
            _fail(await slow.run("await tools.app.sleep({});"), ErrorCode.WALL_LIMIT, Phase.SANDBOX)
            seen.add(ErrorCode.WALL_LIMIT)
        cancel = asyncio.Event()
        cancel.set()
        _fail(await cm.run("return 1;", cancel=cancel), ErrorCode.CANCELLED, Phase.SANDBOX)
        seen.add(ErrorCode.CANCELLED)

    class Broken:
        async def run(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("secret internals password=pw123")

    async with CodeMode(
        sources=[local("app", _tools())],
        policy=allow_all_tool_calls(),
        sandbox=Broken(),  # type: ignore[arg-type]
    ) as cm:
        r = await cm.run("return 1;")
    d = _fail(r, ErrorCode.INTERNAL_ERROR, Phase.HOST)
    assert d.correlation_id
    assert "pw123" not in json.dumps(r.to_json())
    seen.add(ErrorCode.INTERNAL_ERROR)
    # The worker-pool codes need a process pool to reach: tests/sandbox/test_process_pool.py.
    assert seen | {ErrorCode.SANDBOX_CRASHED, ErrorCode.SERVER_BUSY} == set(ErrorCode)


_PHASES = {
    ErrorCode.SOURCE_TOO_LARGE: Phase.COMPILE,
    ErrorCode.COMPILE_ERROR: Phase.COMPILE,
    ErrorCode.UNSUPPORTED_SYNTAX: Phase.COMPILE,
    ErrorCode.UNCAUGHT_EXCEPTION: Phase.SANDBOX,
    ErrorCode.COMPUTE_LIMIT: Phase.SANDBOX,
    ErrorCode.SANDBOX_CRASHED: Phase.SANDBOX,
    ErrorCode.SERVER_BUSY: Phase.HOST,
    ErrorCode.WALL_LIMIT: Phase.SANDBOX,
    ErrorCode.MEMORY_LIMIT: Phase.SANDBOX,
    ErrorCode.CANCELLED: Phase.SANDBOX,
    ErrorCode.RESULT_NOT_SERIALIZABLE: Phase.SANDBOX,
    ErrorCode.RESULT_TOO_LARGE: Phase.SANDBOX,
    **{
        c: Phase.TOOL
        for c in (
            ErrorCode.SOURCE_NOT_FOUND,
            ErrorCode.SOURCE_UNAVAILABLE,
            ErrorCode.TOOL_NOT_FOUND,
            ErrorCode.TOOL_SCHEMA_UNSUPPORTED,
            ErrorCode.TOOL_INPUT_INVALID,
            ErrorCode.TOOL_DENIED,
            ErrorCode.TOOL_ERROR,
            ErrorCode.TOOL_INTERNAL_ERROR,
            ErrorCode.TOOL_TIMEOUT,
            ErrorCode.TOOL_CALL_LIMIT,
            ErrorCode.TOOL_RESULT_INVALID,
            ErrorCode.TOOL_RESULT_TOO_LARGE,
            ErrorCode.BRIDGE_LIMIT,
        )
    },
    ErrorCode.INTERNAL_ERROR: Phase.HOST,
}


@pytest.mark.parametrize(
    "code",
    ["return 10n;", "return () => 1;", "return Symbol('s');", "return { f() {} , a: undefined };"],
)
async def test_non_json_final_value(code: str) -> None:
    r = await _run(code)
    # A function or symbol cannot cross as JSON; an object whose members drop is plain JSON.
    if code.startswith("return {"):
        assert r.ok and r.value == {}
    else:
        _fail(r, ErrorCode.RESULT_NOT_SERIALIZABLE)


# -- the tools proxy -----------------------------------------------------------------------------


async def test_unknown_names_suggest_close_ones() -> None:
    r1 = await _run("await tools.ap.echo({});")
    assert "app" in _fail(r1, ErrorCode.SOURCE_NOT_FOUND).message
    r2 = await _run("await tools.app.lokup({ id: '1' });")
    assert "lookup" in _fail(r2, ErrorCode.TOOL_NOT_FOUND).message


async def test_awaiting_a_namespace_does_not_hang() -> None:
    r = await _run(
        "const ns = await tools.app;\nconst t = await tools;\nreturn 'done';", wall_time_ms=5000
    )
    assert r.ok, r.diagnostic
    assert r.value == "done"


async def test_bracket_addressing() -> None:
    async with CodeMode(
        sources=[
            local(
                "deployment-api",
                {
                    "deploy": define_tool(
                        description="d", input_schema=OBJ, execute=lambda a: {"env": a["env"]}
                    )
                },
            )
        ],
        policy=allow_all_tool_calls(),
    ) as cm:
        r = await cm.run(
            "const r = await tools['deployment-api'].deploy({ env: 'prod' });\nreturn r.structuredContent;"
        )
    assert r.ok, r.diagnostic
    assert r.value == {"env": "prod"}


async def test_shared_non_circular_references_are_fine() -> None:
    def shared(_: dict[str, Any]) -> Any:
        x = {"a": 1}
        return {"p": x, "q": [x, x]}

    async with CodeMode(
        sources=[
            local("app", {"s": define_tool(description="s", input_schema=OBJ, execute=shared)})
        ],
        policy=allow_all_tool_calls(),
    ) as cm:
        r = await cm.run("const r = await tools.app.s({});\nreturn r.structuredContent;")
        shared_in = await cm.run("const x = { a: 1 };\nreturn { p: x, q: [x, x] };")
    assert r.ok and r.value == {"p": {"a": 1}, "q": [{"a": 1}, {"a": 1}]}
    assert shared_in.ok and shared_in.value == {"p": {"a": 1}, "q": [{"a": 1}, {"a": 1}]}


@pytest.mark.parametrize(
    "value",
    [{1, 2}, object(), float("nan"), float("inf"), b"bytes"],
    ids=["set", "object", "nan", "inf", "bytes"],
)
async def test_non_json_tool_results_are_invalid(value: Any) -> None:
    async with CodeMode(
        sources=[
            local(
                "app",
                {"v": define_tool(description="v", input_schema=OBJ, execute=lambda a: value)},
            )
        ],
        policy=allow_all_tool_calls(),
    ) as cm:
        r = await cm.run("await tools.app.v({});\nreturn 1;")
    _fail(r, ErrorCode.TOOL_RESULT_INVALID, Phase.TOOL)


# -- RunResult, execution ids, progress ----------------------------------------------------------


async def test_execution_id_on_every_result_and_unique() -> None:
    ids = set()
    async with CodeMode(sources=[local("app", _tools())], policy=allow_all_tool_calls()) as cm:
        for code in [
            "return 1;",
            "const = ;",
            "enum A {}",
            "throw 1;",
            "x".repeat if False else "return 2;",
        ]:
            r = await cm.run(code)
            assert isinstance(r.execution_id, str) and r.execution_id
            ids.add(r.execution_id)
            json.dumps(r.to_json())
    assert len(ids) == 5


async def test_run_result_to_json() -> None:
    ok = await _run("console.log('hi');\nreturn { a: [1, 'b', null, true] };")
    j = ok.to_json()
    assert json.loads(json.dumps(j)) == j
    assert j["ok"] is True and j["value"] == {"a": [1, "b", None, True]}
    assert j["execution_id"] == ok.execution_id
    assert j["logs"][0]["level"] == "log" and j["logs"][0]["message"] == "hi"
    bad = await _run("const a = 1;\nthrow new TypeError('nope');")
    jb = bad.to_json()
    assert json.loads(json.dumps(jb)) == jb
    assert jb["ok"] is False
    assert jb["diagnostic"]["code"] == "UNCAUGHT_EXCEPTION"
    assert jb["diagnostic"]["location"]["line"] == 2


async def test_progress_events_are_ordered_and_complete() -> None:
    events: list[ProgressEvent] = []
    async with CodeMode(sources=[local("app", _tools())], policy=allow_all_tool_calls()) as cm:
        r = await cm.run(
            "await tools.app.echo({});\nawait tools.app.lookup({ id: 'a' });\nreturn 1;",
            on_progress=events.append,
        )
    assert r.ok
    kinds = [e.kind for e in events]
    assert kinds[0] == "started" and kinds[-1] == "finished"
    assert kinds.count("tool_call_started") == 2 and kinds.count("tool_call_finished") == 2
    seqs = [e.sequence for e in events]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert {e.execution_id for e in events} == {r.execution_id}
    assert [e.tool for e in events if e.kind == "tool_call_started"] in (
        ["app.echo", "app.lookup"],
        ["tools.app.echo", "tools.app.lookup"],
    )


async def test_progress_events_bounded() -> None:
    events: list[ProgressEvent] = []
    async with CodeMode(
        sources=[local("app", _tools())],
        policy=allow_all_tool_calls(),
        limits=Limits(progress_events=5, max_tool_calls=50),
    ) as cm:
        r = await cm.run(
            "for (let i = 0; i < 40; i++) await tools.app.echo({});\nreturn 1;",
            on_progress=events.append,
        )
    assert r.ok
    assert len(events) <= 5


async def test_failing_progress_callback_does_not_break_the_run() -> None:
    def bad(_: ProgressEvent) -> None:
        raise RuntimeError("observer broke")

    async with CodeMode(sources=[local("app", _tools())], policy=allow_all_tool_calls()) as cm:
        r = await cm.run("await tools.app.echo({});\nreturn 7;", on_progress=bad)
    assert r.ok and r.value == 7


async def test_concurrent_runs_are_isolated() -> None:
    async with CodeMode(sources=[local("app", _tools())], policy=allow_all_tool_calls()) as cm:
        rs = await asyncio.gather(
            *(
                cm.run(
                    f"(globalThis as any).mark = {i};\nawait tools.app.echo({{}});\nreturn (globalThis as any).mark;"
                )
                for i in range(20)
            )
        )
        leak = await cm.run("return typeof (globalThis as any).mark;")
    assert [r.value for r in rs] == list(range(20))
    assert leak.value == "undefined"


# -- `codemode run` -------------------------------------------------------------------------------


def _codemode(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "codemodekit", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        input=stdin,
        timeout=120,
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    r = _codemode("init", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    return tmp_path


def _assert_caret(out: str, text: str, file: str, line: int) -> int:
    """The report names file:line:col, quotes the user's line and puts a caret under col."""
    m = re.search(rf"{re.escape(file)}:(\d+):(\d+)", out)
    assert m, out
    assert int(m.group(1)) == line
    column = int(m.group(2))
    lines = out.splitlines()
    idx = next(i for i, x in enumerate(lines) if x.endswith(text))
    start = lines[idx].index("| ") + 2  # where the quoted user line begins
    assert lines[idx][start:].rstrip().endswith(text)
    caret = lines[idx + 1]
    assert caret.rstrip().endswith("^") and caret.count("^") >= 1
    assert caret.index("^") == start + column - 1, out
    return column


def test_cli_run_success_pretty_and_json(project: Path) -> None:
    (project / "ok.ts").write_text("console.log('hello');\nreturn { n: 1 + 1 };\n")
    r = _codemode("run", "ok.ts", cwd=project)
    assert r.returncode == 0, r.stderr
    assert '"n": 2' in r.stdout
    assert "hello" in r.stdout + r.stderr
    j = _codemode("run", "ok.ts", "--json", cwd=project)
    assert j.returncode == 0
    data = json.loads(j.stdout)
    assert data["ok"] is True and data["value"] == {"n": 2}
    assert data["execution_id"]
    assert data["logs"] == [{"level": "log", "message": "hello"}]


def test_cli_run_failure_has_caret_under_users_line(project: Path) -> None:
    (project / "bad.ts").write_text(
        "const a = 1;\nconst b = 2;\n    throw new Error('broke here');\n"
    )
    r = _codemode("run", "bad.ts", cwd=project)
    assert r.returncode == 1
    out = r.stdout + r.stderr
    assert "UNCAUGHT_EXCEPTION" in out and "broke here" in out
    _assert_caret(out, "throw new Error('broke here');", "bad.ts", 3)


def test_cli_run_compile_error_caret(project: Path) -> None:
    (project / "syn.ts").write_text("const a = 1;\nenum Color { Red }\n")
    r = _codemode("run", "syn.ts", cwd=project)
    assert r.returncode == 1
    out = r.stdout + r.stderr
    assert "UNSUPPORTED_SYNTAX" in out
    column = _assert_caret(out, "enum Color { Red }", "syn.ts", 2)
    assert column == 1


def test_cli_run_json_failure(project: Path) -> None:
    (project / "bad.ts").write_text("await tools.demo.nope({});\n")
    r = _codemode("run", "bad.ts", "--json", cwd=project)
    assert r.returncode == 1
    data = json.loads(r.stdout)
    assert data["ok"] is False
    assert data["diagnostic"]["code"] == "TOOL_NOT_FOUND"


def test_cli_run_config_flag_and_stdin(
    project: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    (elsewhere / "s.ts").write_text("return 5;\n")
    r = _codemode(
        "run", str(elsewhere / "s.ts"), "-c", str(project / "codemode.toml"), cwd=elsewhere
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().startswith("5")
    r2 = _codemode("run", "-", "--config", str(project), cwd=elsewhere, stdin="return 'in';\n")
    assert r2.returncode == 0, r2.stderr
    assert "in" in r2.stdout


def test_cli_run_usage_and_spec_errors_exit_2(
    project: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    assert _codemode("run", "missing.ts", cwd=project).returncode == 2
    assert _codemode("run", cwd=project).returncode == 2
    empty = tmp_path_factory.mktemp("nospec")
    (empty / "s.ts").write_text("return 1;\n")
    r = _codemode("run", "s.ts", cwd=empty)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    (empty / "codemode.toml").write_text("version = 1\nname = 'x'\n[policy]\ndefault = 'maybe'\n")
    r = _codemode("run", "s.ts", cwd=empty)
    assert r.returncode == 2
    assert "codemode.toml:4" in r.stderr
    assert "Traceback" not in r.stderr


def test_cli_run_limit_failure_exit_1(project: Path) -> None:
    (project / "loop.ts").write_text("while (true) {}\n")
    toml = (
        (project / "codemode.toml")
        .read_text()
        .replace("# compute_time_ms = 5000", "compute_time_ms = 100")
    )
    (project / "codemode.toml").write_text(toml)
    r = _codemode("run", "loop.ts", cwd=project)
    assert r.returncode == 1
    assert "COMPUTE_LIMIT" in r.stdout + r.stderr


_ = (threading, AsyncIterator)


def test_cli_run_warns_once_about_an_unavailable_source(project: Path) -> None:
    with (project / "codemode.toml").open("a") as f:
        f.write('\n[sources.broken]\ntype = "mcp"\ncommand = "no-such-binary-rehearsal"\n')
    # `tools` used as a value: the run cannot know which sources it needs, so all start.
    (project / "ok.ts").write_text("return typeof tools;\n")
    r = _codemode("run", "ok.ts", cwd=project)
    assert r.returncode == 0, r.stderr
    mentions = [line for line in r.stderr.splitlines() if "no-such-binary-rehearsal" in line]
    assert len(mentions) == 1, r.stderr


# -- names that are also JavaScript object keys ---------------------------------------------------

RESERVED_TOOL_NAMES = ["then", "constructor", "valueOf", "toString", "toJSON"]


@pytest.mark.parametrize("name", RESERVED_TOOL_NAMES)
async def test_tools_named_like_object_keys_are_callable(name: str) -> None:
    tool = define_tool(description=name, input_schema=OBJ, execute=lambda a: "called")
    async with CodeMode(
        sources=[local("app", {name: tool}), local(name, {"x": tool})],
        policy=allow_all_tool_calls(),
    ) as cm:
        addresses = {t.address for t in cm.catalog.tools}
        for address in addresses:
            r = await cm.run(f"return (await {address}({{}})).structuredContent;")
            assert r.ok and r.value == "called", (address, r.diagnostic)


async def test_small_log_entry_limit_still_keeps_a_tail() -> None:
    r = await _run("for (let i = 1; i <= 4; i++) console.log('m' + i);\nreturn 1;", log_entries=3)
    assert r.ok
    assert len(_markers(r.logs)) == 1
    assert len(r.logs) <= 3
    assert r.logs[0].message == "m1"
    assert r.logs[-1].message == "m4"


async def test_a_very_large_final_result_limit_is_not_a_tiny_one() -> None:
    r = await _run("return { q: 1 };", final_result_bytes=2**31)
    assert r.ok, r.diagnostic
    assert r.value == {"q": 1}


@pytest.mark.parametrize(
    "name",
    [
        "compute_time_ms",
        "wall_time_ms",
        "tool_call_time_ms",
        "max_tool_calls",
        "max_concurrent_tool_calls",
        "tool_result_bytes",
        "total_bridge_bytes",
        "log_bytes",
        "log_entries",
        "progress_events",
        "source_bytes",
        "memory_bytes",
        "stack_bytes",
    ],
)
async def test_very_large_limits_behave_as_no_practical_limit(name: str) -> None:
    r = await _run(
        "console.log('x');\nreturn (await tools.app.echo({ q: 1 })).structuredContent;",
        **{name: 2**62},
    )
    assert r.ok, r.diagnostic
    assert r.value == {"q": 1}
    assert [e.message for e in r.logs] == ["x"]


def test_cli_run_caret_on_a_very_long_line(project: Path) -> None:
    (project / "long.ts").write_text("const s = '" + "a" * 3000 + "'; throw new Error('far');\n")
    r = _codemode("run", "long.ts", cwd=project)
    assert r.returncode == 1
    lines = r.stderr.splitlines()
    assert all(len(line) <= 200 for line in lines), max(len(line) for line in lines)
    m = re.search(r"long\.ts:1:(\d+)", r.stderr)
    assert m and int(m.group(1)) > 3000
    idx = next(i for i, line in enumerate(lines) if line.startswith("1 | "))
    quoted, caret = lines[idx], lines[idx + 1]
    assert quoted[caret.index("^") :].startswith(("Error", "new Error", "throw"))
