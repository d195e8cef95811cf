"""``ProcessSandbox``: runs each program in a sandbox worker process the server can stop.

Every limit holds from outside the engine. A run's compute is its worker's own CPU time;
QuickJS's time limit ends ordinary code in the worker, and when a slice runs past its
budget anyway (a native that never polls the limit, such as ``reverse`` on an object of
length 2³¹) the server reads the worker's CPU time and kills it. Cancellation and the wall
limit kill a worker whose slice is running; a worker that is only awaiting tools is told to
drop the run (it exits, and the pool kills it). A worker that dies on its own fails only its
run, with ``SANDBOX_CRASHED``. Every worker hosts one run (``pool.py``, ADR 0028).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import json
import logging
import time
from collections.abc import Coroutine
from typing import Any

from codemodekit.errors import Diagnostic, ErrorCode, new_correlation_id
from codemodekit.limits import Limits
from codemodekit.runtime import DEFAULT_RUNTIME, RuntimeOptions
from codemodekit.sandbox._drive import drive, streams_logs
from codemodekit.sandbox._engine import compute_limit, internal_failure
from codemodekit.sandbox._protocol import (
    MAX_FRAME_BYTES,
    ProtocolFault,
    decode_calls_step,
    decode_step,
    frame,
)
from codemodekit.sandbox._resume import ResumingFuture
from codemodekit.sandbox._step import Step
from codemodekit.sandbox.base import (
    CompiledProgram,
    RuntimeStats,
    SandboxHost,
    SandboxOutcome,
)
from codemodekit.sandbox.pool import (
    PoolBusy,
    Worker,
    WorkerPool,
    process_cpu_s,
    shared_pool,
)
from codemodekit.sandbox.zygote import PoolFailure

log = logging.getLogger("codemodekit.sandbox")

KILL_GRACE_S = 0.25
"""CPU time past a slice's budget before the server kills its worker (QuickJS's own limit
and the worker's watchdog end nearly every overrun before that)."""
COMPILE_ALLOWANCE_S = 2.0
"""CPU time a start request may spend compiling before the run's compute budget applies."""
RECHECK_S = 0.02
"""How soon a slice that is not yet over its CPU budget is checked again."""
RECEIVE_BYTES = 64 * 1024
"""Each run's receive buffer, reused for every reply (a reply may take several reads)."""


class _WorkerLost(Exception):
    def __init__(self, diagnostic: Diagnostic) -> None:
        super().__init__(diagnostic.message)
        self.diagnostic = diagnostic


class _NeverTaken(Exception):
    """The worker died before it read the start request: the run may go to another."""


START_ATTEMPTS = 3
"""Workers a run's start request is offered to when each dies before taking it."""


