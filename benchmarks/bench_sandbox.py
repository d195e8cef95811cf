"""Component figures: the in-process QuickJS adapter against a bare quickjs context, with a
host that answers every call at once. No bridge (no validation, policy, bounds or scrubbing),
no worker process: not what a user pays. For that, see ``bench_engine.py``.

Run: ``python benchmarks/bench_sandbox.py`` (add ``--quick`` for fewer repetitions).
Prints medians; asserts nothing (targets are quoted in the ADRs, not enforced by tests).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import quickjs

from codemodekit.compiler.compile import CodeCompiler
from codemodekit.limits import Limits
from codemodekit.sandbox.quickjs import QuickJsSandbox

NO_OP_RESULT = {"content": [], "structuredContent": None}


class NoOpHost:
    async def call_tool(self, source: str, tool: str, arguments: Any) -> Any:
        return NO_OP_RESULT


def median_us(samples: list[float]) -> float:
    return statistics.median(samples) * 1e6


def bare_eval(n: int) -> float:
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        quickjs.Context().eval("1")
        samples.append(time.perf_counter() - start)
    return median_us(samples)


async def timed(n: int, make: Callable[[], Awaitable[Any]], pause: float = 0.0) -> list[float]:
    samples = []
    for _ in range(n):
        if pause:
            await asyncio.sleep(pause)
        start = time.perf_counter()
        await make()
        samples.append(time.perf_counter() - start)
    return samples


async def main(quick: bool) -> None:
    n = 300 if quick else 3000
    calls = 2000 if quick else 10000
    compiler = CodeCompiler()
    limits = Limits()
    host = NoOpHost()
    trivial = compiler.compile("return 1", max_source_bytes=limits.source_bytes)
    bare = bare_eval(n)
    print(
        "COMPONENT FIGURES: in-process QuickJsSandbox, a no-op host (no bridge: no validation,"
        " policy, bounds or scrubbing); what a user pays is in bench_engine.py"
    )
    print(f"bare quickjs.Context().eval('1'):        median {bare:8.1f} µs")
    baselines: dict[str, float] = {}
    for offload in ("thread", "inline"):
        sandbox = QuickJsSandbox(offload=offload)  # type: ignore[arg-type]
        await sandbox.run(trivial, host, limits)  # warm up (threads, module sources)
        samples = await timed(n, lambda s=sandbox: s.run(trivial, host, limits))  # type: ignore[misc]
        baselines[offload] = median_us(samples)
        print(
            f"trivial run `return 1` ({offload:6}):        median {baselines[offload]:8.1f} µs"
            f"   ratio to bare eval {baselines[offload] / bare:5.1f}×   (back to back)"
        )
        # Runs arriving 5 ms apart, as a server sees them: the prepared contexts keep up.
        spaced = median_us(
            await timed(n // 3, lambda s=sandbox: s.run(trivial, host, limits), pause=0.005)  # type: ignore[misc]
        )
        print(
            f"trivial run `return 1` ({offload:6}):        median {spaced:8.1f} µs"
            f"   ratio to bare eval {spaced / bare:5.1f}×   (5 ms apart)"
        )
        cold = QuickJsSandbox(offload=offload, prewarm=0)  # type: ignore[arg-type]
        unprepared = median_us(await timed(n, lambda s=cold: s.run(trivial, host, limits)))  # type: ignore[misc]
        print(
            f"trivial run `return 1` ({offload:6}):        median {unprepared:8.1f} µs"
            f"   ratio to bare eval {unprepared / bare:5.1f}×   (prewarm=0)"
        )
    big = limits.replace(
        max_tool_calls=calls * 2, compute_time_ms=600_000, memory_bytes=512 * 1024 * 1024
    )
    sequential = compiler.compile(
        f"for (let i = 0; i < {calls}; i++) await tools.t.noop({{ i }}); return 1",
        max_source_bytes=limits.source_bytes,
    )
    concurrent = compiler.compile(
        f"await Promise.all(Array.from({{ length: {calls} }}, (_, i) => tools.t.noop({{ i }})));"
        " return 1",
        max_source_bytes=limits.source_bytes,
    )
    for offload in ("thread", "inline"):
        sandbox = QuickJsSandbox(offload=offload)  # type: ignore[arg-type]
        for name, program in (("sequential", sequential), ("concurrent", concurrent)):
            reps = 3 if quick else 5
            samples = await timed(reps, lambda s=sandbox, p=program: s.run(p, host, big))  # type: ignore[misc]
            total = statistics.median(samples)
            per_call = (total * 1e6 - baselines[offload]) / calls
            print(
                f"{calls} no-op host calls, {name} ({offload:6}): {total * 1000:8.1f} ms"
                f" = {per_call:6.1f} µs/call, {calls / total:9.0f} calls/s"
            )
    await random_draws(compiler, limits, 200_000 if quick else 1_000_000)


async def random_draws(compiler: CodeCompiler, limits: Limits, draws: int) -> None:
    """``Math.random()`` per call: the sandbox's per-run seeded generator (ADR 0035) against
    the engine's native one in a bare context. Each figure is a loop of draws minus the same
    loop adding a constant, divided by the draws (best of 3, CPU time of this process)."""
    loops = [
        f"let s = 0; for (let i = 0; i < {draws}; i++) s += {term}; return s;"
        for term in ("Math.random()", "0.5")
    ]
    big = limits.replace(compute_time_ms=600_000)
    sandbox = QuickJsSandbox(offload="inline")
    programs = [compiler.compile(loop, max_source_bytes=limits.source_bytes) for loop in loops]
    bare = quickjs.Context()
    bare.set_time_limit(600)
    sandboxed: list[float] = []
    native: list[float] = []
    for _ in range(3):
        cpu = []
        for program in programs:
            start = time.process_time()
            await sandbox.run(program, NoOpHost(), big)
            cpu.append(time.process_time() - start)
        sandboxed.append((cpu[0] - cpu[1]) / draws)
        cpu = []
        for loop in loops:
            start = time.process_time()
            bare.eval(f"(() => {{ {loop} }})()")
            cpu.append(time.process_time() - start)
        native.append((cpu[0] - cpu[1]) / draws)
    print(f"Math.random(), seeded per run (sandbox):      {min(sandboxed) * 1e9:8.0f} ns/call")
    print(f"Math.random(), the engine's own (bare):       {min(native) * 1e9:8.0f} ns/call")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    asyncio.run(main(parser.parse_args().quick))
