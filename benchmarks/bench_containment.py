"""What the containment of sandbox worker processes costs per run (ADR 0028).

Run: ``python -m benchmarks.bench_containment``. Linux only. Prints medians; asserts nothing.

Each run gets a process of its own, forked from the zygote and locked down before it takes
the run. Rows: the fork (zygote side, and the new worker's CPU up to its hello), each
lockdown step in a forked child, the filter installed from the exported BPF against built
with libseccomp per worker, and a trivial run through ``CodeMode.run`` with the default
runtime, sequentially and after a burst that drains the warm set.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

from benchmarks._util import amedian_ms, row
from codemodekit import CodeMode, ProcessSandbox, RuntimeOptions, allow_all_tool_calls, local
from codemodekit.compiler.compile import CodeCompiler
from codemodekit.sandbox import _lockdown, _worker
from codemodekit.sandbox.pool import WorkerPool

FORKS = 60


def _child_costs(
    layers: _lockdown.ZygoteLayers,
    pairs: list[tuple[socket.socket, socket.socket]],
    *,
    fork: Callable[[], int] = os.fork,
    libseccomp_per_worker: bool = False,
) -> dict[str, float]:
    """Fork children that lock down like a worker and report each step's CPU (ms). The
    socket pairs are made beforehand (a locked zygote cannot make sockets)."""
    samples: dict[str, list[float]] = {}
    for ours, theirs in pairs:
        started = time.perf_counter()
        pid = fork()
        if pid == 0:
            try:
                marks = [("after fork, in the child", time.process_time())]
                ours.close()
                conn = socket.socket(fileno=_lockdown.keep_only(theirs.fileno()))
                marks.append(("descriptors", time.process_time()))
                if libseccomp_per_worker:
                    _lockdown.zygote_filter().load()  # a comparable libseccomp build + load
                else:
                    _lockdown.lock_down_worker(layers)
                marks.append(("seccomp filter", time.process_time()))
                _lockdown.limit_worker(layers)
                marks.append(("rlimits", time.process_time()))
                steps, last = {}, 0.0
                for name, cpu in marks:
                    steps[name] = (cpu - last) * 1000
                    last = cpu
                steps["worker CPU to ready"] = last * 1000
                conn.sendall(json.dumps(steps).encode())
            finally:
                os._exit(0)
        forked = (time.perf_counter() - started) * 1000
        theirs.close()
        steps = json.loads(ours.recv(4096))
        steps["fork (zygote side, wall)"] = forked
        ours.close()
        os.waitpid(pid, 0)
        for name, value in steps.items():
            samples.setdefault(name, []).append(value)
    return {name: statistics.median(values) for name, values in samples.items()}


def _lockdown_rows() -> None:
    # Run in a child: the zygote's own lockdown is irreversible.
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            compiler = CodeCompiler()
            _worker._warm_up(compiler)
            built = time.perf_counter()
            _lockdown.worker_filter_bpf()
            build_ms = (time.perf_counter() - built) * 1000
            pairs = [socket.socketpair() for _ in range(FORKS)]
            # As the zygote forks: without Python's at-fork work when single-threaded.
            fork = _worker._bare_fork if _worker._single_threaded() else os.fork
            layers = _lockdown.prepare_zygote("not measured")
            gc.collect()
            gc.freeze()
            exported = _child_costs(layers, pairs, fork=fork)
            report = {"build": build_ms, "exported": exported}
            os.write(write_end, json.dumps(report).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    chunks = []
    while chunk := os.read(read_end, 1 << 16):
        chunks.append(chunk)
    os.waitpid(pid, 0)
    report = json.loads(b"".join(chunks))
    row("build the worker filter with libseccomp (once, in the zygote)", report["build"], "ms")
    for name, value in report["exported"].items():
        row(f"per worker: {name}", value, "ms", "median of CPU (wall for the fork)")


def _per_worker_libseccomp() -> None:
    compiler = CodeCompiler()
    _worker._warm_up(compiler)
    layers = _lockdown.ZygoteLayers(
        namespaces="n/a", landlock=0, program=b"", offsets=(), seccomp_error=None, vm_bytes=0
    )
    pairs = [socket.socketpair() for _ in range(FORKS)]
    costs = _child_costs(layers, pairs, libseccomp_per_worker=True)
    row(
        "per worker: a filter built and loaded with libseccomp instead",
        costs["seccomp filter"],
        "ms",
        "why the zygote exports BPF once",
    )


def _spawn_rows() -> None:
    pool = WorkerPool(RuntimeOptions(max_runs=64, warm_workers=1))
    pool.containment()
    one = []
    for _ in range(30):
        started = time.perf_counter()
        worker = pool._greet(*pool._zygote.fork())
        one.append((time.perf_counter() - started) * 1000)
        worker.kill()
    row("spawn one locked-down worker, request to hello", statistics.median(one), "ms", "wall")
    started = time.perf_counter()
    forks = [pool._zygote.fork() for _ in range(16)]
    workers = [pool._greet(*f) for f in forks]
    batch = (time.perf_counter() - started) * 1000 / 16
    for worker in workers:
        worker.kill()
    row("spawn 16 in a batch (how the warm set refills), per worker", batch, "ms", "wall")
    pool.close()


def _machine_busy_s() -> float:
    """CPU seconds the whole machine has been busy (every process and the kernel)."""
    with open("/proc/stat") as stat:
        values = [int(v) for v in stat.readline().split()[1:]]
    return (sum(values) - values[3] - values[4]) / os.sysconf("SC_CLK_TCK")


FORK_FLOOR = """
import gc, json, os, sys
from codemodekit.compiler.compile import CodeCompiler
from codemodekit.sandbox import _worker

