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
import json
import signal
import socket
import struct
import subprocess
import termios
from collections.abc import AsyncIterator, Awaitable
from typing import Any

import pytest

from codemodekit.errors import ErrorCode
from codemodekit.limits import Limits
from codemodekit.runtime import RuntimeOptions
from codemodekit.sandbox._step import Step
from codemodekit.sandbox.pool import WORKER_OVERHEAD_BYTES, Worker, WorkerPool
from codemodekit.sandbox.process import _ProcessChannel

HANG_GUARD_S = 60
"""Longest wait for a killed child to be reaped (a hang guard, not a timing assertion)."""


def frame(kind: bytes, payload: bytes = b"") -> bytes:
    return (len(payload) + 1).to_bytes(4, "big") + kind + payload


def started(cpu: float, *lines: str, taken: Any = 0.125) -> bytes:
    """The answer to a start request: a step queuing ``lines`` with the worker's CPU time
    (seconds) now and when it read the request (``taken``; the header's ``a``)."""
    header = json.dumps({"u": cpu, "a": taken}) if taken is not None else json.dumps({"u": cpu})
    return frame(b"P", "\n".join([header, "", *lines]).encode())


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


CALL = '[1,"a","b",{}]'


class _Pool:
    """What a channel asks its pool here: whether the server has a CPU to spare (then it
    asks the worker to poll for its answers: ``W`` rather than ``T``). A worker that dies
    untaken is replaced only by a real pool."""

    def __init__(self, spare: bool = False) -> None:
        self.spare = spare

    def cpu_to_spare(self) -> bool:
        return self.spare


_NO_POOL: Any = _Pool()


async def _exchange(pair: _Pair, request: Awaitable[Step], replies: tuple[bytes, ...]) -> Step:
    """Make ``request`` and answer it with ``replies`` from the worker's end, each piece
    read by the server on its own."""
    loop = asyncio.get_running_loop()
    answered = asyncio.ensure_future(request)
    assert (await loop.sock_recv(pair.theirs, 1 << 16))[4:5] in (b"S", b"T", b"W")
    for reply in replies:
        await loop.sock_sendall(pair.theirs, reply)
        while not answered.done() and _unread(pair.ours):
            await asyncio.sleep(0.001)
    return await asyncio.wait_for(answered, 30)


async def _start_channel(
    pair: _Pair,
    *replies: bytes,
    worker: Worker | None = None,
    limits: Limits | None = None,
    pool: _Pool | None = None,
) -> tuple[Step, _ProcessChannel]:
    """Start a run on ``worker`` (the pair's by default), answer with ``replies``, and
    return the first step and the channel (still watching the socket: detach it)."""
    served_by: Any = pool or _Pool()  # what a channel asks of its pool
    channel = _ProcessChannel(served_by, worker or pair.worker, {}, limits or Limits())
    try:
        return await _exchange(pair, channel.start(), replies), channel
    except BaseException:
        channel.detach()
        raise


async def _start(pair: _Pair, *replies: bytes) -> Step:
    step, channel = await _start_channel(pair, *replies)
    channel.detach()
    return step


async def _settle(pair: _Pair, *replies: bytes) -> Step:
    """The step answering a settle request with ``replies``, after a well-formed start."""
    step, channel = await _start_channel(pair, started(0.125, CALL))
    try:
        assert step.call_lines == [CALL]
        return await _exchange(pair, channel.settle("[1,1,1]"), replies)
    finally:
        channel.detach()


