"""What this machine and the engine cost before any of our code runs (issue 21's floors).

python -m benchmarks.machine_floors

Three rows, each printed by ``bench_engine`` too:

- a socket round trip between two bare processes, with the receiver sleeping in ``recv`` or
  polling (what waking a sleeping process costs here: why a worker polls, ADR 0042);
- the engine's own cost of one awaited tool call (QuickJS and the Python that drives it, as
  in a worker): a worker's engine driven in this process, each call settled at once with no
  crossing, no host and no bridge (an internal measurement, labelled as such);
- the least one awaited call can take in process mode: an asyncio host that does no work of
  its own (it reads a frame and answers it) facing a process that polls and spends the
  engine's per-call CPU before each answer. No host code, validation or policy can make a
  call faster than this on this machine.
"""

from __future__ import annotations

import asyncio
import os
import socket
import statistics
import time

from codemodekit.compiler.compile import CodeCompiler
from codemodekit.limits import Limits
from codemodekit.sandbox._engine import Engine
from codemodekit.sandbox._watchdog import CpuOnly
from codemodekit.sandbox._worker import _prepared_context, _warm_up
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
    floor_rows()
