"""Tool calls: queued by the sandbox, performed by the host, settled in later slices."""

from __future__ import annotations

import asyncio

from codemodekit.errors import ErrorCode
from codemodekit.limits import Limits
from codemodekit.sandbox.base import CodeSandbox
from tests.conformance.sandbox.harness import HostDouble, code_of, compile_code, run


async def test_call_and_result(sandbox: CodeSandbox) -> None:
    host = HostDouble()
    outcome = await run(sandbox, "const r = await tools.gh.echo({ q: 'x' }); return r", host)
    assert outcome.ok
    assert outcome.value == {"content": [], "structuredContent": {"q": "x"}}
    assert host.calls == [("gh", "echo", {"q": "x"})]


async def test_odd_source_names_and_missing_arguments(sandbox: CodeSandbox) -> None:
    host = HostDouble()
    code = "await tools['deployment-api'].echo(); await tools['deployment-api']['echo']({})"
    outcome = await run(sandbox, code, host)
    assert outcome.ok
    assert host.calls == [("deployment-api", "echo", {}), ("deployment-api", "echo", {})]


async def test_arguments_are_snapshotted_at_call_time(sandbox: CodeSandbox) -> None:
    host = HostDouble()
    code = (
        "const a = { n: 1 }; const p = tools.t.echo(a); a.n = 2; return (await p).structuredContent"
    )
    outcome = await run(sandbox, code, host)
    assert outcome.value == {"n": 1}


async def test_rejection_is_a_catchable_tool_call_error(sandbox: CodeSandbox) -> None:
    code = """
    try { await tools.t.fail({ why: 'policy' }) }
    catch (e) { return [e.name, e.code, e.tool, e.source, e.message, e instanceof Error] }
    """
    outcome = await run(sandbox, code)
    assert outcome.value == [
        "ToolCallError",
        "TOOL_ERROR",
        "tools.t.fail",
        "t",
        "refused: policy",
        True,
    ]


async def test_uncaught_rejection_is_the_tools_diagnostic_at_the_call_site(
    sandbox: CodeSandbox,
) -> None:
    outcome = await run(sandbox, "const x = 1;\nconst r = await tools.t.fail({ why: 'no' });")
    diagnostic = outcome.diagnostic
    assert diagnostic is not None
    assert diagnostic.code is ErrorCode.TOOL_ERROR
    assert diagnostic.message == "refused: no"
    assert diagnostic.tool == "tools.t.fail" and diagnostic.source == "t"
    assert dict(diagnostic.details) == {"upstream_code": "E42"}  # the host's own diagnostic
    assert diagnostic.location is not None and diagnostic.location.line == 2


async def test_unknown_tools_are_the_hosts_business(sandbox: CodeSandbox) -> None:
    outcome = await run(sandbox, "await tools.nowhere.nothing({})")
    assert code_of(outcome) is ErrorCode.TOOL_NOT_FOUND


async def test_non_json_arguments_never_reach_the_host(sandbox: CodeSandbox) -> None:
    host = HostDouble()
    code = """
    const c = {}; c.c = c;
    const out = [];
    for (const bad of [{ n: 1n }, c, () => 1, Symbol('s')]) {
      try { await tools.t.echo(bad); out.push('called') }
      catch (e) { out.push(e.code + ' ' + e.tool) }
    }
    return out;
    """
    outcome = await run(sandbox, code, host)
    assert outcome.value == ["TOOL_INPUT_INVALID tools.t.echo"] * 4
    assert host.calls == []


async def test_uncaught_invalid_arguments(sandbox: CodeSandbox) -> None:
    outcome = await run(sandbox, "\nawait tools['my-api'].echo({ big: 10n })")
    diagnostic = outcome.diagnostic
    assert diagnostic is not None and diagnostic.code is ErrorCode.TOOL_INPUT_INVALID
    assert diagnostic.tool == 'tools["my-api"].echo' and diagnostic.source == "my-api"
    assert "BigInt" in diagnostic.message
    assert diagnostic.location is not None and diagnostic.location.line == 2


async def test_ten_thousand_concurrent_calls_settle_correctly(sandbox: CodeSandbox) -> None:
    host = HostDouble()
    code = """
    const n = 10000;
    const results = await Promise.all(
      Array.from({ length: n }, (_, i) => tools.t.echo({ i }).then((r) => r.structuredContent.i))
    );
    return results.every((v, i) => v === i) ? results.length : 'mismatch';
    """
    outcome = await run(sandbox, code, host, compute_time_ms=30000, memory_bytes=256 * 1024 * 1024)
    assert outcome.ok and outcome.value == 10000
    assert sorted(args["i"] for _, _, args in host.calls) == list(range(10000))