@pytest.mark.parametrize("spare", [False, True], ids=["busy server", "a CPU to spare"])
async def test_the_worker_is_asked_to_poll_only_when_the_server_has_a_cpu_to_spare(
    pair: _Pair, spare: bool
) -> None:
    loop = asyncio.get_running_loop()
    pool: Any = _Pool(spare)
    channel = _ProcessChannel(pool, pair.worker, {"source": "x"}, Limits())
    try:
        starting = asyncio.ensure_future(channel.start())
        start = await loop.sock_recv(pair.theirs, 1 << 16)
        await loop.sock_sendall(pair.theirs, started(0.125, CALL))
        assert (await asyncio.wait_for(starting, 30)).call_lines == [CALL]
        answered = asyncio.ensure_future(channel.settle("[1,1,1]"))
        request = await loop.sock_recv(pair.theirs, 1 << 16)
        await loop.sock_sendall(pair.theirs, calls(0.25, '[2,"a","b",{}]'))
        assert (await asyncio.wait_for(answered, 30)).call_lines == ['[2,"a","b",{}]']
    finally:
        channel.detach()
    assert start[4:5] == b"S" and json.loads(start[5:]) == {"source": "x", "spin": spare}
    assert request[4:] == (b"W" if spare else b"T") + b"[1,1,1]"


@pytest.mark.parametrize("spare", [False, True], ids=["busy server", "a CPU to spare"])
async def test_a_run_coming_is_told_to_the_worker_it_will_be_handed(
    spare: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ADR 0043: the next idle worker a run takes is told ``N`` when the run starts, so it
    polls for the request rather than sleep; only when the server has a CPU to spare."""
    pairs = [_Pair(), _Pair()]
    pool = WorkerPool(RuntimeOptions())  # never started: no zygote, the pairs are its workers
    monkeypatch.setattr(pool, "cpu_to_spare", lambda: spare)
    try:
        for p in pairs:
            pool._park(p.worker)
        pool.expect_run()
        told = [_unread(p.theirs) for p in pairs]
        taken = await pool._take_worker()
        assert taken is pairs[0].worker
        if spare:
            assert told == [5, 0] and pairs[0].theirs.recv(16) == frame(b"N")
        else:
            assert told == [0, 0]
    finally:
        for p in pairs:
            p.close()


async def test_a_run_is_announced_with_its_settings_and_rehearsals_carry_the_latest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ADR 0046: the ``N`` of a run carries its settings, and so does every ``R`` sent from
    then on (idle workers make the engine of a run like the latest ahead of it)."""
    pairs = [_Pair(), _Pair(), _Pair()]
    pool = WorkerPool(RuntimeOptions())  # never started: no zygote, the pairs are its workers
    monkeypatch.setattr(pool, "cpu_to_spare", lambda: True)
    first, latest = b'{"limits":{"log_entries":2},"stream":false}', b'{"limits":{},"stream":true}'
    try:
        for p in pairs:
            pool._park(p.worker)
        pool.expect_run(first)
        pool.expect_run(latest)
        pool._last_active = 0.0  # long ago: a quiet moment
        pool._at_quiet_moment()
        told = [p.theirs.recv(1 << 16) for p in pairs[:2]]
        assert told[0] == frame(b"N", first) + frame(b"N", latest) + frame(b"R", latest)
        assert told[1] == frame(b"R", latest)  # two rehearse per quiet moment
        assert _unread(pairs[2].theirs) == 0
    finally:
        for p in pairs:
            p.close()


async def test_a_worker_whose_run_ended_is_killed_once_its_caller_has_the_result() -> None:
    """A run's result is handed over before its worker is killed: the kill (a signal to a
    process that is exiting anyway) waits for the loop's next turn. Nothing is left alive:
    the kill comes then, or at once outside a loop, or with the pool's ``close``."""
    pool = WorkerPool(RuntimeOptions())  # never started: no zygote, the pairs are its workers
    pairs = [_Pair(), _Pair(), _Pair(), _Pair()]
    try:
        for p in pairs:
            pool._park(p.worker)
        taken = []
        for _ in pairs:  # what ``acquire`` does, without starting the pool
            await pool._admission.admit(None, WORKER_OVERHEAD_BYTES)
            taken.append(await pool._take_worker())
        pool.release(taken[0], 0, reusable=True)
        await asyncio.sleep(0)  # the loop's next turn
        assert pairs[0].process.wait(timeout=HANG_GUARD_S) == -signal.SIGKILL
        # Stopped under its run: killed at once, counted as a restart.
        pool.release(taken[1], 0, reusable=False)
        assert pairs[1].process.wait(timeout=HANG_GUARD_S) == -signal.SIGKILL
        assert pool.stats().worker_restarts == 1
        # Released where no loop runs.
        await asyncio.to_thread(pool.release, taken[2], 0, reusable=True)
        assert pairs[2].process.wait(timeout=HANG_GUARD_S) == -signal.SIGKILL
        # Released and the pool closed in the same turn.
        pool.release(taken[3], 0, reusable=True)
        pool.close()
        assert pairs[3].process.wait(timeout=HANG_GUARD_S) == -signal.SIGKILL
        assert pool.stats().worker_restarts == 1
        await asyncio.sleep(0)  # the turn's kill finds nothing left
    finally:
        for p in pairs:
            p.close()


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
    # Headers that are JSON but not the object a step's header is, or hold values no
    # float or int can be.
    "step whose header is a list": frame(b"P", b"[1]\n\n"),
    "step whose header is a string": frame(b"P", b'"u"\n\n'),
    "step whose header is a number": frame(b"P", b"1\n\n"),
    "step whose header is null": frame(b"P", b"null\n\n"),
    "step with a CPU time beyond a float": frame(b"P", b'{"u": 1' + b"0" * 400 + b"}\n\n"),
    "step with an infinite resident size": frame(b"P", b'{"u": 0.2, "r": 1e400}\n\n'),
    "step with an infinite compute time": frame(b"P", b'{"u": 0.2, "m": 1' + b"0" * 400 + b"}\n\n"),
    "step whose diagnostic is a number": frame(b"P", b'{"u": 0.2, "d": true, "g": 5}\n\n'),
    "step whose log entry is a number": frame(b"P", b'{"u": 0.2, "l": [5]}\n\n'),
    "step whose logs are a number": frame(b"P", b'{"u": 0.2, "l": 5}\n\n'),
}

