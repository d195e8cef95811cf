"""What this machine and the engine cost before any of our code runs (issue 21's floors).

python -m benchmarks.machine_floors

Four rows, the first three printed by ``bench_engine`` too, the last by ``bench_contained``:

- a socket round trip between two bare processes, with the receiver sleeping in ``recv`` or
  polling (what waking a sleeping process costs here: why a worker polls, ADR 0042);
- the engine's own cost of one awaited tool call (QuickJS and the Python that drives it, as
  in a worker): a worker's engine driven in this process, each call settled at once with no
  crossing, no host and no bridge (an internal measurement, labelled as such);
- the least one awaited call can take in process mode: an asyncio host that does no work of
  its own (it reads a frame and answers it) facing a process that polls and spends the
  engine's per-call CPU before each answer. No host code, validation or policy can make a
  call faster than this on this machine;
- the least a run can cost when each run has a CPython process of its own (issue 19): a
  process prepared as the zygote is (``_warm_up``, both contexts, every query, frozen, one
  thread) forks a process per run, ahead of it, as the pool does; that process waits for a
  byte, evaluates ``1`` through the engine binding, answers and exits. No lockdown, no
  protocol, no server, no run state: the fork, the copy-on-write faults of the least a
  run touches, and the exit. Back to back, a run takes no less wall time than the machine's
  CPU per run divided by its CPUs. Measured in a fresh interpreter of its own (the fork
  needs one thread); an internal measurement.
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

from codemodekit.compiler.compile import CodeCompiler
from codemodekit.compiler.query import compile_next_group
from codemodekit.limits import Limits
from codemodekit.sandbox._engine import Engine
from codemodekit.sandbox._watchdog import CpuOnly
from codemodekit.sandbox._worker import _bare_fork, _prepared_context, _single_threaded, _warm_up
from codemodekit.sandbox._workers import main_thread_stack_cap

POLL_S = 200e-6
"""How long the floor's stand-in worker polls before it sleeps (the product polls 150 µs)."""


def _round_trip_us(receiver_polls: bool, trips: int = 20_000) -> tuple[float, float]:
    """One byte there and back between two bare processes over a Unix socket pair, where
    the scheduler puts them: the wall time of a round trip and the sender's CPU time (µs).
    The sender always sleeps in ``recv``; the receiver sleeps too, or polls."""
    ours, theirs = socket.socketpair()
    child = os.fork()
    if child == 0:
        try:
            ours.close()
            theirs.setblocking(not receiver_polls)
            while True:
                try:
                    data = theirs.recv(1)
                except BlockingIOError:
                    continue
                if data != b"x":
                    break
                theirs.send(b"y")
        finally:
            os._exit(0)
    theirs.close()
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(trips):
        ours.send(b"x")
        ours.recv(1)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    ours.close()
    os.waitpid(child, 0)
    return wall / trips * 1e6, cpu / trips * 1e6


def engine_call_us(calls: int = 3000, rounds: int = 5) -> float:
    """The engine's own CPU per awaited call (median of ``rounds``), in a context prepared as a
    worker's: each step's one call is settled at once in this thread."""
    compiler = CodeCompiler()
    prepared = _warm_up(compiler)
    source = f"for (let i = 0; i < {calls}; i++) {{ await tools.b.anoop({{}}); }}\nreturn 1;"
    program = compiler.compile(source, max_source_bytes=64 * 1024)
    limits = Limits(max_tool_calls=calls + 1, compute_time_ms=600_000)
    samples = []
    for _ in range(rounds):
        engine = Engine(
            limits, stack_cap=main_thread_stack_cap(), prepared=prepared, watchdog=CpuOnly()
        )
        step = engine.start(program)
        started = time.thread_time()
        settled = 0
        while not step.done:
            line = step.call_lines[0]
            step = engine.settle(f"[{line[1 : line.index(',')]},1,{{}}]")
            settled += 1
        samples.append((time.thread_time() - started) / settled * 1e6)
        engine.close()
        prepared = _prepared_context()  # a fresh context per round, as a worker has
    return statistics.median(samples)


def _stand_in_worker(sock: socket.socket, spend_s: float) -> None:
    """Answer each frame after ``spend_s`` of CPU, polling for the next one a while first."""
    sock.setblocking(False)
    while True:
        until = time.perf_counter() + POLL_S
        while True:
            try:
                data = sock.recv(64)
                break
            except BlockingIOError:
                if time.perf_counter() > until:
                    sock.setblocking(True)
                    data = sock.recv(64)
                    sock.setblocking(False)
                    break
        if not data:
            return
        busy_until = time.thread_time() + spend_s
        while time.thread_time() < busy_until:
            pass
        sock.send(data)


