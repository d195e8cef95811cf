"""The execution engine (issue 11): every row of its target table, process and inline modes.

python -m benchmarks.bench_engine

Medians over repeated runs, all in this one process; ratios are taken within this run.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

from benchmarks._util import amedian_ms, row
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
from codemodekit.compiler.compile import CodeCompiler
from codemodekit.errors import CompileFailure

OBJ = {"type": "object"}
SOURCE_LIMIT = 128 * 1024


async def _anoop(_args: dict[str, Any]) -> None:
    return None


async def _sleep50(_args: dict[str, Any]) -> int:
    await asyncio.sleep(0.05)
    return 1


def _burn(args: dict[str, Any]) -> int:
    deadline = time.process_time() + float(args["seconds"])
    n = 0
    while time.process_time() < deadline:
        n += 1
    return n


def _tools() -> Any:
    return local(
        "b",
        {
            "noop": define_tool(description="no-op", input_schema=OBJ, execute=lambda a: None),
            "anoop": define_tool(description="async no-op", input_schema=OBJ, execute=_anoop),
            "wait": define_tool(description="50 ms", input_schema=OBJ, execute=_sleep50),
            "burn": define_tool(description="burn host CPU", input_schema=OBJ, execute=_burn),
        },
    )


def _code_mode(sandbox: Any, **limits: Any) -> CodeMode:
    return CodeMode(
        sources=[_tools()],
        policy=allow_all_tool_calls(),
        limits=Limits(**limits) if limits else None,
        sandbox=sandbox,
    )


def _script(lines: int, salt: int) -> str:
    body = [f"const seed{salt}: number = {salt};", "let total: number = 0;"]
    for i in range(lines - 4):
        body.append(
            f"const v{i}: {{ a: number; b: string }} = {{ a: {i}, b: 'x{i}' }}; total += v{i}.a;"
        )
    body.append("const r = await tools.b.noop({});")
    body.append("return total;")
    return "\n".join(body)


def _sandbox(mode: str) -> Any:
    if mode == "inline":
        return QuickJsSandbox()
    return ProcessSandbox(RuntimeOptions(), shared=False)  # the defaults


async def _per_call_us(cm: CodeMode, calls: int, tool: str = "noop") -> float:
    code = f"for (let i = 0; i < {calls}; i++) {{ await tools.b.{tool}({{}}); }}\nreturn 1;"
    base = await amedian_ms(lambda: cm.run("return 1;"), repeat=30, warmup=5)
    full = await amedian_ms(lambda: cm.run(code), repeat=15, warmup=3)
    return (full - base) / calls * 1000


async def _concurrent_wait(cm: CodeMode) -> float:
    samples = []
    for _ in range(5):
        start = time.perf_counter()
        results = await asyncio.gather(
            *(cm.run("return await tools.b.wait({});") for _ in range(100))
        )
        samples.append(time.perf_counter() - start)
        assert all(r.ok for r in results), [r.diagnostic for r in results if not r.ok][:1]
    return statistics.median(samples) * 1000


CPU_LOOP = "let x = 0; for (let i = 0; i < 4e6; i++) { x = (x + i * 7) % 1000003; } return x;"


async def _cpu_runs_per_s(workers: int) -> float:
    box = ProcessSandbox(RuntimeOptions(max_runs=workers, warm_workers=workers), shared=False)
    try:
        async with _code_mode(box, compute_time_ms=30_000) as cm:
            await asyncio.gather(*(cm.run(CPU_LOOP) for _ in range(workers)))
            runs = 6 * workers
            start = time.perf_counter()
            results = await asyncio.gather(*(cm.run(CPU_LOOP) for _ in range(runs)))
            elapsed = time.perf_counter() - start
            assert all(r.ok for r in results)
            return runs / elapsed
    finally:
        box.close()


async def _after_cancelled(sandbox: Any) -> float:
    hostile = [
        "const rev = Array.prototype.reverse; const o = {length: 2**31 - 1}; for (;;) rev.call(o);",
        "while (true) {}",
    ] * 8
    async with _code_mode(sandbox, compute_time_ms=600_000, wall_time_ms=600_000) as cm:
        await cm.run("return 1;")
        events = [asyncio.Event() for _ in hostile]
        runs = [
            asyncio.ensure_future(cm.run(c, cancel=e)) for c, e in zip(hostile, events, strict=True)
        ]
        await asyncio.sleep(0.3)
        for event in events:
            event.set()
        await asyncio.gather(*runs)
        start = time.perf_counter()
        result = await cm.run("return 1;")
        assert result.ok
        return (time.perf_counter() - start) * 1000


async def _accounting_error() -> tuple[float, float, float]:
    box = ProcessSandbox(RuntimeOptions(max_runs=4), shared=False)
    budget = 5000
    try:
        async with _code_mode(box, compute_time_ms=budget) as cm:
            alone = [(await cm.run(CPU_LOOP)).compute_ms for _ in range(5)]
            burner = asyncio.ensure_future(cm.run("return await tools.b.burn({seconds: 6});"))
            await asyncio.sleep(0.2)
            loaded = [(await cm.run(CPU_LOOP)).compute_ms for _ in range(5)]
            await burner
    finally:
        box.close()
    a, b = statistics.median(alone), statistics.median(loaded)
    return a, b, abs(b - a) / budget * 100


def _rss_mb(pid: str = "self") -> float:
    with open(f"/proc/{pid}/statm", "rb") as statm:
        import os

        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


async def _memory_handed_back() -> tuple[float, float, float]:
    box = ProcessSandbox(RuntimeOptions(max_runs=48), shared=False)
    hog = (
        "const keep = []; for (let i = 0; i < 550; i++) keep.push('x'.repeat(100000) + i);\n"
        "return keep.length;"
    )
    try:
        async with _code_mode(box, memory_bytes=96 * 2**20) as cm:
            results = await asyncio.gather(*(cm.run(hog) for _ in range(40)))
            assert all(r.ok for r in results), [r.diagnostic for r in results if not r.ok][:1]
            stats = cm.runtime_stats()
            return _rss_mb(), stats.worker_rss_bytes / 2**20, stats.workers
    finally:
        box.close()


PATHOLOGICAL = {
    "non-null chain": lambda n: "const x: any = 1;\nreturn x" + "!" * n + ";",
    "as chain": lambda n: "const x: any = 1;\nreturn x" + " as any" * (n // 7) + ";",
    "satisfies chain": lambda n: "const x: any = 1;\nreturn x" + " satisfies any" * (n // 14) + ";",
    "nested parens": lambda n: "return " + "(" * (n // 2) + "1" + ")" * (n // 2) + ";",
    "member chain": lambda n: "const x: any = {};\nreturn x" + ".a" * (n // 2) + ";",
    "call chain": lambda n: "const f: any = () => f;\nreturn f" + "()" * (n // 2) + ";",
    "arrow chain": lambda n: "const f = " + "(a: number) => " * (n // 16) + "1;",
    "type union": lambda n: "let x: " + " | ".join(["1"] * (n // 4)) + " = 1;",
    "blocks": lambda n: "{" * (n // 2) + "}" * (n // 2),
    "many lines": lambda n: "let a: number = 1;\n" * (n // 19),
}


def _compile_worst() -> None:
    compiler = CodeCompiler()
    for name, make in PATHOLOGICAL.items():
        source = make(SOURCE_LIMIT - 256)
        start = time.perf_counter()
        try:
            compiler.compile(source, max_source_bytes=SOURCE_LIMIT)
            outcome = "ok"
        except CompileFailure as failure:
            outcome = str(failure.diagnostic.code)
        row(
            f"compile {name} ({len(source) // 1024} KiB)",
            (time.perf_counter() - start) * 1000,
            "ms",
            outcome,
        )


async def main_async() -> None:
    print("execution engine (process = sandbox worker processes, inline = this process)")
    script_cached = _script(200, 0)
    counter = iter(range(1, 1_000_000))
    for name in ("process", "inline"):
        async with _code_mode(_sandbox(name), max_tool_calls=1000, compute_time_ms=60_000) as cm:
            await asyncio.sleep(1.0)  # warm workers
            trivial = await amedian_ms(lambda: cm.run("return 1;"), repeat=300, warmup=30)
            row(f"[{name}] trivial run end to end (return 1)", trivial, "ms", "target <= 1 ms")
            per_call = await _per_call_us(cm, 200)
            row(
                f"[{name}] per sequential no-op tool call (sync tool)",
                per_call,
                "us",
                "target <= 50 us",
            )
            per_async = await _per_call_us(cm, 200, "anoop")
            row(f"[{name}] per sequential no-op tool call (async tool)", per_async, "us")
            cached = await amedian_ms(lambda: cm.run(script_cached), repeat=50, warmup=5)
            row(
                f"[{name}] 200-line script, one tool call (same script)",
                cached,
                "ms",
                "target <= 4 ms",
            )
            fresh = await amedian_ms(
                lambda: cm.run(_script(200, next(counter))), repeat=50, warmup=5
            )
            row(
                f"[{name}] 200-line script, one tool call (new script)",
                fresh,
                "ms",
                "compile-bound",
            )
            wait = await _concurrent_wait(cm)
            row(
                f"[{name}] 100 concurrent runs awaiting a 50 ms tool", wait, "ms", "target < 500 ms"
            )
    after = await _after_cancelled(_sandbox("process"))
    row("[process] trivial run after 16 cancelled busy loops", after, "ms", "target <= 50 ms")
    one = await _cpu_runs_per_s(1)
    row("[process] CPU-bound runs/s, 1 worker", one, "runs/s")
    import os

    cores = len(os.sched_getaffinity(0))
    many = await _cpu_runs_per_s(cores)
    row(
        f"[process] CPU-bound runs/s, {cores} workers",
        many,
        "runs/s",
        f"ratio {many / one:.2f} (target >= {0.8 * cores:.1f})",
    )
    alone, loaded, error = await _accounting_error()
    row("[process] compute of a fixed loop, alone", alone, "ms")
    row(
        "[process] the same under a CPU-burning host tool",
        loaded,
        "ms",
        f"error {error:.1f}% of the budget (target <= 10%)",
    )
    server, workers, count = await _memory_handed_back()
    row("[process] after 40 concurrent runs of 55 MB: server RSS", server, "MiB")
    row(
        f"[process] after them: {count} workers' RSS together",
        workers,
        "MiB",
        "shared zygote pages counted in each",
    )
    _compile_worst()


if __name__ == "__main__":
    asyncio.run(main_async())
