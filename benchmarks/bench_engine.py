"""What a user pays per run and per tool call, through ``CodeMode.run`` (issues 11, 21).

python -m benchmarks.bench_engine            # every row (about 3 minutes)
python -m benchmarks.bench_engine --quick    # the issue-21 rows only, fewer repetitions

Every figure goes through the public API with the default runtime options: ``process``
(sandbox worker processes, what ``CodeMode(...)`` uses) and ``inline`` (QuickJS in this
process). Tools are ``define_tool`` functions behind ``allow_all_tool_calls()``, so every
call is resolved, validated, policy-checked, timed, bounded and scrubbed as in production.

For each row: the median, and [min - max] over the samples (each sample is one run; a
per-call sample is one run of N sequential awaited calls minus the median trivial run,
divided by N). Wall time, and CPU time of every process involved: this (server) process
(``time.process_time``, all its threads) and the sandbox worker (the CPU it reported over
the run's requests; 0 inline). Where the issue quotes the TypeScript implementation's figure
for the same row, it is printed beside ours. Component figures without the bridge (no
validation, policy or scrubbing) are in ``bench_sandbox.py`` and ``bench_core.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from benchmarks._util import row
from benchmarks.machine_floors import floor_rows
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
from codemodekit.sandbox.base import CompiledProgram, SandboxHost, SandboxOutcome
from codemodekit.sandbox.pool import WorkerPool

OBJ = {"type": "object"}
SOURCE_LIMIT = 128 * 1024
CALLS = 200
"""Sequential awaited calls per per-call sample."""

TS = {
    "call": "TS 340-660 us (150 us quiet)",
    "trivial": "TS 14.8-19 ms",
    "fresh": "TS 1.5-2 s",
}
"""The TypeScript implementation's figures from issue 21 (measured on this machine, side by
side with ours: 30 sequential awaited calls minus a trivial run; a trivial run; a fresh
process that runs `return 1`)."""


async def _anoop(_args: dict[str, Any]) -> dict[str, Any]:
    return {}


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
            "noop": define_tool(description="sync no-op", input_schema=OBJ, execute=lambda a: {}),
            "quick": define_tool(
                description="sync no-op that never blocks",
                input_schema=OBJ,
                execute=lambda a: {},
                blocking=False,
            ),
            "anoop": define_tool(description="async no-op", input_schema=OBJ, execute=_anoop),
            "wait": define_tool(description="50 ms", input_schema=OBJ, execute=_sleep50),
            "burn": define_tool(description="burn host CPU", input_schema=OBJ, execute=_burn),
        },
    )


class _Inline:
    """Passes runs through to ``QuickJsSandbox``; nothing to record (one process)."""

    worker_cpu_ms = 0.0

    def __init__(self) -> None:
        self.inner = QuickJsSandbox()

    async def run(self, program: CompiledProgram, host: SandboxHost, limits: Limits) -> Any:
        return await self.inner.run(program, host, limits)


class _Process:
    """Passes runs through to a ``ProcessSandbox`` and adds up the workers' CPU time."""

    def __init__(self, options: RuntimeOptions, *, shared: bool) -> None:
        self.inner = ProcessSandbox(options, shared=shared)
        self.worker_cpu_ms = 0.0

    def start(self) -> None:
        self.inner.start()

    def stats(self) -> Any:
        return self.inner.stats()

    def expect_run(self, limits: Any, stream: bool = False) -> None:
        self.inner.expect_run(limits, stream)

    def close(self) -> None:
        self.inner.close()

    def _count(self, outcome: SandboxOutcome) -> SandboxOutcome:
        self.worker_cpu_ms += outcome.worker_cpu_ms
        return outcome

    async def run(
        self, program: CompiledProgram, host: SandboxHost, limits: Limits
    ) -> SandboxOutcome:
        return self._count(await self.inner.run(program, host, limits))

    async def run_source(self, source: str, host: SandboxHost, limits: Limits) -> SandboxOutcome:
        return self._count(await self.inner.run_source(source, host, limits))


def _sandbox(mode: str, options: RuntimeOptions | None = None, shared: bool = True) -> Any:
    if mode == "inline":
        return _Inline()
    # The shared pool for the default options is exactly what `CodeMode(...)` uses.
    return _Process(options or RuntimeOptions(), shared=shared)


def _code_mode(sandbox: Any, **limits: Any) -> CodeMode:
    return CodeMode(
        sources=[_tools()],
        policy=allow_all_tool_calls(),
        limits=Limits(**limits) if limits else None,
        sandbox=sandbox,
    )


@dataclass
class Sample:
    wall_ms: float
    host_ms: float
    worker_ms: float


async def _sample(cm: CodeMode, box: Any, code: str) -> Sample:
    box.worker_cpu_ms = 0.0
    cpu, wall = time.process_time(), time.perf_counter()
    result = await cm.run(code)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert result.ok, result.diagnostic
    return Sample(wall * 1000, cpu * 1000, box.worker_cpu_ms)


