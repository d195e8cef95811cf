"""A sequential tool call costs the event loop no extra turn (ADR 0037).

The run is resumed by the callback that reads the worker's reply (or takes a slice's or a
sync tool's outcome from its thread), in the same turn of the loop, instead of a future
scheduling the run's next step with ``call_soon``. Counted, not timed: the callbacks a run
schedules do not grow with its number of awaited calls.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from codemodekit import (
    CodeMode,
    Limits,
    ProcessSandbox,
    QuickJsSandbox,
    RuntimeOptions,
    allow_all_tool_calls,
    define_tool,
    local,
)

OBJECT = {"type": "object"}


async def _noop(_args: dict[str, Any]) -> dict[str, Any]:
    return {}


def _no_wait(_args: dict[str, Any]) -> dict[str, Any]:
    return {}


@pytest.fixture(params=["process", "inline"])
async def code_mode(request: pytest.FixtureRequest) -> AsyncIterator[CodeMode]:
    box: ProcessSandbox | QuickJsSandbox
    if request.param == "process":
        box = ProcessSandbox(RuntimeOptions(max_runs=2, warm_workers=1), shared=False)
    else:
        box = QuickJsSandbox()
    tools = local(
        "app",
        {
            "noop": define_tool(description="no-op", input_schema=OBJECT, execute=_noop),
            "quick": define_tool(
                description="no-op", input_schema=OBJECT, execute=_no_wait, blocking=False
            ),
            "may_block": define_tool(description="no-op", input_schema=OBJECT, execute=_no_wait),
        },
    )
    try:
        async with CodeMode(
            sources=[tools],
            policy=allow_all_tool_calls(),
            limits=Limits(max_tool_calls=1000),
            sandbox=box,
        ) as cm:
            yield cm
    finally:
        box.close()


async def _scheduled(cm: CodeMode, code: str) -> int:
    """How many callbacks the loop was asked to run soon while ``code`` ran."""
    loop = asyncio.get_running_loop()
    original = loop.call_soon
    count = 0

    def counting(*args: Any, **kwargs: Any) -> Any:
        nonlocal count
        count += 1
        return original(*args, **kwargs)

    loop.call_soon = counting  # type: ignore[method-assign]
    try:
        result = await cm.run(code)
    finally:
        del loop.call_soon  # type: ignore[method-assign]
    assert result.ok, result.diagnostic
    return count


@pytest.mark.parametrize("tool", ["noop", "quick", "may_block"])
async def test_sequential_awaited_calls_schedule_no_callback_each(
    code_mode: CodeMode, tool: str
) -> None:
    def program(calls: int) -> str:
        return f"for (let i = 0; i < {calls}; i++) {{ await tools.app.{tool}({{}}); }} return 1;"

    await code_mode.run(program(2))  # warm: the first run of a source compiles it
    few = await _scheduled(code_mode, program(5))
    many = await _scheduled(code_mode, program(205))
    # Two hundred more calls; one callback each would be 200 more. A few callbacks per run
    # (the pool handing over a worker, a new worker's hello) may land in either run.
    assert many - few < 20, (few, many)
