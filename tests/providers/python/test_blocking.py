"""Where a sync Python tool runs: on a thread of its source (it may block), or on the event
loop at once when its author declares it never blocks (``blocking=False``)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from codemodekit import (
    CodeMode,
    ErrorCode,
    RuntimeOptions,
    ToolError,
    allow_all_tool_calls,
    define_tool,
    local,
    tool,
)

OBJ: dict[str, Any] = {"type": "object"}


def _where(_args: dict[str, Any]) -> dict[str, Any]:
    try:
        asyncio.get_running_loop()
        on_loop = True
    except RuntimeError:
        on_loop = False
    return {"loop": on_loop, "thread": threading.current_thread().name}


@tool(blocking=False)
def quick_sum(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
def slow_sum(a: int, b: int) -> int:
    """Add two numbers, maybe slowly."""
    return a + b


def _refuse(_args: dict[str, Any]) -> Any:
    raise ToolError("no such record", code="404")


def _crash(_args: dict[str, Any]) -> Any:
    raise RuntimeError("bug")


def _code_mode(mode: str) -> CodeMode:
    tools = {
        "threaded": define_tool(description="t", input_schema=OBJ, execute=_where),
        "inline": define_tool(description="i", input_schema=OBJ, execute=_where, blocking=False),
        "refuse": define_tool(description="r", input_schema=OBJ, execute=_refuse, blocking=False),
        "crash": define_tool(description="c", input_schema=OBJ, execute=_crash, blocking=False),
        "quick_sum": quick_sum,
        "slow_sum": slow_sum,
    }
    return CodeMode(
        sources=[local("app", tools)],
        policy=allow_all_tool_calls(),
        runtime=RuntimeOptions(mode=mode),  # type: ignore[arg-type]
    )


MODES = ["process", "inline"]


@pytest.mark.parametrize("mode", MODES)
async def test_a_sync_tool_runs_on_a_thread_of_its_source_unless_it_never_blocks(
    mode: str,
) -> None:
    async with _code_mode(mode) as cm:
        result = await cm.run(
            "const t = (await tools.app.threaded({})).structuredContent;\n"
            "const i = (await tools.app.inline({})).structuredContent;\n"
            "return [t, i];"
        )
    assert result.ok, result.diagnostic
    threaded, inline = result.value
    assert threaded["loop"] is False and threaded["thread"].startswith("codemode-tool-app")
    assert inline["loop"] is True


@pytest.mark.parametrize("mode", MODES)
async def test_the_decorator_takes_blocking_too(mode: str) -> None:
    assert quick_sum.blocking is False and slow_sum.blocking is True
    async with _code_mode(mode) as cm:
        result = await cm.run(
            "const q = await tools.app.quick_sum({ a: 1, b: 2 });\n"
            "const s = await tools.app.slow_sum({ a: 3, b: 4 });\n"
            "return [q.structuredContent.result, s.structuredContent.result];"
        )
    assert result.value == [3, 7], result.diagnostic


@pytest.mark.parametrize("mode", MODES)
async def test_a_non_blocking_tool_fails_like_any_other(mode: str) -> None:
    async with _code_mode(mode) as cm:
        refused = await cm.run(
            "try { await tools.app.refuse({}); } catch (e) { return [e.code, e.upstreamCode]; }"
        )
        crashed = await cm.run("await tools.app.crash({});")
    assert refused.value == ["TOOL_ERROR", 404]
    assert crashed.diagnostic is not None
    assert crashed.diagnostic.code is ErrorCode.TOOL_INTERNAL_ERROR
    assert "bug" not in crashed.diagnostic.message


async def test_many_concurrent_blocking_calls_all_complete() -> None:
    started = threading.Barrier(4, timeout=60)

    def meet(_args: dict[str, Any]) -> int:
        started.wait()  # four calls at once need four threads
        return 1

    tools = {"meet": define_tool(description="m", input_schema=OBJ, execute=meet)}
    async with CodeMode(sources=[local("app", tools)], policy=allow_all_tool_calls()) as cm:
        result = await cm.run(
            "const r = await Promise.all([1, 2, 3, 4].map(() => tools.app.meet({})));\n"
            "return r.map((x) => x.structuredContent);"
        )
    assert result.value == [1, 1, 1, 1], result.diagnostic