async def _samples(cm: CodeMode, box: Any, code: str, repeat: int, warmup: int) -> list[Sample]:
    for _ in range(warmup):
        await _sample(cm, box, code)
    return [await _sample(cm, box, code) for _ in range(repeat)]


def _spread(values: list[float], scale: float = 1.0) -> str:
    v = sorted(x * scale for x in values)
    return f"{statistics.median(v):8.1f} [{v[0]:7.1f} - {v[-1]:7.1f}]"


def _print(label: str, samples: list[Sample], unit: str, scale: float, note: str) -> None:
    wall = _spread([s.wall_ms for s in samples], scale)
    host = _spread([s.host_ms for s in samples], scale)
    worker = _spread([s.worker_ms for s in samples], scale)
    print(f"  {label}")
    print(f"      wall {wall} {unit}   host CPU {host}   worker CPU {worker}   {note}")


def _per_call(base: list[Sample], full: list[Sample], calls: int) -> list[Sample]:
    b = Sample(
        statistics.median(s.wall_ms for s in base),
        statistics.median(s.host_ms for s in base),
        statistics.median(s.worker_ms for s in base),
    )
    return [
        Sample(
            (s.wall_ms - b.wall_ms) / calls,
            (s.host_ms - b.host_ms) / calls,
            (s.worker_ms - b.worker_ms) / calls,
        )
        for s in full
    ]


def _script(lines: int, salt: int) -> str:
    body = [f"const seed{salt}: number = {salt};", "let total: number = 0;"]
    for i in range(lines - 4):
        body.append(
            f"const v{i}: {{ a: number; b: string }} = {{ a: {i}, b: 'x{i}' }}; total += v{i}.a;"
        )
    body.append("const r = await tools.b.noop({});")
    body.append("return total;")
    return "\n".join(body)


async def _concurrent_wait(cm: CodeMode, rounds: int) -> list[Sample]:
    samples = []
    for _ in range(rounds):
        cpu, start = time.process_time(), time.perf_counter()
        results = await asyncio.gather(
            *(cm.run("return await tools.b.wait({});") for _ in range(100))
        )
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        samples.append(Sample(wall * 1000, cpu * 1000, 0.0))
        assert all(r.ok for r in results), [r.diagnostic for r in results if not r.ok][:1]
    return samples


NO_POLL = "coroutine tool, the worker sleeps (internal switch: no poll)"


@contextlib.contextmanager
def _no_poll(on: bool) -> Iterator[None]:
    """An internal shortcut, labelled where used: the server never asks its worker to poll
    for an answer (ADR 0042), as when more runs are in flight than CPUs."""
    if not on:
        yield
        return
    spare = WorkerPool.cpu_to_spare
    WorkerPool.cpu_to_spare = lambda self: False  # type: ignore[method-assign]
    try:
        yield
    finally:
        WorkerPool.cpu_to_spare = spare  # type: ignore[method-assign]


async def issue21_rows(mode: str, quick: bool) -> None:
    box = _sandbox(mode)
    reps = 7 if quick else 15
    async with _code_mode(box, max_tool_calls=1000, compute_time_ms=60_000) as cm:
        await asyncio.sleep(1.0)  # warm workers
        trivial = await _samples(cm, box, "return 1;", 100 if quick else 300, 20)
        _print(
            f"[{mode}] trivial run `return 1` (one run per sample)",
            trivial,
            "ms",
            1.0,
            f"target <= 1 ms; {TS['trivial']}",
        )
        base = await _samples(cm, box, "return 1;", 30, 5)
        rows = [
            ("anoop", "coroutine tool", "target <= 50 us, host CPU <= 40 us; " + TS["call"]),
            ("quick", "sync tool, blocking=False", "target <= 60 us"),
            ("noop", "sync tool (may block: thread)", "target <= 150 us"),
        ]
        if mode == "process":
            rows.append(("anoop", NO_POLL, "for comparison only: what ADR 0042 saves"))
        for tool, what, target in rows:
            code = f"for (let i = 0; i < {CALLS}; i++) {{ await tools.b.{tool}({{}}); }}\nreturn 1;"
            with _no_poll(what == NO_POLL):
                full = await _samples(cm, box, code, reps, 2)
            _print(
                f"[{mode}] awaited no-op call, {what} ({CALLS} calls x {reps} runs)",
                _per_call(base, full, CALLS),
                "us",
                1000.0,
                target,
            )
        script = _script(200, 0)
        cached = await _samples(cm, box, script, 30 if quick else 50, 5)
        _print(
            f"[{mode}] 200-line script, one call (same script)", cached, "ms", 1.0, "target <= 4 ms"
        )
        counter = iter(range(1, 1_000_000))
        fresh = [
            await _sample(cm, box, _script(200, next(counter))) for _ in range(10 if quick else 30)
        ]
        _print(
            f"[{mode}] 200-line script, one call (new script each run)",
            fresh,
            "ms",
            1.0,
            "compile-bound",
        )
        wait = await _concurrent_wait(cm, 3 if quick else 5)
        _print(
            f"[{mode}] 100 concurrent runs awaiting a 50 ms tool (one batch per sample)",
            wait,
            "ms",
            1.0,
            "target < 500 ms (worker CPU not summed here)",
        )
    if isinstance(box, _Process):
        box.close()


