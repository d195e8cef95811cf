"""Lockdown: nothing the code can do reaches the host except ``tools.*``."""

from __future__ import annotations

import pytest

from codemodekit.errors import ErrorCode
from codemodekit.sandbox.base import CodeSandbox, CompiledProgram
from tests.conformance.sandbox.harness import HostDouble, code_of, run

PORTABLE_GLOBALS = {
    "Object", "Array", "Number", "Boolean", "String", "Symbol", "BigInt", "Math", "JSON",
    "Date", "RegExp", "Promise", "Proxy", "Reflect", "Map", "Set", "WeakMap", "WeakSet",
    "Iterator", "ArrayBuffer", "DataView", "Int8Array", "Uint8Array", "Uint8ClampedArray",
    "Int16Array", "Uint16Array", "Int32Array", "Uint32Array", "Float16Array", "Float32Array",
    "Float64Array", "BigInt64Array", "BigUint64Array", "Error", "AggregateError", "EvalError",
    "RangeError", "ReferenceError", "SyntaxError", "TypeError", "URIError", "InternalError",
    "SuppressedError", "DisposableStack", "AsyncDisposableStack", "globalThis", "NaN",
    "Infinity", "undefined", "isFinite", "isNaN", "parseFloat", "parseInt", "decodeURI",
    "decodeURIComponent", "encodeURI", "encodeURIComponent", "escape", "unescape", "atob",
    "btoa", "queueMicrotask", "console", "tools",
}  # fmt: skip


async def value_of(sandbox: CodeSandbox, code: str) -> object:
    outcome = await run(sandbox, code)
    assert outcome.ok, outcome.diagnostic
    return outcome.value


async def test_globals_are_a_portable_allowlist(sandbox: CodeSandbox) -> None:
    names = await value_of(sandbox, "return Object.getOwnPropertyNames(globalThis)")
    assert isinstance(names, list)
    assert set(names) <= PORTABLE_GLOBALS, set(names) - PORTABLE_GLOBALS


@pytest.mark.parametrize(
    "name",
    [
        "eval", "Function", "require", "process", "module", "exports", "std", "os", "fetch",
        "XMLHttpRequest", "WebSocket", "setTimeout", "setInterval", "setImmediate",
        "clearTimeout", "WebAssembly", "SharedArrayBuffer", "Atomics", "gc", "print",
        "performance", "WeakRef", "FinalizationRegistry", "Deno", "Bun", "importScripts",
    ],
)  # fmt: skip
async def test_host_capabilities_are_absent(sandbox: CodeSandbox, name: str) -> None:
    code = f"return [typeof {name}, {name!r} in globalThis]"
    assert await value_of(sandbox, code) == ["undefined", False]


@pytest.mark.parametrize(
    "expression",
    [
        "(function () {}).constructor('return 1')()",
        "(async function () {}).constructor('return 1')",
        "(function* () {}).constructor('yield 1')",
        "(async function* () {}).constructor('yield 1')",
        "(() => {}).constructor.constructor('return this')()",
        "Object.getPrototypeOf(async () => {}).constructor('return 1')",
        "Reflect.construct(Object.getPrototypeOf(function () {}).constructor, ['return 1'])",
        "[].map.constructor('return globalThis')()",
        "Object.constructor('return 1')()",
        "(class A {}).constructor('return 1')()",
        # `constructor` is an ordinary source / tool name there (issue 13): never Function.
        "tools.constructor('return 1')()",
        "tools.app.constructor.constructor('return 1')()",
        "console.log.constructor('return 1')()",
    ],
)
async def test_no_code_generation(sandbox: CodeSandbox, expression: str) -> None:
    code = f"try {{ const r = {expression}; return ['reached', typeof r] }} catch (e) {{ return e.name }}"
    value = await value_of(sandbox, code)
    assert value in ("EvalError", "TypeError") or value == ["reached", "undefined"], value


@pytest.mark.parametrize("specifier", ["os", "std", "qjs:os", "./x.js", "data:text/javascript,1"])
async def test_dynamic_import_loads_nothing(sandbox: CodeSandbox, specifier: str) -> None:
    # The compiler refuses import(); built by hand here because the sandbox must hold alone.
    source = f"try {{ await import({specifier!r}); return 'loaded' }} catch (e) {{ return e.name }}"
    program = CompiledProgram("(async () => {\n" + source + "\n})()", 1, source)
    outcome = await run(sandbox, program)
    assert outcome.ok and outcome.value != "loaded"


