"""The server reads a sandbox worker's replies as untrusted: every malformed frame ends
that run with INTERNAL_ERROR and kills the worker; well-formed frames are accepted however
the socket splits them.

The worker here is a script on the other end of a socket pair (the code a compromised
worker could send); the "process" killed is a `sleep` child.
"""

from __future__ import annotations

import array
import asyncio
import fcntl
import socket
import struct
import subprocess
import termios
from collections.abc import AsyncIterator
from typing import Any

import pytest

from codemodekit.errors import ErrorCode
from codemodekit.limits import Limits
from codemodekit.sandbox._step import Step
from codemodekit.sandbox.pool import Worker
from codemodekit.sandbox.process import _ProcessChannel


def frame(kind: bytes, payload: bytes = b"") -> bytes:
    return (len(payload) + 1).to_bytes(4, "big") + kind + payload


def taken(cpu: bytes = b"0.125") -> bytes:
    """The worker's acknowledgement of the start request, with its CPU time (seconds) then."""
    return frame(b"K", cpu)


def calls(cpu: float, *lines: str) -> bytes:
    return frame(b"C", struct.pack(">d", cpu) + "\n".join(lines).encode())


class _Pair:
    def __init__(self) -> None:
        self.ours, self.theirs = socket.socketpair()
        self.ours.setblocking(False)
        self.theirs.setblocking(False)
        self.process = subprocess.Popen(["sleep", "60"])
        self.worker = Worker(self.process.pid, self.ours, 0.0)

    def close(self) -> None:
        self.process.kill()
        self.process.wait()
        self.theirs.close()
        self.ours.close()


@pytest.fixture
async def pair() -> AsyncIterator[_Pair]:
    p = _Pair()
    try:
        yield p
    finally:
        p.close()


def _unread(sock: socket.socket) -> int:
    count = array.array("i", [0])
    fcntl.ioctl(sock.fileno(), termios.FIONREAD, count)
    return count[0]


async def _start(pair: _Pair, *replies: bytes) -> Step:
    return (await _start_channel(pair, *replies))[0]


async def _start_channel(
    pair: _Pair, *replies: bytes, worker: Worker | None = None, limits: Limits | None = None
) -> tuple[Step, _ProcessChannel]:
    """Start a run on ``worker`` (the pair's by default), answer with ``replies`` from the
    worker's end, and return the first step and the channel."""
    loop = asyncio.get_running_loop()
    pool: Any = None  # the pool is used only to replace a worker that died untaken
    channel = _ProcessChannel(pool, worker or pair.worker, b"{}", limits or Limits())
    try:
        started = asyncio.ensure_future(channel.start())
        assert (await loop.sock_recv(pair.theirs, 1 << 16))[4:5] == b"S"
        for reply in replies:
            await loop.sock_sendall(pair.theirs, reply)
            while not started.done() and _unread(pair.ours):  # each piece read on its own
                await asyncio.sleep(0.001)
        return await asyncio.wait_for(started, 30), channel
    finally:
        channel.detach()


HOSTILE: dict[str, bytes] = {
    "empty frame": (0).to_bytes(4, "big"),
    "frame over the bound": (2**31).to_bytes(4, "big") + b"C",
    "unknown kind": frame(b"Z", b"x"),
    "calls step shorter than its CPU time": frame(b"C", b"\x00\x01"),
    "calls step with NaN CPU time": frame(b"C", struct.pack(">d", float("nan"))),
    "calls step with negative CPU time": frame(b"C", struct.pack(">d", -1.0)),
    "calls step that is not UTF-8": frame(b"C", struct.pack(">d", 0.1) + b"\xff\xfe"),
    "step whose header is not JSON": frame(b"P", b"{nope\n\n"),
    "step without its CPU time": frame(b"P", b"{}\n\n"),
}

#: Acknowledgements whose CPU time is not a plain non-negative number of seconds.
HOSTILE_TAKEN = [b"", b"nan", b"inf", b"-1", b"1e400", b"0x10", b"\xff", b"1" * 400, b"2e6"]


@pytest.mark.parametrize("cpu", HOSTILE_TAKEN, ids=[repr(c[:12]) for c in HOSTILE_TAKEN])
async def test_a_malformed_acknowledgement_ends_the_run_and_kills_the_worker(
    pair: _Pair, cpu: bytes
) -> None:
    step = await _start(pair, taken(cpu))
    assert step.done and step.diagnostic is not None
    assert step.diagnostic.code is ErrorCode.INTERNAL_ERROR
    assert pair.worker.killed


async def test_the_run_is_charged_from_the_cpu_time_of_the_acknowledgement(pair: _Pair) -> None:
    # What the worker spent before it took the run (starting, rehearsing) is not the run's.
    step, channel = await _start_channel(pair, taken(b"3.5"), calls(3.75, '[1,"a","b",{}]'))
    assert step.call_lines == ['[1,"a","b",{}]']
    assert channel.worker_cpu_s == pytest.approx(0.25)


@pytest.mark.parametrize("reply", list(HOSTILE.values()), ids=list(HOSTILE))
async def test_a_malformed_reply_ends_the_run_and_kills_the_worker(
    pair: _Pair, reply: bytes
) -> None:
    step = await _start(pair, taken(), reply)
    assert step.done and step.diagnostic is not None
    assert step.diagnostic.code is ErrorCode.INTERNAL_ERROR
    assert pair.worker.killed
    assert pair.process.wait(timeout=30) != 0  # SIGKILL


async def test_a_step_before_the_acknowledgement_is_a_fault(pair: _Pair) -> None:
    step = await _start(pair, calls(0.1, '[1,"a","b",{}]'))
    assert step.diagnostic is not None and step.diagnostic.code is ErrorCode.INTERNAL_ERROR
    assert pair.worker.killed


SPLITS: dict[str, Any] = {
    "one read": lambda data: [data],
    "byte by byte": lambda data: [data[i : i + 1] for i in range(len(data))],
    "across the header": lambda data: [data[:2], data[2:7], data[7:]],
}


@pytest.mark.parametrize("split", list(SPLITS.values()), ids=list(SPLITS))
async def test_a_calls_step_is_read_however_the_socket_splits_it(pair: _Pair, split: Any) -> None:
    data = taken() + calls(0.25, '[1,"a","b",{"x":"\u2028é"}]', '[2,"a","c",{}]')
    step = await _start(pair, *split(data))
    assert not step.done and step.diagnostic is None
    assert step.call_lines == ['[1,"a","b",{"x":"\u2028é"}]', '[2,"a","c",{}]']
    assert pair.worker.cpu_s == 0.25 and not pair.worker.killed


async def test_a_worker_gone_from_proc_mid_slice_crashed_rather_than_ran_out_of_compute(
    pair: _Pair,
) -> None:
    # The CPU backstop reads /proc/PID/stat when the slice's budget is up; a worker that is
    # no longer there (its exit seen before its socket's close) ended its run by crashing.
    gone = subprocess.Popen(["true"])
    gone.wait()
    worker = Worker(gone.pid, pair.ours, 0.0)
    # It took the run, then nothing more: the budget's check comes ≈2.3 s on.
    step, _channel = await _start_channel(
        pair, taken(), worker=worker, limits=Limits(compute_time_ms=1)
    )
    assert step.done and step.diagnostic is not None
    assert step.diagnostic.code is ErrorCode.SANDBOX_CRASHED
    assert worker.killed
