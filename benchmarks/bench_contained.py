"""Before and after: the contained runtime against a tree without it, in one command.

python -m benchmarks.bench_contained --base /work/wt/base21           # both trees
python -m benchmarks.bench_contained --base /work/wt/base21 --quick   # fewer samples

Each tree is measured in a child process of its own (``PYTHONPATH=<tree>/src``, this
interpreter), alternating base and this tree for ``--rounds`` rounds so a change of the
machine's load falls on both. Every row goes through ``CodeMode.run`` with the default
runtime (process mode, the shared pool): the median and [min - max] of wall time, of the
server's CPU (``time.process_time``, all its threads), of the sandbox worker's CPU over the
run's requests (as the worker reports it) and of the zygote's CPU (from ``/proc``, divided
by the runs of the sample). Under the back-to-back rows, the machine's CPU per run: the
busy time of every CPU (``/proc/stat``, all processes: server, zygote, workers, kernel) over
as many runs again with nothing else measured, divided by the runs; back to back, a run can
take no less wall time than that divided by the CPUs. Then this tree's lockdown cost per worker (``bench_containment``) and the
machine's floor for a CPython process per run (``machine_floors``). Linux only; asserts
nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent
TICK = os.sysconf("SC_CLK_TCK")

SCRIPT_200 = "\n".join(
    [f"const v{i}: number = {i} * 2 + (typeof tools === 'object' ? 1 : 0);" for i in range(199)]
    + ["return v198;"]
)
BURST = 8
"""Runs back to back after a pause: fewer than the warm set, so none waits for a refill."""
CALLS_30 = "for (let i = 0; i < 30; i++) { await tools.b.anoop({}); }\nreturn 1;"
FRESH = (
    "import asyncio\n"
    "from codemodekit import CodeMode, allow_all_tool_calls, local\n"
    "async def main():\n"
    "    async with CodeMode(sources=[local('b', {})], policy=allow_all_tool_calls()) as cm:\n"
    "        assert (await cm.run('return 1;')).value == 1\n"
    "asyncio.run(main())\n"
)


# -- the child: measures the tree on its PYTHONPATH -------------------------------------------


def _machine_busy_s() -> float:
    """Busy time of every CPU since boot (``/proc/stat``), in seconds."""
    with open("/proc/stat", "rb") as stat:
        ticks = [int(v) for v in stat.readline().split()[1:]]
    return (sum(ticks) - ticks[3] - ticks[4]) / TICK  # all but idle and iowait


def _children_cpu_s() -> float:
    """CPU seconds of this process's live child processes (the zygote)."""
    me, total = str(os.getpid()), 0.0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if fields[1].decode() == me:
            total += (int(fields[11]) + int(fields[12])) / TICK
    return total