async def test_sequential_calls(sandbox: CodeSandbox) -> None:
    code = "let s = 0; for (let i = 0; i < 500; i++) s += (await tools.t.echo({ i })).structuredContent.i; return s"
    outcome = await run(sandbox, code)
    assert outcome.value == sum(range(500))


async def test_unawaited_calls_are_cancelled_when_the_run_ends(sandbox: CodeSandbox) -> None:
    host = HostDouble()
    outcome = await run(sandbox, "tools.t.wait({}); await tools.t.echo({}); return 'early'", host)
    assert outcome.value == "early"
    for _ in range(5):
        await asyncio.sleep(0)
    assert host.cancelled == 1


async def test_cancellation_reaches_in_flight_calls(sandbox: CodeSandbox) -> None:
    host = HostDouble()
    program = compile_code("await Promise.all([tools.t.wait({}), tools.t.wait({})])")
    task = asyncio.ensure_future(sandbox.run(program, host, Limits()))
    while len(host.calls) < 2:
        await asyncio.sleep(0.001)
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    else:  # pragma: no cover - the assertion below explains
        raise AssertionError("the run must re-raise CancelledError")
    for _ in range(5):
        await asyncio.sleep(0)
    assert host.cancelled == 2
    assert (await run(sandbox, "return 'next'")).value == "next"


async def test_cancellation_while_javascript_runs(sandbox: CodeSandbox) -> None:
    host = HostDouble()
    program = compile_code("await tools.t.echo({}); for (;;) {}")
    task = asyncio.ensure_future(sandbox.run(program, host, Limits(compute_time_ms=300)))
    while not host.calls:  # past its tool call, the run's next slice is the endless loop
        await asyncio.sleep(0.001)
    task.cancel()
    try:
        outcome = await task
    except asyncio.CancelledError:
        pass
    else:
        # An adapter that cannot interrupt a slice may finish it first (here: the limit).
        assert code_of(outcome) is ErrorCode.COMPUTE_LIMIT
    assert (await run(sandbox, "return 'next'")).value == "next"


async def test_proxies_and_reflect_as_callers_and_arguments(sandbox: CodeSandbox) -> None:
    host = HostDouble()
    code = """
    const args = new Proxy({}, {
      ownKeys: () => ['a'],
      getOwnPropertyDescriptor: () => ({ value: 1, enumerable: true, configurable: true }),
      get: (_t, k) => (k === 'a' ? 'from-proxy' : undefined),
    });
    const viaReflect = await Reflect.apply(tools.t.echo, null, [{ r: 1 }]);
    const viaCall = await tools.t.echo.call({ not: 'used' }, { c: 1 });
    const fromProxy = await tools.t.echo(args);
    const wrapped = new Proxy(tools.t, {});
    const viaWrapped = await wrapped.echo({ w: 1 });
    return [viaReflect, viaCall, fromProxy, viaWrapped].map((r) => r.structuredContent);
    """
    outcome = await run(sandbox, code, host)
    assert outcome.value == [{"r": 1}, {"c": 1}, {"a": "from-proxy"}, {"w": 1}]
    assert [args for _, _, args in host.calls] == outcome.value


async def test_a_calls_promise_behaves_like_a_promise(sandbox: CodeSandbox) -> None:
    """Every way to consume a call's promise; its methods need that promise as receiver,
    like the native ones."""
    code = """
    const p = tools.t.echo({ v: 1 });
    const a = await p;
    const b = await p.then((r) => r.structuredContent.v + 1);
    const c = await tools.t.fail({ why: 'x' }).catch((e) => e.code);
    let f = 0;
    await tools.t.echo({}).finally(() => { f = 1; });
    const all = await Promise.all([tools.t.echo({ v: 2 }), tools.t.echo({ v: 3 })]);
    const then = p.then;
    let detached = '';
    try { then.call({}, () => 0); } catch (e) { detached = e.name; }
    let other = '';
    try { then.call(tools.t.echo({ v: 4 }), () => 0); } catch (e) { other = e.name; }
    return [a.structuredContent.v, b, c, f, all.map((r) => r.structuredContent.v),
            detached, other, Object.prototype.toString.call(p), p.then === tools.t.echo({}).then];
    """
    outcome = await run(sandbox, code)
    assert outcome.ok, outcome.diagnostic
    assert outcome.value == [
        1,
        2,
        "TOOL_ERROR",
        1,
        [2, 3],
        "TypeError",
        "",
        "[object Promise]",
        True,
    ]