#: Start answers whose time the run was taken is not a plain number of seconds from 0 up
#: to the step's own CPU time (1.0 here), or missing.
HOSTILE_TAKEN: dict[str, Any] = {
    "missing": None,
    "a string": "0.1",
    "a list": [0.1],
    "negative": -1.0,
    "after the step": 1.5,
    "huge": 1e400,
    "NaN": float("nan"),
}


@pytest.mark.parametrize("taken", list(HOSTILE_TAKEN.values()), ids=list(HOSTILE_TAKEN))
async def test_a_start_answer_without_a_valid_take_time_ends_the_run_and_kills_the_worker(
    pair: _Pair, taken: Any
) -> None:
    step = await _start(pair, started(1.0, CALL, taken=taken))
    assert step.done and step.diagnostic is not None
    assert step.diagnostic.code is ErrorCode.INTERNAL_ERROR
    assert pair.worker.killed


async def test_the_run_is_charged_from_the_cpu_time_it_was_taken_at(pair: _Pair) -> None:
    # What the worker spent before it read the request (starting, rehearsing) is not the run's.
    step, channel = await _start_channel(pair, started(3.75, CALL, taken=3.5))
    channel.detach()
    assert step.call_lines == [CALL]
    assert channel.worker_cpu_s == pytest.approx(0.25)


@pytest.mark.parametrize("reply", list(HOSTILE.values()), ids=list(HOSTILE))
async def test_a_malformed_reply_ends_the_run_and_kills_the_worker(
    pair: _Pair, reply: bytes
) -> None:
    step = await _settle(pair, reply)
    assert step.done and step.diagnostic is not None
    assert step.diagnostic.code is ErrorCode.INTERNAL_ERROR
    assert pair.worker.killed
    assert pair.process.wait(timeout=30) != 0  # SIGKILL


async def test_a_calls_only_step_cannot_answer_a_start(pair: _Pair) -> None:
    step = await _start(pair, calls(0.1, CALL))
    assert step.diagnostic is not None and step.diagnostic.code is ErrorCode.INTERNAL_ERROR
    assert pair.worker.killed