def _machine_busy_s():
    with open("/proc/stat") as stat:
        values = [int(v) for v in stat.readline().split()[1:]]
    return (sum(values) - values[3] - values[4]) / os.sysconf("SC_CLK_TCK")

_worker._warm_up(CodeCompiler())
_worker._prepared_context()
fork = _worker._bare_fork if _worker._single_threaded() else os.fork
gc.collect()
gc.freeze()
cycles, busy = 300, _machine_busy_s()
for _ in range(cycles):
    child = fork()
    if child == 0:
        os._exit(0)
    os.waitpid(child, 0)
print(json.dumps((_machine_busy_s() - busy) * 1000 / cycles))
"""
"""In an interpreter of its own that imports what a zygote does, and nothing more."""


def _fork_floor_row() -> None:
    """What a single-use worker costs at the least: a fork of a zygote-sized process (the
    warm-up done) that exits at once, reaped; the machine's CPU per cycle."""
    done = subprocess.run(
        [sys.executable, "-c", FORK_FLOOR], capture_output=True, text=True, check=True
    )
    per = json.loads(done.stdout)
    row("fork + exit of a zygote-sized process, machine CPU", per, "ms", "the floor of a worker")


async def _trivial_rows() -> None:
    box = ProcessSandbox(RuntimeOptions(), shared=False)  # the defaults
    print("containment:", box.containment())
    async with CodeMode(
        sources=[local("app", {})], policy=allow_all_tool_calls(), sandbox=box
    ) as cm:
        await asyncio.sleep(1.0)  # warm workers
        busy, runs = _machine_busy_s(), 330
        trivial = await amedian_ms(lambda: cm.run("return 1;"), repeat=300, warmup=30)
        per = (_machine_busy_s() - busy) * 1000 / runs
        row("[process] trivial run end to end (return 1), sequential", trivial, "ms", "<= 1 ms")
        row(
            "  machine CPU per such run (all processes, /proc/stat)",
            per,
            "ms",
            "over the CPUs: the least a run can take",
        )
    box.close()


def main() -> None:
    print("containment of sandbox worker processes (ADR 0028); medians")
    _lockdown_rows()
    _per_worker_libseccomp()
    _spawn_rows()
    _fork_floor_row()
    asyncio.run(_trivial_rows())


if __name__ == "__main__":
    main()
