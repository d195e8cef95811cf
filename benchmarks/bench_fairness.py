"""What one caller's flood costs another caller's trivial run (issue 23, item 1; ADR 0030).

    python benchmarks/bench_fairness.py [--runs 20] [--flood 300] [--max-runs 0]

One caller starts ``--flood`` concurrent runs that await a tool which never answers until
the end; meanwhile another caller runs ``return 1`` ``--runs`` times, one after the other.
Prints the innocent run's median and worst latency with the flood and without it (the
"extra" is the difference). Goal: at most 50 ms extra. Process mode, default runtime
options (``--max-runs 0``: 32 per CPU).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

from codemodekit import (
    CodeMode,
    ProcessSandbox,
    RuntimeOptions,
    allow_all_tool_calls,
    define_tool,
    local,
)


async def _latencies(cm: CodeMode, runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        result = await cm.run("return 1;", caller="innocent")
        out.append((time.perf_counter() - start) * 1000)
        assert result.ok, result.diagnostic
    return out


async def main(runs: int, flood: int, max_runs: int) -> None:
    gate = asyncio.Event()

    async def wait(args: dict[str, Any]) -> dict[str, Any]:
        await gate.wait()
        return {}

    tools = local("app", {"wait": define_tool(description="w", input_schema={}, execute=wait)})
    box = ProcessSandbox(RuntimeOptions(max_runs=max_runs, queue_timeout_ms=600_000), shared=False)
    try:
        async with CodeMode(sources=[tools], policy=allow_all_tool_calls(), sandbox=box) as cm:
            await _latencies(cm, 5)  # warm
            quiet = await _latencies(cm, runs)
            flooding = [
                asyncio.ensure_future(cm.run("await tools.app.wait({}); return 0;", caller="flood"))
                for _ in range(flood)
            ]
            while True:  # until every flood run is in flight, queued or refused
                now = cm.runtime_stats()
                if now.runs_in_flight + now.runs_queued + now.runs_rejected >= flood:
                    break
                await asyncio.sleep(0.05)
            await asyncio.sleep(1.0)  # the warm idle workers come back
            stats = cm.runtime_stats()
            loaded = await _latencies(cm, runs)
            gate.set()
            await asyncio.gather(*flooding)
    finally:
        box.close()
    print(
        f"flood: {flood} runs ({stats.runs_in_flight} in flight, {stats.runs_queued} queued, "
        f"{stats.runs_rejected} refused)"
    )
    for name, values in (("quiet", quiet), ("flooded", loaded)):
        print(f"{name:8} median {statistics.median(values):7.2f} ms   worst {max(values):7.2f} ms")
    extra = statistics.median(loaded) - statistics.median(quiet)
    print(f"extra (median): {extra:.2f} ms (goal <= 50 ms)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--flood", type=int, default=300)
    parser.add_argument("--max-runs", type=int, default=0)
    args = parser.parse_args()
    asyncio.run(main(args.runs, args.flood, args.max_runs))