async def test_a_worker_that_read_the_start_and_closed_fails_its_run(pair: _Pair) -> None:
    # It read the request (nothing unread: the connection closes, not resets): the run was
    # its own, so it ends as a crash rather than moving to another worker.
    loop = asyncio.get_running_loop()
    channel = _ProcessChannel(_NO_POOL, pair.worker, {}, Limits())
    try:
        answered = asyncio.ensure_future(channel.start())
        assert (await loop.sock_recv(pair.theirs, 1 << 16))[4:5] == b"S"
        pair.theirs.close()
        step = await asyncio.wait_for(answered, 30)
    finally:
        channel.detach()
    assert step.done and step.diagnostic is not None
    assert step.diagnostic.code is ErrorCode.SANDBOX_CRASHED


SPLITS: dict[str, Any] = {
    "one read": lambda data: [data],
    "byte by byte": lambda data: [data[i : i + 1] for i in range(len(data))],
    "across the header": lambda data: [data[:2], data[2:7], data[7:]],
}


@pytest.mark.parametrize("split", list(SPLITS.values()), ids=list(SPLITS))
async def test_a_step_is_read_however_the_socket_splits_it(pair: _Pair, split: Any) -> None:
    lines = ['[2,"a","b",{"x":"\u2028é"}]', '[3,"a","c",{}]']
    step, channel = await _start_channel(pair, *split(started(0.125, *lines)))
    try:
        assert step.call_lines == lines and not step.done
        step = await _exchange(pair, channel.settle("[2,1,1]"), tuple(split(calls(0.25, *lines))))
    finally:
        channel.detach()
    assert not step.done and step.diagnostic is None
    assert step.call_lines == lines
    assert pair.worker.cpu_s == 0.25 and not pair.worker.killed


async def test_a_worker_gone_from_proc_mid_slice_crashed_rather_than_ran_out_of_compute(
    pair: _Pair,
) -> None:
    # The CPU backstop reads /proc/PID/stat when the slice's budget is up; a worker that is
    # no longer there (its exit seen before its socket's close) ended its run by crashing.
    gone = subprocess.Popen(["true"])
    gone.wait()
    worker = Worker(gone.pid, pair.ours, 0.0)
    # It read the request, then nothing more: the budget's check comes ≈2.3 s on.
    step, _channel = await _start_channel(pair, worker=worker, limits=Limits(compute_time_ms=1))
    assert step.done and step.diagnostic is not None
    assert step.diagnostic.code is ErrorCode.SANDBOX_CRASHED
    assert worker.killed


async def test_a_last_step_sent_as_the_cpu_check_comes_due_is_the_runs_outcome(
    pair: _Pair,
) -> None:
    # On a loaded machine the loop can wake late, with the CPU backstop's check due in the
    # same turn as something else, during which the worker sends its last step and exits.
    # The check then runs before the reader: what the worker said must win over "gone
    # from /proc" (or over a CPU time past the allowance, for the same reason).
    loop = asyncio.get_running_loop()
    step, channel = await _start_channel(
        pair, started(0.125, CALL), limits=Limits(compute_time_ms=1)
    )
    try:
        assert step.call_lines == [CALL]
        settled = asyncio.ensure_future(channel.settle("[1,1,1]"))
        assert (await loop.sock_recv(pair.theirs, 1 << 16))[4:5] in (b"T", b"W")
        check = channel._timer
        assert check is not None
        due = check.when()

        def busy_until_due() -> None:  # the loop busy elsewhere until the check is due
            while loop.time() <= due:
                pass

        def worker_finishes() -> None:  # in the check's own turn, just before it
            pair.theirs.sendall(frame(b"P", b'{"u": 0.2, "d": true, "o": true}\n7'))
            pair.process.kill()
            pair.process.wait()

        loop.call_at(due - 0.02, busy_until_due)
        loop.call_at(due - 1e-6, worker_finishes)
        step = await asyncio.wait_for(settled, HANG_GUARD_S)
    finally:
        channel.detach()
    assert step.done and step.diagnostic is None, step.diagnostic
    assert step.ok and step.value_json == "7"
