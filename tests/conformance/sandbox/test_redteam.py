"""Red-team findings that any adapter must hold: limits that native-heavy code, deep
nesting or a hostile tool result must not turn into a hang or an internal error."""

from __future__ import annotations

from typing import Any

import pytest

from codemodekit.errors import ErrorCode
from codemodekit.sandbox.base import CodeSandbox
from tests.conformance.sandbox.harness import HostDouble, code_of, run


async def assert_alive(sandbox: CodeSandbox) -> None:
    outcome = await run(sandbox, "return [1, 2, 3].map((x) => x * 2)")
    assert outcome.ok and outcome.value == [2, 4, 6]


def nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth):
        value = [value]
    return value


class DeepHost(HostDouble):
    """``t.deep({n})`` returns a result nested ``n`` arrays deep."""

    async def call_tool(self, source: str, tool: str, arguments: Any) -> Any:
        if tool == "deep":
            self.calls.append((source, tool, arguments))
            return {"content": [], "structuredContent": nested(arguments["n"])}
        return await super().call_tool(source, tool, arguments)


@pytest.mark.parametrize(
    "code",
    [
        # Operators never poll for the time limit: each % of two huge BigInts takes a
        # sizeable fraction of a second and the loop polls only every 10,000 iterations.
        "const x = 3n ** 600000n, y = 7n ** 150000n; let z;\nfor (;;) z = x % y",
        # A native that is not one of the guarded ones, on a large input, in a loop.
        "const s = 'a'.repeat(2 ** 22); let n = 0;\n"
        "for (let i = 0; i < 1e5; i++) n += s.replaceAll('a', 'bb').length; return n",
    ],
    ids=["bigint-operator", "unguarded-native"],
)
async def test_slow_operations_in_a_loop_hit_the_compute_limit(
    sandbox: CodeSandbox, code: str
) -> None:
    outcome = await run(sandbox, code, compute_time_ms=300)
    assert code_of(outcome) is ErrorCode.COMPUTE_LIMIT
    await assert_alive(sandbox)


async def test_arguments_nested_too_deeply_for_the_host_reject_the_call(
    sandbox: CodeSandbox,
) -> None:
    host = HostDouble()
    code = (
        "let a = []; for (let i = 0; i < 990; i++) a = [a];\n"
        "try { await tools.t.echo({ a }); return 'sent' }\n"
        "catch (e) { return [e.name, e.code, (await tools.t.echo({ b: 1 })).structuredContent] }"
    )
    outcome = await run(sandbox, code, host)
    assert outcome.ok, outcome.diagnostic
    assert outcome.value in ("sent", ["ToolCallError", "TOOL_INPUT_INVALID", {"b": 1}])
    if outcome.value != "sent":
        assert [c[2] for c in host.calls] == [{"b": 1}]
    await assert_alive(sandbox)


async def test_uncaught_deep_arguments_name_the_call(sandbox: CodeSandbox) -> None:
    code = "let a = []; for (let i = 0; i < 990; i++) a = [a];\nawait tools.t.echo({ a })"
    outcome = await run(sandbox, code)
    # Either the host takes the value or the call fails on its own; never an internal error.
    assert code_of(outcome) in (None, ErrorCode.TOOL_INPUT_INVALID)


async def test_a_result_nested_too_deeply_for_the_host_is_not_serializable(
    sandbox: CodeSandbox,
) -> None:
    code = "let a = []; for (let i = 0; i < 990; i++) a = [a]; return a"
    outcome = await run(sandbox, code)
    if not outcome.ok:
        assert code_of(outcome) is ErrorCode.RESULT_NOT_SERIALIZABLE
        assert outcome.diagnostic is not None and "nest" in outcome.diagnostic.message
    await assert_alive(sandbox)


async def test_a_tool_result_too_deep_for_the_sandbox_rejects_the_call(
    sandbox: CodeSandbox,
) -> None:
    host = DeepHost()
    code = (
        "try { await tools.t.deep({ n: 900 }); return 'parsed' }\n"
        "catch (e) { return [e.name, e.code, e.tool] }"
    )
    outcome = await run(sandbox, code, host, stack_bytes=32 * 1024)
    assert outcome.ok, outcome.diagnostic
    assert outcome.value in ("parsed", ["ToolCallError", "TOOL_RESULT_INVALID", "tools.t.deep"])
    uncaught = await run(sandbox, "await tools.t.deep({ n: 900 })", host, stack_bytes=32 * 1024)
    assert code_of(uncaught) in (None, ErrorCode.TOOL_RESULT_INVALID)
    await assert_alive(sandbox)