class ProcessSandbox:
    """The ``CodeSandbox`` over the shared pool of sandbox worker processes."""

    def __init__(self, options: RuntimeOptions = DEFAULT_RUNTIME, *, shared: bool = True) -> None:
        """``shared=True`` uses the process-wide pool for ``options`` (what ``CodeMode``
        does); ``shared=False`` gives this sandbox a pool of its own, stopped by ``close``."""
        self.options = options
        self._shared = shared
        self._pool = shared_pool(options) if shared else WorkerPool(options)

    def start(self) -> None:
        """Start the zygote and warm workers now rather than at the first run."""
        self._pool.start()

    def stats(self) -> RuntimeStats:
        return self._pool.stats()

    def expect_run(self, limits: Limits, stream: bool = False) -> None:
        """A run with these limits has started (``stream``: its console entries are
        followed): the worker it will be handed may start waking (ADR 0043) and make the
        run's engine (ADR 0046)."""
        self._pool.expect_run(_announcement(limits, stream))

    def containment(self) -> dict[str, str]:
        """Start the zygote now (blocking) and say which containment layers its workers
        run under: each ``on`` or ``off (why)``. Raises ``PoolFailure`` naming the missing
        layer and the opt-out when a mandatory one cannot be applied (ADR 0028)."""
        return self._pool.containment()

    def busy_pids(self) -> list[int]:
        """Process ids of the workers hosting runs now (for operators and tests)."""
        return self._pool.busy_pids()

    def close(self) -> None:
        """Stop a pool of its own; the shared pool outlives any one ``CodeMode`` and is
        stopped when the interpreter exits."""
        if not self._shared:
            self._pool.close()

    async def run(
        self, program: CompiledProgram, host: SandboxHost, limits: Limits
    ) -> SandboxOutcome:
        request = {"program": [program.javascript, program.line_offset, program.source]}
        return await self._run(request, host, limits)

    async def run_source(self, source: str, host: SandboxHost, limits: Limits) -> SandboxOutcome:
        """Compile (in the worker, bounded like the run) and run TypeScript ``source``; a
        source compiled before runs its cached program (ADR 0028, the compile cache)."""
        cached = self._pool.programs.get(source)
        if cached is not None and (
            len(source.encode("utf-8", "surrogatepass")) <= limits.source_bytes
        ):
            return await self._run({"program": [*cached, source]}, host, limits)
        return await self._run({"source": source, "share": True}, host, limits)

    async def _run(
        self, request: dict[str, Any], host: SandboxHost, limits: Limits
    ) -> SandboxOutcome:
        queued = time.perf_counter()
        caller = getattr(host, "caller", None)  # whose share of the pool this run takes
        try:
            worker = await self._pool.acquire(limits.memory_bytes, caller)
        except PoolBusy as busy:
            return SandboxOutcome(
                ok=False,
                diagnostic=Diagnostic(ErrorCode.SERVER_BUSY, str(busy)),
                queue_ms=(time.perf_counter() - queued) * 1000,
            )
        except PoolFailure as failure:
            return SandboxOutcome(ok=False, diagnostic=internal_failure(str(failure)))
        queue_ms = (time.perf_counter() - queued) * 1000
        request["limits"] = limits.to_json()
        if streams_logs(host):
            request["stream"] = True
        channel: _ProcessChannel | None = None
        try:
            channel = _ProcessChannel(
                self._pool,
                worker,
                request,
                limits,
                sharing=request.get("share") is True,
            )
            outcome = await drive(channel, host, limits)
            if channel.compiled is not None:
                self._pool.programs.put(request["source"], channel.compiled)
        finally:
            reusable = channel is not None and channel.reusable
            if channel is not None:
                channel.detach()
                worker = channel.worker
            self._pool.release(worker, limits.memory_bytes, reusable=reusable, caller=caller)
        worker_cpu_ms = channel.worker_cpu_s * 1000 if channel is not None else 0.0
        return dataclasses.replace(outcome, queue_ms=queue_ms, worker_cpu_ms=worker_cpu_ms)


@functools.lru_cache(maxsize=16)  # a ``CodeMode`` has one set of limits
def _announcement(limits: Limits, stream: bool) -> bytes:
    """A run's settings as announced to workers: its limits as the start request carries
    them, and whether its logs stream (ADR 0046)."""
    return json.dumps({"limits": limits.to_json(), "stream": stream}).encode()


def _shared_program(payload: bytes) -> tuple[str, int] | None:
    try:
        javascript, line_offset = json.loads(payload)
    except ValueError:
        return None
    if not isinstance(javascript, str) or type(line_offset) is not int:
        return None
    return javascript, line_offset


def _lost(why: str, *, worker: Worker) -> Diagnostic:
    correlation_id = new_correlation_id()
    log.error("sandbox worker %s lost (correlation %s): %s", worker.pid, correlation_id, why)
    return Diagnostic(
        ErrorCode.SANDBOX_CRASHED,
        "the sandbox process running this code stopped unexpectedly "
        f"(correlation id {correlation_id}); other runs are not affected",
        correlation_id=correlation_id,
    )


