"""Return values: JSON round trip, explicit failures for what JSON cannot carry."""

from __future__ import annotations

import asyncio

from codemodekit.errors import ErrorCode
from codemodekit.sandbox.base import CodeSandbox
from tests.conformance.sandbox.harness import code_of, run


async def test_returns_json_values(sandbox: CodeSandbox) -> None:
    outcome = await run(
        sandbox, 'return { n: 1.5, s: "é\\u0000", list: [true, null], nested: { k: [] } }'
    )
    assert outcome.ok
    assert outcome.value == {"n": 1.5, "s": "é\x00", "list": [True, None], "nested": {"k": []}}


async def test_undefined_and_no_return_give_none(sandbox: CodeSandbox) -> None:
    for code in ("return undefined", "const x = 1;", "x: { break x }"):
        outcome = await run(sandbox, code)
        assert outcome.ok and outcome.value is None, code


async def test_top_level_await_and_async_result(sandbox: CodeSandbox) -> None:
    outcome = await run(sandbox, "const v = await Promise.resolve(20); return v + 22")
    assert outcome.ok and outcome.value == 42


async def test_json_semantics_inside_values(sandbox: CodeSandbox) -> None:
    code = (
        "return { f() {}, u: undefined, d: new Date(0).toISOString(), nan: NaN, arr: [undefined] }"
    )
    outcome = await run(sandbox, code)
    assert outcome.ok
    assert outcome.value == {"d": "1970-01-01T00:00:00.000Z", "nan": None, "arr": [None]}


async def test_a_date_object_as_a_value_is_refused_with_its_path(sandbox: CodeSandbox) -> None:
    # Issue 13: values that are not JSON are refused, not silently converted.
    outcome = await run(sandbox, "return { when: [new Date(0)] }")
    assert code_of(outcome) is ErrorCode.RESULT_NOT_SERIALIZABLE
    assert outcome.diagnostic is not None and "$.when[0]" in outcome.diagnostic.message


async def test_shared_references_are_fine(sandbox: CodeSandbox) -> None:
    outcome = await run(sandbox, "const a = { x: 1 }; return [a, a, { a }]")
    assert outcome.ok and outcome.value == [{"x": 1}, {"x": 1}, {"a": {"x": 1}}]


async def test_lone_surrogates_become_replacement_characters(sandbox: CodeSandbox) -> None:
    outcome = await run(sandbox, 'return ["a\\ud800b", "\\udfff"]')
    assert outcome.ok and outcome.value == ["a\ufffdb", "\ufffd"]


async def test_not_serializable_results(sandbox: CodeSandbox) -> None:
    cases = {
        "return 10n": "BigInt",
        "const o = {}; o.self = o; return o": "circular",
        "return () => 1": "function",
        "return Symbol('s')": "symbol",
        "return { toJSON() { throw new Error('no json for you') } }": "no json for you",
    }
    for code, why in cases.items():
        outcome = await run(sandbox, code)
        assert code_of(outcome) is ErrorCode.RESULT_NOT_SERIALIZABLE, code
        assert outcome.diagnostic is not None and why in outcome.diagnostic.message, code


async def test_result_size_is_measured_in_utf8_bytes(sandbox: CodeSandbox) -> None:
    # "é" is 2 bytes in UTF-8: 600 of them plus quotes is 1202 bytes.
    ok = await run(sandbox, 'return "é".repeat(598)', final_result_bytes=1198)
    assert ok.ok
    too_large = await run(sandbox, 'return "é".repeat(600)', final_result_bytes=1198)
    assert code_of(too_large) is ErrorCode.RESULT_TOO_LARGE
    assert too_large.diagnostic is not None
    assert "1202 bytes" in too_large.diagnostic.message
    assert "final_result_bytes" in too_large.diagnostic.message


async def test_huge_result_fails_and_the_next_run_works(sandbox: CodeSandbox) -> None:
    outcome = await run(sandbox, 'return "x".repeat(20 * 1024 * 1024)')
    assert code_of(outcome) is ErrorCode.RESULT_TOO_LARGE
    assert (await run(sandbox, "return 1 + 1")).value == 2


async def test_nothing_leaks_between_runs(sandbox: CodeSandbox) -> None:
    code = (
        "const was = [typeof globalThis.mark, Array.prototype.extra];\n"
        "globalThis.mark = 1; Array.prototype.extra = 'x'; return was"
    )
    for _ in range(4):
        outcome = await run(sandbox, code)
        assert outcome.ok and outcome.value == ["undefined", None]
        await asyncio.sleep(0.01)  # give an adapter time to prepare contexts between runs