async def test_tools_and_console_cannot_be_replaced(sandbox: CodeSandbox) -> None:
    code = """
    const attempts = [
      () => { tools = {} },
      () => { globalThis.tools = {} },
      () => { Object.defineProperty(globalThis, 'tools', { value: {} }) },
      () => { tools.t = 1 },
      () => { Object.defineProperty(tools, 'x', { value: 1 }) },
      () => { delete tools.t },
      () => { Object.setPrototypeOf(tools, {}) },
      () => { tools.t.echo = () => 'hijacked' },
      () => { console.log = () => {} },
      () => { delete console.log },
      () => { Object.defineProperty(console, 'log', { value: () => {} }) },
    ];
    const results = attempts.map((f) => { try { f(); return 'ok' } catch (e) { return e.name } });
    const r = await tools.t.echo({ v: 1 });
    console.log('still logging');
    return { results, echoed: r.structuredContent };
    """
    outcome = await run(sandbox, code)
    assert outcome.ok, outcome.diagnostic
    assert isinstance(outcome.value, dict)
    assert outcome.value["echoed"] == {"v": 1}
    assert [e.message for e in outcome.logs] == ["still logging"]


async def test_prototype_pollution_does_not_reach_the_host(sandbox: CodeSandbox) -> None:
    host = HostDouble()
    code = """
    Object.prototype.toJSON = function () { return 'polluted' };
    Array.prototype.push = function () { throw new Error('no push') };
    String.prototype.slice = function () { return 'sliced' };
    JSON.stringify = () => 'fake';
    JSON.parse = () => ({ fake: true });
    Promise.prototype.then = function () { throw new Error('no then') };
    const r = await tools.t.echo({ a: 1 });
    return 'survived';
    """
    outcome = await run(sandbox, code, host)
    # The user's own value serializes through the user's own toJSON; the host saw a clean call.
    assert host.calls and host.calls[0][0:2] == ("t", "echo")
    assert outcome.ok or code_of(outcome) is ErrorCode.UNCAUGHT_EXCEPTION


async def test_error_machinery_cannot_hang_the_host(sandbox: CodeSandbox) -> None:
    hooks = [
        "Error.prototype.toString = function () { for (;;) {} }",
        "Object.prototype[Symbol.toPrimitive] = function () { for (;;) {} }",
        "Object.defineProperty(Error.prototype, 'name', { get() { for (;;) {} } })",
        "try { Error.prepareStackTrace = () => { for (;;) {} } } catch (e) {}",
        "try { InternalError.prototype.toString = () => { for (;;) {} } } catch (e) {}",
        "try { RangeError.prototype.name = { toString() { for (;;) {} } } } catch (e) {}",
    ]
    for hook in hooks:
        for trigger in ("for (;;) {}", "function f() { return f() } f()"):
            outcome = await run(sandbox, f"{hook};\n{trigger}", compute_time_ms=150)
            assert not outcome.ok, (hook, trigger)
    outcome = await run(
        sandbox,
        "Error.prototype.toString = () => { for (;;) {} }; const a = []; for (;;) a.push('x' + a.length)",
        memory_bytes=8 * 1024 * 1024,
        compute_time_ms=5000,
    )
    assert not outcome.ok


async def test_throwing_microtask_ends_the_run(sandbox: CodeSandbox) -> None:
    code = "queueMicrotask(() => { throw { toString() { for (;;) {} } } }); await tools.t.echo({})"
    outcome = await run(sandbox, code, compute_time_ms=200)
    assert code_of(outcome) in (ErrorCode.UNCAUGHT_EXCEPTION, ErrorCode.COMPUTE_LIMIT)


async def test_proxy_and_reflect_probing_of_tools(sandbox: CodeSandbox) -> None:
    code = """
    return [
      typeof tools, typeof tools.any, typeof tools.any.thing,
      Reflect.ownKeys(tools).length, Reflect.ownKeys(tools.any).length,
      Object.getPrototypeOf(tools) === null, JSON.stringify(tools), String(tools.any),
      tools.then, tools.any.then, typeof tools[Symbol.iterator], typeof tools[Symbol.toPrimitive],
      (await tools) === tools, (await tools.any) === tools.any, tools.gh === tools.gh,
      String(tools), `${tools}`,
    ];
    """
    value = await value_of(sandbox, code)
    # The root converts to text through Symbol.toPrimitive (every string key is a source).
    assert value == [
        "object", "object", "function", 0, 0, True, "{}", "[tools.any]", None, None,
        "undefined", "function", True, True, True, "[tools]", "[tools]",
    ]  # fmt: skip
