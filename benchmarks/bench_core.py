"""Component figures of the execution core (issue 3): the bridge alone, 10,000-call loops
with one tool and a concurrency check. The per-call cost a user pays, with spread, CPU time
of every process and sync and coroutine tools side by side, is in ``bench_engine.py``.

python benchmarks/bench_core.py
"""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

import quickjs

from benchmarks._util import amedian_ms, median_ms, row
from codemodekit import CodeMode, Limits, allow_all_tool_calls, define_tool, local
from codemodekit.bridge.bridge import ToolBridge

NOOP_SCHEMA = {"type": "object", "properties": {"i": {"type": "integer"}}}


async def _noop(_args: dict[str, Any]) -> None:
    return None


async def _sleep50(_args: dict[str, Any]) -> int:
    await asyncio.sleep(0.05)
    return 1


def _code_mode(**limits: Any) -> CodeMode:
    tools = {
        "noop": define_tool(description="no-op", input_schema=NOOP_SCHEMA, execute=_noop),
        "wait": define_tool(description="50 ms", input_schema=NOOP_SCHEMA, execute=_sleep50),
    }
    return CodeMode(
        sources=[local("bench", tools)], policy=allow_all_tool_calls(), limits=Limits(**limits)
    )


async def main_async() -> None:
    print(
        "execution core, COMPONENT FIGURES (the 'bridge alone' row has no sandbox; per-call"
        " figures are one run of 10,000 calls): what a user pays is in bench_engine.py"
    )
    bare = median_ms(lambda: quickjs.Context().eval("1"), repeat=2000)
    row("bare quickjs Context() + eval('1')", bare, "ms")
    async with _code_mode() as cm:
        trivial = await amedian_ms(lambda: cm.run("return 1;"), repeat=1000, warmup=50)
    row(
        "trivial run end to end (return 1)",
        trivial,
        "ms",
        f"ratio to bare eval {trivial / bare:.1f}x",
    )

    calls = 10_000
    limits = dict(
        max_tool_calls=calls + 10,
        compute_time_ms=60_000,
        wall_time_ms=600_000,
        max_concurrent_tool_calls=64,
        total_bridge_bytes=1 << 30,
    )
    async with _code_mode(**limits) as cm:
        seq_code = f"for (let i = 0; i < {calls}; i++) await tools.bench.noop({{ i }});\nreturn 1;"
        conc_code = (
            f"await Promise.all(Array.from({{ length: {calls} }}, (_, i) => tools.bench.noop({{ i }})));\n"
            "return 1;"
        )
        for label, code in (("sequential", seq_code), ("concurrent", conc_code)):
            samples = []
            for _ in range(3):
                start = time.perf_counter()
                result = await cm.run(code)
                samples.append(time.perf_counter() - start)
                assert result.ok, result.diagnostic
            per_call_us = statistics.median(samples) / calls * 1e6
            row(
                f"{calls} {label} no-op tool calls: per call",
                per_call_us,
                "us",
                f"{1e6 / per_call_us:,.0f} calls/s",
            )

    # The bridge alone (resolve, validate, queue, policy, dispatch, check the result),
    # without the sandbox's settle cost: what one call costs the host.
    async with _code_mode() as cm:
        bridge = ToolBridge(
            catalog=lambda: cm.catalog,
            providers=cm.providers,
            policy=cm.policy,
            limits=cm.limits.replace(max_tool_calls=10**9, total_bridge_bytes=1 << 40),
            execution_id="bench",
        )

        async def ten_thousand() -> None:
            for i in range(10_000):
                await bridge.call_tool("bench", "noop", {"i": i})

        bridge_ms = await amedian_ms(ten_thousand, repeat=5, warmup=1)
    row("bridge alone, per no-op call", bridge_ms / 10_000 * 1000, "us")

    async with _code_mode() as cm:
        samples = []
        for _ in range(5):
            start = time.perf_counter()
            results = await asyncio.gather(
                *(
                    cm.run("return (await tools.bench.wait({})).structuredContent;")
                    for _ in range(100)
                )
            )
            samples.append(time.perf_counter() - start)
            assert all(r.ok for r in results)
        wall = statistics.median(samples)
        row(
            "100 concurrent runs, each awaiting a 50 ms tool: wall",
            wall * 1000,
            "ms",
            f"{wall / 0.05:.2f}x one 50 ms call",
        )


def main() -> None:
    asyncio.run(main_async())


if __name__ == "__main__":
    main()