FRESH = """
import asyncio, sys
from codemodekit import CodeMode, RuntimeOptions, allow_all_tool_calls
async def main():
    runtime = RuntimeOptions(mode=sys.argv[1])
    async with CodeMode(sources=[], policy=allow_all_tool_calls(), runtime=runtime) as cm:
        print((await cm.run("return 1;")).value, flush=True)
asyncio.run(main())
"""


def _fresh_process(mode: str, rounds: int) -> tuple[list[float], list[float]]:
    """Spawn-to-printed-result and spawn-to-exit of a fresh interpreter (ms)."""
    printed, exited = [], []
    for _ in range(rounds):
        start = time.perf_counter()
        child = subprocess.Popen(
            [sys.executable, "-c", FRESH, mode], stdout=subprocess.PIPE, text=True
        )
        assert child.stdout is not None
        line = child.stdout.readline()
        printed.append((time.perf_counter() - start) * 1000)
        child.wait()
        exited.append((time.perf_counter() - start) * 1000)
        assert line.strip() == "1", line
    return printed, exited


def fresh_rows(rounds: int) -> None:
    for mode in ("process", "inline"):
        printed, exited = _fresh_process(mode, rounds)
        print(f"  [{mode}] fresh Python process: CodeMode(...) + run `return 1` ({rounds} runs)")
        print(
            f"      spawn to printed result {_spread(printed)} ms   spawn to exit "
            f"{_spread(exited)} ms   target <= 300 ms; {TS['fresh']}"
        )


# -- the rest of issue 11's table -------------------------------------------------------------
CPU_LOOP = "let x = 0; for (let i = 0; i < 4e6; i++) { x = (x + i * 7) % 1000003; } return x;"


async def _cpu_runs_per_s(workers: int) -> float:
    box = _sandbox("process", RuntimeOptions(max_runs=workers, warm_workers=workers), False)
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


async def _after_cancelled() -> float:
    box = _sandbox("process", RuntimeOptions(), False)
    hostile = [
        "const rev = Array.prototype.reverse; const o = {length: 2**31 - 1}; for (;;) rev.call(o);",
        "while (true) {}",
    ] * 8
    try:
        async with _code_mode(box, compute_time_ms=600_000, wall_time_ms=600_000) as cm:
            await cm.run("return 1;")
            events = [asyncio.Event() for _ in hostile]
            runs = [
                asyncio.ensure_future(cm.run(c, cancel=e))
                for c, e in zip(hostile, events, strict=True)
            ]
            await asyncio.sleep(0.3)
            for event in events:
                event.set()
            await asyncio.gather(*runs)
            start = time.perf_counter()
            result = await cm.run("return 1;")
            assert result.ok
            return (time.perf_counter() - start) * 1000
    finally:
        box.close()


async def _accounting_error() -> tuple[float, float, float]:
    box = _sandbox("process", RuntimeOptions(max_runs=4), False)
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
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


async def _memory_handed_back() -> tuple[float, float, float]:
    box = _sandbox("process", RuntimeOptions(max_runs=48), False)
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


PATHOLOGICAL: dict[str, Callable[[int], str]] = {
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


async def issue11_rows() -> None:
    after = await _after_cancelled()
    row("[process] trivial run after 16 cancelled busy loops", after, "ms", "target <= 50 ms")
    one = await _cpu_runs_per_s(1)
    row("[process] CPU-bound runs/s, 1 worker", one, "runs/s")
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


async def main_async(quick: bool) -> None:
    load = os.getloadavg()
    loop = type(asyncio.get_running_loop()).__module__
    print(
        "tool-call path and runs through CodeMode.run (process = sandbox worker processes, "
        f"the default; inline = this process); event loop {loop}; "
        f"load average {load[0]:.2f} {load[1]:.2f}"
    )
    for mode in ("process", "inline"):
        await issue21_rows(mode, quick)
    fresh_rows(3 if quick else 7)
    if not quick:
        print("execution engine, issue 11's other rows")
        await issue11_rows()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="issue-21 rows, fewer repetitions")
    parser.add_argument(
        "--uvloop", action="store_true", help="run on uvloop (pip install codemodekit[uvloop])"
    )
    options = parser.parse_args()
    if options.uvloop:
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    print("what this machine and the engine cost before our code runs (machine_floors.py)")
    floor_rows()  # before the benchmark's event loop: it runs a loop of its own
    asyncio.run(main_async(options.quick))