class _ProcessChannel:
    """One run's requests to its worker; the worker's socket is watched by this loop."""

    def __init__(
        self,
        pool: WorkerPool,
        worker: Worker,
        start_request: dict[str, Any],
        limits: Limits,
        *,
        sharing: bool = False,
    ) -> None:
        self._pool = pool
        self._worker = worker
        self._start_request = start_request
        self._limits = limits
        self._budget_s = limits.compute_time_ms / 1000
        self._loop = asyncio.get_running_loop()
        self._buffer = bytearray()
        self._received = bytearray(RECEIVE_BYTES)
        self._pending: ResumingFuture[tuple[bytes, bytes]] | None = None
        self._used_s = 0.0
        self.worker_cpu_s = 0.0
        """The worker's CPU time over this run's requests, as it reported it."""
        self._timer: asyncio.TimerHandle | None = None
        self._allowed_s = 0.0
        self._base_s = 0.0
        self.reusable = True
        self._in_slice = False
        """A request was sent and its reply has not arrived: the worker is running JS."""
        self._taken = False
        """The worker read the start request: it owns the run now (its death is the run's).
        Known from its first frame after the request; a worker that dies before reading
        it resets the connection instead of closing it (``_protocol.py``)."""
        self._sharing = sharing
        self.compiled: tuple[str, int] | None = None
        """The program the worker compiled from the run's source, sent before any model
        code ran there (``J``, only when asked, only before the start step)."""
        self._fd = worker.sock.fileno()
        self._loop.add_reader(self._fd, self._on_readable)

    def _start_payload(self) -> bytes:
        """The start request, asking the worker to poll for the answers to its first calls
        when the server has a CPU to spare now (ADR 0042)."""
        return json.dumps({**self._start_request, "spin": self._pool.cpu_to_spare()}).encode()

    @property
    def worker(self) -> Worker:
        return self._worker

    # -- requests ---------------------------------------------------------------------------
    async def start(self) -> Step:
        for _ in range(START_ATTEMPTS - 1):
            try:
                return await self._request(b"S", self._start_payload(), COMPILE_ALLOWANCE_S)
            except _NeverTaken:
                # Killed while idle, after its last check: no part of the run happened there.
                log.info("sandbox worker %s died before taking a run", self._worker.pid)
                self.detach()
                try:
                    self._worker = await self._pool.replace(self._worker)
                except PoolFailure as failure:  # closed meanwhile, or no worker starts
                    self.reusable = False
                    return self._end(internal_failure(str(failure)))
                self._buffer.clear()
                self.reusable = True
                self._fd = self._worker.sock.fileno()
                self._loop.add_reader(self._fd, self._on_readable)
        try:
            return await self._request(b"S", self._start_payload(), COMPILE_ALLOWANCE_S)
        except _NeverTaken:
            self.reusable = False
            return self._end(
                _lost("sandbox workers died before taking the run", worker=self._worker)
            )

    def settle(self, batch: str) -> Coroutine[Any, Any, Step]:
        # The request's coroutine itself (one coroutine per call, not two).
        # ``W``: settle, then poll for the answer to the next calls (ADR 0042).
        kind = b"W" if self._pool.cpu_to_spare() else b"T"
        return self._request(kind, batch.encode("utf-8", "surrogatepass"))

    async def abandon(self, diagnostic: Diagnostic) -> Step:
        return await self._request(b"A", json.dumps(diagnostic.to_json()).encode())

    async def _request(self, kind: bytes, payload: bytes, allowance_s: float = 0.0) -> Step:
        worker = self._worker
        starting = kind == b"S"
        try:
            if worker.dead:
                if not self._taken:
                    raise _NeverTaken
                raise _WorkerLost(
                    _lost("the worker died while the run awaited tools", worker=worker)
                )
            future: ResumingFuture[tuple[bytes, bytes]] = ResumingFuture(loop=self._loop)
            self._pending = future
            data = frame(kind, payload)
            self._in_slice = True
            try:
                sent = worker.sock.send(data)
                if sent < len(data):
                    await self._loop.sock_sendall(worker.sock, data[sent:])
            except OSError:
                if not self._taken:
                    raise _NeverTaken from None
                raise _WorkerLost(_lost("the worker's socket closed", worker=worker)) from None
            self._base_s = worker.cpu_s
            left_s = self._budget_s - self._used_s
            self._allowed_s = (left_s if left_s > 0.0 else 0.0) + allowance_s + KILL_GRACE_S
            # One timer serves the run's requests while it fires early enough (the budget left
            # shrinks no faster than the clock moves, so it mostly does); when it fires it
            # checks the request pending then and re-arms.
            deadline = self._loop.time() + self._allowed_s
            timer = self._timer
            if timer is None or timer.when() > deadline:
                if timer is not None:
                    timer.cancel()
                self._timer = self._loop.call_at(deadline, self._check_cpu)
            try:
                kind, reply = await future
            finally:
                self._pending = None
            if kind == b"C":
                step, cpu_s = decode_calls_step(reply)
                rss, taken_s = 0, None
            else:
                step, cpu_s, rss, taken_s = decode_step(reply)
            if starting:
                # The answer to a start request says when the worker took the run.
                if taken_s is None or not 0.0 <= taken_s <= cpu_s < 1e6:
                    raise ProtocolFault("a start's answer without a valid time it was taken")
                self._base_s = taken_s
        except ProtocolFault as fault:
            self._fail_worker()
            return self._end(internal_failure(f"worker {worker.pid}: {fault}"))
        except _WorkerLost as lost:
            self.reusable = False
            return self._end(lost.diagnostic)
        spent = cpu_s - self._base_s
        if spent > 0.0:
            self.worker_cpu_s += spent
            if step.compile_ms:
                spent = max(spent - step.compile_ms / 1000, 0.0)
            self._used_s += spent
        worker.cpu_s = cpu_s
        if step.done:
            worker.runs += 1
            worker.rss = rss
        return step

    def _end(self, diagnostic: Diagnostic) -> Step:
        return Step(done=True, diagnostic=diagnostic)

    # -- the CPU backstop ---------------------------------------------------------------------
    def _check_cpu(self) -> None:
        self._timer = None
        worker, pending = self._worker, self._pending
        if pending is None or pending.done() or worker.dead:
            return  # the next request arms a new timer
        # What the worker said first: its last step, or its socket's end, may be waiting
        # unread in this very turn while its process has exited or its CPU time has
        # passed the allowance since (this timer ran before the reader).
        if self._drain(pending):
            return
        cpu = process_cpu_s(worker.pid)
        if cpu is None:
            # Gone from /proc: whatever it wrote, and its socket's end, can be read now.
            if self._drain(pending):
                return
            # Nothing: it crashed (or was killed from outside) mid-slice, and another
            # process holds its socket; that is not its run's compute.
            self._fail_worker()
            pending.set_exception(_WorkerLost(_lost("the worker process vanished", worker=worker)))
            return
        used = cpu - self._base_s
        if used < self._allowed_s:
            self._timer = self._loop.call_later(
                max(self._allowed_s - used, RECHECK_S), self._check_cpu
            )
            return
        log.info("sandbox worker %s ran past its compute budget: killed", worker.pid)
        self._fail_worker()
        pending.set_exception(_WorkerLost(compute_limit(self._limits)))

    # -- the worker's socket ------------------------------------------------------------------
    def _drain(self, pending: ResumingFuture[tuple[bytes, bytes]]) -> bool:
        """Read what the worker has written, now; whether ``pending`` has its answer (or
        the worker is gone) after it."""
        while not pending.done() and not self._worker.dead and self._on_readable():
            pass
        return pending.done() or self._worker.dead

    def _on_readable(self) -> bool:
        """Read once from the worker's socket; whether anything was read."""
        worker = self._worker
        received = self._received
        try:
            size = worker.sock.recv_into(received)
        except (BlockingIOError, InterruptedError):
            return False
        except ConnectionResetError:
            self._on_closed(unread=True)  # it died with a request unread
            return False
        except OSError:
            size = 0
        if not size:
            self._on_closed(unread=False)
            return False
        buffer = self._buffer
        if buffer:
            buffer += memoryview(received)[:size]
            self._take(buffer, len(buffer))
        else:
            self._take(received, size)  # the common case: a whole reply in one read
        pending = self._pending
        if pending is not None:
            pending.wake()  # the run goes on in this turn of the loop
        return True

    def _take(self, data: bytearray, size: int) -> None:
        """Deliver the whole frames at the start of ``data[:size]`` and keep the rest in
        ``self._buffer`` (``data`` is either that buffer or the receive buffer)."""
        at = 0
        while size - at >= 4:
            length = int.from_bytes(data[at : at + 4], "big")
            if length < 1 or length > MAX_FRAME_BYTES:
                self._protocol_fault(f"frame of {length} bytes")
                return
            if size - at < 4 + length:
                break
            # One copy each (slicing the bytearray first would copy twice).
            view = memoryview(data)
            kind, payload = bytes(view[at + 4 : at + 5]), bytes(view[at + 5 : at + 4 + length])
            view.release()  # the buffer may be resized below
            at += 4 + length
            if not self._deliver(kind, payload):
                return
        if data is self._buffer:
            del data[:at]
        elif at < size:
            self._buffer += memoryview(data)[at:size]

    def _deliver(self, kind: bytes, payload: bytes) -> bool:
        """Hand one frame to the pending request; ``False`` when the worker broke the protocol."""
        if kind == b"J" and self._sharing and self._in_slice:
            self._sharing = False  # one program, before the start step; later: a fault
            self._taken = True  # it compiled the run's source: it read the request
            self.compiled = _shared_program(payload)
            if self.compiled is None:
                self._protocol_fault("malformed compiled program")
                return False
            return True
        if kind not in (b"P", b"C") or not self._in_slice:
            self._protocol_fault(f"unexpected frame {kind!r}")
            return False
        self._in_slice = False
        self._taken = True
        self._sharing = False  # model code has run in the worker from here on
        pending = self._pending
        if pending is not None and not pending.done():
            pending.resolve((kind, payload))
        return True

    def _on_closed(self, *, unread: bool) -> None:
        worker = self._worker
        self.detach()
        killed = worker.killed
        worker.dead = True
        with contextlib.suppress(OSError):
            worker.sock.close()
        self.reusable = False
        pending = self._pending
        if pending is not None and not pending.done() and not killed:
            if unread and not self._taken:
                pending.set_exception(_NeverTaken())
                return
            pending.set_exception(_WorkerLost(_lost("the worker process exited", worker=worker)))

    def _protocol_fault(self, why: str) -> None:
        pending = self._pending
        self._fail_worker()
        if pending is not None and not pending.done():
            pending.set_exception(ProtocolFault(why))

    def _fail_worker(self) -> None:
        self.detach()
        self.reusable = False
        self._worker.kill()

    def detach(self) -> None:
        """Stop watching the worker's socket (always before it is closed)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._fd >= 0:
            self._loop.remove_reader(self._fd)
            self._fd = -1

    # -- stopping ---------------------------------------------------------------------------
    def stop(self) -> None:
        """The run ended early (cancelled, wall limit). A running slice is killed at once;
        a worker that only awaits tools is told to drop the run (``X``): it exits, and its
        release kills it all the same."""
        if self._in_slice:
            self._fail_worker()
            pending = self._pending
            if pending is not None and not pending.done():
                pending.cancel()
            return
        if not self._worker.dead:
            try:
                self._worker.sock.send(frame(b"X", b""))
            except OSError:
                self._fail_worker()