async def _host_floor(sock: socket.socket, calls: int) -> tuple[float, float]:
    loop = asyncio.get_running_loop()
    waiting: list[asyncio.Future[bytes]] = []

    def readable() -> None:
        waiting[0].set_result(sock.recv(64))

    sock.setblocking(False)
    loop.add_reader(sock.fileno(), readable)
    try:
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(calls):
            waiting[:] = [loop.create_future()]
            sock.send(b"x")
            await waiting[0]
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    finally:
        loop.remove_reader(sock.fileno())
    return wall / calls * 1e6, cpu / calls * 1e6


def call_floor_us(spend_us: float, calls: int = 3000, rounds: int = 5) -> tuple[float, float]:
    """The median wall time and host CPU (µs) of one call between an asyncio host that does
    nothing but read and answer, and a polling process spending ``spend_us`` per call."""
    ours, theirs = socket.socketpair()
    child = os.fork()
    if child == 0:
        try:
            ours.close()
            _stand_in_worker(theirs, spend_us / 1e6)
        finally:
            os._exit(0)
    theirs.close()
    try:
        samples = [asyncio.run(_host_floor(ours, calls)) for _ in range(rounds)]
    finally:
        ours.close()
        os.waitpid(child, 0)
    return statistics.median(s[0] for s in samples), statistics.median(s[1] for s in samples)


def _machine_busy_s() -> float:
    """Busy time of every CPU since boot (``/proc/stat``), in seconds."""
    with open("/proc/stat", "rb") as stat:
        ticks = [int(v) for v in stat.readline().split()[1:]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def _single_use_runs(runs: int) -> dict[str, float]:
    """In a fresh interpreter: the zygote's preparation, then ``runs`` single-use processes."""
    compiler = CodeCompiler()
    context, _port = _warm_up(compiler)
    _spare = _prepared_context()
    while compile_next_group():
        pass
    _single_threaded()  # stops the binding's idle thread
    if not _single_threaded():
        raise SystemExit("the single-use floor needs a process with one thread")
    gc.collect()
    gc.freeze()

    def fork_one() -> tuple[int, socket.socket]:
        ours, theirs = socket.socketpair()
        pid = _bare_fork()
        if pid == 0:
            try:
                ours.close()
                theirs.recv(1)
                theirs.send(str(context.eval("1")).encode())
            finally:
                os._exit(0)
        theirs.close()
        return pid, ours

    walls = []
    ahead = fork_one()
    busy, times = _machine_busy_s(), os.times()
    for _ in range(runs):
        (pid, sock), started = ahead, time.perf_counter()
        sock.send(b"x")
        if sock.recv(16) != b"1":
            raise SystemExit("a single-use process did not answer")
        walls.append((time.perf_counter() - started) * 1000)
        sock.close()
        os.waitpid(pid, 0)
        ahead = fork_one()
    busy, after = _machine_busy_s() - busy, os.times()
    ahead[1].close()
    os.waitpid(ahead[0], 0)
    return {
        "wall_ms": statistics.median(walls),
        "machine_ms": busy / runs * 1000,
        "parent_ms": (after.user + after.system - times.user - times.system) / runs * 1000,
        "children_ms": (
            after.children_user
            + after.children_system
            - times.children_user
            - times.children_system
        )
        / runs
        * 1000,
    }


def single_use_floor(runs: int = 2000) -> dict[str, float]:
    """The single-use floor (module docstring), measured in a child interpreter: the median
    wall time of a run's exchange, and per run the machine's CPU (every process), the
    forking process's and the single-use processes' (ms)."""
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.machine_floors", "--single-use", str(runs)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    result: dict[str, float] = json.loads(out.splitlines()[-1])
    return result


def single_use_row(runs: int = 2000) -> None:
    floor, cpus = single_use_floor(runs), os.cpu_count() or 1
    print(
        f"  floor: a CPython process per run (fork from a prepared zygote, eval '1' through "
        f"the binding, exit; no lockdown, protocol or server; internal measurement): "
        f"exchange {floor['wall_ms']:.2f} ms wall; per run, machine CPU "
        f"{floor['machine_ms']:.2f} ms (forking process {floor['parent_ms']:.2f}, "
        f"single-use process {floor['children_ms']:.2f}); / {cpus} CPUs = "
        f"{floor['machine_ms'] / cpus:.2f} ms"
    )


def floor_rows() -> None:
    for polls, what in ((False, "the receiver sleeps"), (True, "the receiver polls")):
        wall, cpu = _round_trip_us(polls)
        print(
            f"  machine: socket round trip between two processes, {what}: "
            f"{wall:.1f} us wall, sender CPU {cpu:.1f} us"
        )
    engine_us = engine_call_us()
    print(
        f"  engine: its own CPU per awaited call (a worker's engine driven in this process, "
        f"each call settled at once; internal measurement): {engine_us:.1f} us"
    )
    wall, cpu = call_floor_us(engine_us)
    print(
        f"  floor: one call between an asyncio host that does nothing and a polling process "
        f"spending {engine_us:.1f} us a call: {wall:.1f} us wall, host CPU {cpu:.1f} us"
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["--single-use"]:
        print(json.dumps(_single_use_runs(int(sys.argv[2]))))
    else:
        floor_rows()
        single_use_row()