async def _child(quick: bool) -> dict[str, Any]:
    import codemodekit
    from codemodekit import CodeMode, ProcessSandbox, allow_all_tool_calls, define_tool, local

    obj = {"type": "object"}

    async def anoop(_args: dict[str, Any]) -> dict[str, Any]:
        return {}

    async def wait50(_args: dict[str, Any]) -> int:
        await asyncio.sleep(0.05)
        return 1

    worker_ms = [0.0]
    box = ProcessSandbox()  # the default runtime's shared pool, what CodeMode(...) uses
    inner_run, inner_source = box.run, box.run_source

    async def run(*args: Any) -> Any:
        outcome = await inner_run(*args)
        worker_ms[0] += outcome.worker_cpu_ms
        return outcome

    async def run_source(*args: Any) -> Any:
        outcome = await inner_source(*args)
        worker_ms[0] += outcome.worker_cpu_ms
        return outcome

    box.run, box.run_source = run, run_source  # type: ignore[method-assign]
    tools = local(
        "b",
        {
            "anoop": define_tool(description="async no-op", input_schema=obj, execute=anoop),
            "wait": define_tool(description="50 ms", input_schema=obj, execute=wait50),
        },
    )
    rows: dict[str, list[list[float]]] = {}
    machine: dict[str, list[float]] = {}
    n = 40 if quick else 120

    async def sample(label: str, codes: list[str], cm: Any) -> None:
        worker_ms[0] = 0.0
        zygote = _children_cpu_s()
        cpu, wall = time.process_time(), time.perf_counter()
        results = await asyncio.gather(*(cm.run(code) for code in codes))
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        zygote = _children_cpu_s() - zygote
        assert all(r.ok for r in results), [r.diagnostic for r in results if not r.ok]
        per = len(codes) if len(codes) > 1 else 1
        rows.setdefault(label, []).append(
            [wall * 1000, cpu * 1000, worker_ms[0] / per, zygote * 1000 / per]
        )

    async def machine_cpu(label: str, code: str, runs: int, gap_s: float, cm: Any) -> None:
        """The machine's busy time over ``runs`` runs of ``code`` with nothing else measured."""
        busy = _machine_busy_s()
        for _ in range(runs):
            if gap_s:
                await asyncio.sleep(gap_s)
            await cm.run(code)
        spent = machine.setdefault(label, [0.0, 0.0])
        spent[0] += _machine_busy_s() - busy
        spent[1] += runs

    async with CodeMode(sources=[tools], policy=allow_all_tool_calls(), sandbox=box) as cm:
        await asyncio.sleep(1.0)  # the warm set
        for code in ("return 1;", CALLS_30, SCRIPT_200):
            await cm.run(code)
        for _ in range(n):
            await sample("trivial run (return 1)", ["return 1;"], cm)
        await machine_cpu("trivial run (return 1)", "return 1;", n, 0.0, cm)
        for _ in range(n // BURST):
            await asyncio.sleep(0.3)  # ready workers again: a burst takes no refill's CPU
            for _ in range(BURST):
                await sample(f"trivial run, back to back in bursts of {BURST}", ["return 1;"], cm)
        for _ in range(n // 2):
            await asyncio.sleep(0.02)  # an agent's pace: the warm set refills in between
            await sample("trivial run, runs 20 ms apart", ["return 1;"], cm)
        for _ in range(n):
            await sample("one call (async tool)", ["await tools.b.anoop({}); return 1;"], cm)
        await machine_cpu("one call (async tool)", "await tools.b.anoop({}); return 1;", n, 0.0, cm)
        for _ in range(n // 2):
            await asyncio.sleep(0.02)
            await sample("one call, runs 20 ms apart", ["await tools.b.anoop({}); return 1;"], cm)
        for _ in range(n // 2):
            await sample("30 sequential calls", [CALLS_30], cm)
        for _ in range(n // 2):
            await sample("200-line script (same each run)", [SCRIPT_200], cm)
        await machine_cpu("200-line script (same each run)", SCRIPT_200, n // 2, 0.0, cm)
        for _ in range(3 if quick else 6):
            await asyncio.sleep(0.5)  # the warm set refills between batches
            await sample(
                "100 concurrent runs, each awaits a 50 ms tool",
                ["await tools.b.wait({}); return 1;"] * 100,
                cm,
            )
    for _ in range(2 if quick else 4):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", FRESH], check=True)
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        # The fresh process and its zygote (reaped by it); not the zygote's workers.
        rows.setdefault("fresh process: CodeMode + return 1", []).append(
            [wall * 1000, cpu * 1000, 0.0, 0.0]
        )
    return {"module": codemodekit.__file__, "rows": rows, "machine": machine}


# -- the parent: runs both trees and prints them side by side ---------------------------------


def _measure(tree: Path, quick: bool) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": f"{tree / 'src'}{os.pathsep}{HERE}"}
    args = [sys.executable, "-m", "benchmarks.bench_contained", "--child"]
    out = subprocess.run(
        [*args, *(["--quick"] if quick else [])],
        env=env,
        cwd=HERE,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    result: dict[str, Any] = json.loads(out.splitlines()[-1])
    if not result["module"].startswith(str(tree)):
        raise SystemExit(f"{tree} measured {result['module']}")
    return result


def _spread(values: list[float]) -> str:
    v = sorted(values)
    return f"{statistics.median(v):7.2f} [{v[0]:.2f}-{v[-1]:.2f}]"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", type=Path, help="a tree to compare with (its src/)")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(_child(args.quick))))
        return
    trees = {"this": HERE}
    if args.base is not None:
        trees = {"base": args.base.resolve(), "this": HERE}
    merged: dict[str, dict[str, list[list[float]]]] = {name: {} for name in trees}
    machine: dict[str, dict[str, list[float]]] = {name: {} for name in trees}
    for _ in range(args.rounds):
        for name, tree in trees.items():
            measured = _measure(tree, args.quick)
            for label, samples in measured["rows"].items():
                merged[name].setdefault(label, []).extend(samples)
            for label, (busy_s, runs) in measured["machine"].items():
                total = machine[name].setdefault(label, [0.0, 0.0])
                total[0] += busy_s
                total[1] += runs
    print(f"contained runtime, before/after; load average {os.getloadavg()}; ms, median [min-max]")
    print(f"  trees: {', '.join(f'{n}={t}' for n, t in trees.items())}")
    for label in merged["this"]:
        print(f"  {label}")
        for name in trees:
            samples = merged[name][label]
            cols = [_spread([s[i] for s in samples]) for i in range(4)]
            print(
                f"    {name:<5} wall {cols[0]}  server CPU {cols[1]}  "
                f"worker CPU {cols[2]}  zygote CPU {cols[3]}"
            )
        cpus = os.cpu_count() or 1
        for name in trees:
            busy_s, runs = machine[name].get(label, [0.0, 0.0])
            if runs:
                per_run = busy_s / runs * 1000
                print(
                    f"    {name:<5} machine CPU per run {per_run:.2f} ms (every process; "
                    f"/ {cpus} CPUs = {per_run / cpus:.2f} ms)"
                )
    print("  (100 concurrent: wall of the batch, CPU per run; fresh: CPU of it and its zygote)")
    from benchmarks import bench_containment

    print("lockdown cost per worker (this tree):")
    bench_containment._lockdown_rows()
    from benchmarks import machine_floors

    print("the machine's floor for one CPython process per run:")
    machine_floors.single_use_row()


if __name__ == "__main__":
    main()
