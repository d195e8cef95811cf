"""Compute, memory and stack limits end the run with their own code; the host survives."""

from __future__ import annotations

import pytest

from codemodekit.errors import ErrorCode
from codemodekit.sandbox.base import CodeSandbox
from tests.conformance.sandbox.harness import HostDouble, code_of, run


async def assert_alive(sandbox: CodeSandbox) -> None:
    outcome = await run(sandbox, "return [1, 2, 3].map((x) => x * 2)")
    assert outcome.ok and outcome.value == [2, 4, 6]


@pytest.mark.parametrize(
    "code",
    [
        "for (;;) {}",
        "while (true) { try { for (;;) {} } catch (e) {} }",
        "const spin = () => Promise.resolve().then(spin); spin(); await new Promise(() => {})",
        "const again = () => queueMicrotask(again); again(); await new Promise(() => {})",
        "async function f() { await null; return f() } await f()",
    ],
    ids=["sync", "catch-and-retry", "promise-jobs", "microtasks", "async-recursion"],
)
async def test_infinite_loops_hit_the_compute_limit(sandbox: CodeSandbox, code: str) -> None:
    outcome = await run(sandbox, code, compute_time_ms=150)
    assert code_of(outcome) is ErrorCode.COMPUTE_LIMIT
    assert outcome.diagnostic is not None and "compute_time_ms" in outcome.diagnostic.message
    await assert_alive(sandbox)


async def test_time_awaiting_tools_is_not_compute(sandbox: CodeSandbox) -> None:
    # Three 0.2 s tool calls in a row under a 100 ms compute budget.
    code = "for (let i = 0; i < 3; i++) await tools.t.sleep({ s: 0.2 }); return 'done'"
    outcome = await run(sandbox, code, compute_time_ms=100)
    assert outcome.ok and outcome.value == "done"


async def test_compute_budget_is_shared_across_slices(sandbox: CodeSandbox) -> None:
    code = (
        "for (;;) { const end = Date.now() + 20; while (Date.now() < end) {}\n"
        "  await tools.t.echo({}) }"
    )
    outcome = await run(sandbox, code, compute_time_ms=150)
    assert code_of(outcome) is ErrorCode.COMPUTE_LIMIT


@pytest.mark.parametrize(
    "code",
    [
        "const s = 'x'.repeat(200 * 1024 * 1024); return s.length",
        "const a = []; for (;;) a.push('item number ' + a.length)",
        "const a = []; for (;;) a.push({ n: a.length })",
        "const b = new ArrayBuffer(512 * 1024 * 1024); return b.byteLength",
        "const bufs = []; for (;;) bufs.push(new Uint8Array(1024 * 1024))",
        "let s = 'ab'; for (;;) { s = s + s; s.charCodeAt(s.length - 1) }",
    ],
    ids=[
        "string",
        "array-of-strings",
        "array-of-objects",
        "arraybuffer",
        "typed-arrays",
        "doubling",
    ],
)
async def test_memory_bombs_end_the_run(sandbox: CodeSandbox, code: str) -> None:
    outcome = await run(sandbox, code, memory_bytes=16 * 1024 * 1024, compute_time_ms=5000)
    assert not outcome.ok
    assert code_of(outcome) in (ErrorCode.MEMORY_LIMIT, ErrorCode.UNCAUGHT_EXCEPTION)
    if code_of(outcome) is ErrorCode.UNCAUGHT_EXCEPTION:
        # Only the engine's own length cap may stop a bomb before the heap limit does.
        assert outcome.diagnostic is not None
        assert "too long" in outcome.diagnostic.message or "length" in outcome.diagnostic.message
    await assert_alive(sandbox)


async def test_memory_limit_names_the_limit(sandbox: CodeSandbox) -> None:
    outcome = await run(
        sandbox, "const a = []; for (;;) a.push('x' + a.length)", memory_bytes=8 * 1024 * 1024
    )
    assert code_of(outcome) is ErrorCode.MEMORY_LIMIT
    assert outcome.diagnostic is not None and "memory_bytes" in outcome.diagnostic.message


async def test_deep_recursion_is_an_uncaught_range_error(sandbox: CodeSandbox) -> None:
    outcome = await run(sandbox, "function f(n) { return f(n + 1) + 1 }\nreturn f(0)")
    assert code_of(outcome) is ErrorCode.UNCAUGHT_EXCEPTION
    assert outcome.diagnostic is not None
    assert "stack" in outcome.diagnostic.message.lower()
    assert outcome.diagnostic.location is not None and outcome.diagnostic.location.line == 1
    await assert_alive(sandbox)


async def test_stack_overflow_is_catchable(sandbox: CodeSandbox) -> None:
    code = "function f() { return f() }\ntry { f() } catch (e) { return e instanceof RangeError }"
    outcome = await run(sandbox, code)
    assert outcome.ok and outcome.value is True


async def test_ten_thousand_promises(sandbox: CodeSandbox) -> None:
    code = (
        "const ps = [];\n"
        "for (let i = 0; i < 10000; i++) ps.push(new Promise((r) => r(i)).then((v) => v * 2));\n"
        "const all = await Promise.all(ps);\n"
        "return all.reduce((a, b) => a + b, 0)"
    )
    outcome = await run(sandbox, code)
    assert outcome.ok and outcome.value == 2 * sum(range(10000))


async def test_a_promise_that_never_settles_ends_the_run(sandbox: CodeSandbox) -> None:
    outcome = await run(sandbox, "await new Promise(() => {}); return 1")
    assert code_of(outcome) is ErrorCode.UNCAUGHT_EXCEPTION
    assert outcome.diagnostic is not None
    assert "can never settle" in outcome.diagnostic.message


async def test_never_settling_after_tool_calls(sandbox: CodeSandbox) -> None:
    host = HostDouble()
    code = "await tools.t.echo({}); await new Promise(() => {})"
    outcome = await run(sandbox, code, host)
    assert "can never settle" in (outcome.diagnostic.message if outcome.diagnostic else "")
    assert len(host.calls) == 1


@pytest.mark.parametrize(
    "code",
    [
        "let s = '['; for (let i = 0; i < 2e5; i++) s += '[1,2,3],'; s += '0]';\n"
        "for (let k = 0; k < 40; k++) JSON.parse(s); return 'finished'",
        "const a = Array.from({ length: 3e5 }, (_, i) => String(i));\n"
        "for (let k = 0; k < 40; k++) JSON.stringify(a); return 'finished'",
        "const a = Array.from({ length: 3e5 }, (_, i) => (i * 7919) % 1000003);\n"
        "for (let k = 0; k < 40; k++) a.toSorted(); return 'finished'",
    ],
    ids=["json-parse", "json-stringify", "sort"],
)
async def test_long_native_calls_in_a_short_loop_hit_the_compute_limit(
    sandbox: CodeSandbox, code: str
) -> None:
    # Each call takes tens of milliseconds but the loop polls for the time limit rarely.
    outcome = await run(sandbox, code, compute_time_ms=100, memory_bytes=256 * 1024 * 1024)
    assert code_of(outcome) is ErrorCode.COMPUTE_LIMIT


async def test_errors_inside_guarded_natives_point_at_the_user(sandbox: CodeSandbox) -> None:
    outcome = await run(sandbox, "const x = 1;\nJSON.parse('{' + ' '.repeat(70000))")
    assert outcome.diagnostic is not None and outcome.diagnostic.location is not None
    assert outcome.diagnostic.message.startswith("SyntaxError")
    assert outcome.diagnostic.location.line == 2
