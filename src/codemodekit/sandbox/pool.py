"""The pool of sandbox worker processes: spawning, admission control, kill and replace.

One zygote process per pool forks the workers (``zygote.py``, ``_worker.py``). A worker
hosts exactly one run and is killed when the run ends, so stopping a run (kill) never
touches another run and nothing of one run is seen by the next. Workers are forked ahead of demand (the warm set). Admission bounds the runs in
flight (``max_runs``) and the heap they may reserve together (``memory_budget_bytes``);
beyond that runs wait in a bounded FIFO queue, and a full queue or a wait past
``queue_timeout_ms`` is refused with ``SERVER_BUSY``.

The pool is shared by every ``CodeMode`` of the process that uses the same options, and is
bound to no event loop: a worker's socket is watched by the loop of the run that leases it.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import contextlib
import json
import logging
import os
import signal
import socket
import threading
import time

from codemodekit.compiler.cache import ProgramCache
from codemodekit.runtime import MIB, RuntimeOptions, usable_cpus
from codemodekit.sandbox._protocol import frame
from codemodekit.sandbox.admission import AdmissionPolicy, AdmissionRefused, FairAdmission
from codemodekit.sandbox.base import RuntimeStats
from codemodekit.sandbox.zygote import SPAWN_S, PoolFailure, Zygote, recv_exactly

log = logging.getLogger("codemodekit.sandbox")

WORKER_OVERHEAD_BYTES = 16 * MIB
"""Reserved per run on top of its heap limit: the worker's own interpreter and buffers."""
IDLE_RETIRE_S = 30.0
"""Idle workers beyond the warm set exit after this long unused (memory goes back)."""
REHEARSALS_AT_ONCE = 2
"""Idle workers told to rehearse per quiet moment: a rehearsal takes ≈3 ms of CPU, and a run
that arrives meanwhile competes with at most this many (ADR 0039)."""
QUIET_S = 0.005
"""How long no run may have started or ended before the warm set is topped up while a
quarter of it is ready: a new worker's start (≈2 ms of CPU) does not compete with runs
then. Below a quarter, or with runs waiting for a worker, the refill starts at once."""

BATCH = max(2, os.cpu_count() or 1)
"""Workers forked at once to top the warm set up."""
_CLOCK_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def admission_policy(options: RuntimeOptions) -> AdmissionPolicy:
    return AdmissionPolicy(
        slots=options.run_slots,
        memory_budget=options.memory_budget_bytes,
        max_queued=options.max_queued_runs,
        per_caller_runs=options.caller_run_slots,
        per_caller_queued=options.caller_queue,
        queue_timeout_s=options.queue_timeout_ms / 1000,
    )


class PoolBusy(Exception):
    """Admission refused a run: the queue is full or the run waited too long."""


def process_cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of a process, from ``/proc`` (``None`` if it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _CLOCK_TICK
    except (OSError, IndexError, ValueError):
        return None


class Worker:
    """One worker process, as the server sees it."""

    __slots__ = (
        "cpu_s",
        "dead",
        "idle_since",
        "killed",
        "pid",
        "rehearsed",
        "rss",
        "runs",
        "sock",
    )

    def __init__(self, pid: int, sock: socket.socket, cpu_s: float) -> None:
        self.pid = pid
        self.sock = sock
        self.cpu_s = cpu_s
        """The worker's CPU seconds as of its last message."""
        self.runs = 0
        self.rehearsed = False
        self.rss = 0
        self.dead = False
        self.killed = False
        self.idle_since = 0.0

    def kill(self) -> None:
        """SIGKILL now; its socket closes and its zygote reaps it."""
        if self.dead:
            return
        self.dead = self.killed = True
        self.end_process()
        with contextlib.suppress(OSError):
            self.sock.close()

    def end_process(self) -> None:
        """SIGKILL only: the socket stays open, so a run's channel reads its end and ends
        the run (``SANDBOX_CRASHED``) rather than waiting on a descriptor closed under it."""
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)

    def usable(self) -> bool:
        """Alive as far as its socket tells: nobody watches an idle worker, so one that died
        meanwhile (killed from outside, out of memory) is noticed here, before a run uses it."""
        if self.dead:
            return False
        try:
            closed = self.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
        except (BlockingIOError, InterruptedError):
            return True
        except OSError:
            closed = True
        if closed:
            self.dead = True
        return not closed

    def retire(self) -> None:
        """Ask an idle worker to exit (it hosts nothing, so closing its socket suffices)."""
        self.dead = True
        with contextlib.suppress(OSError):
            self.sock.close()


class WorkerPool:
    def __init__(self, options: RuntimeOptions) -> None:
        self.options = options
        # Read once (each is a system call for the CPUs this process may use): the pool is
        # sized for the machine it started on.
        self._run_slots = options.run_slots
        self._cpus = usable_cpus()
        self._warm = options.warm
        self._zygote = Zygote(options.unsafe_allow_uncontained)
        self.programs = ProgramCache()
        """Compiled programs of sources seen before, filled only from a worker's ``J``
        frame: sent after compiling and before any model code ran in it, by a fresh fork of
        a pristine zygote whose only input was the source (ADR 0028)."""
        self._lock = threading.Lock()
        self._idle: collections.deque[Worker] = collections.deque()
        self._busy: set[Worker] = set()
        self._admission = FairAdmission(admission_policy(options))
        self._spawning = 0
        self._restarts = 0
        self._closed = False
        self._refill_wanted = threading.Event()
        self._refiller: threading.Thread | None = None
        self._wanting: collections.deque[tuple[asyncio.AbstractEventLoop, asyncio.Future[Worker]]]
        self._wanting = collections.deque()
        """Admitted runs that found no idle worker: each gets the next one that says hello."""
        self._last_active = 0.0
        """When a run last took or gave back a worker (``time.monotonic``)."""
        self._quiet_check_until = 0.0
        """A ``_at_quiet_moment`` timer is pending (on some run's loop) until then."""
        self._refill_asked = False
        """The last quiet moment asked for a refill (and looks again once for its workers)."""
        self._peak = 0
        """Most workers leased at once lately: the warm set grows to it (the load), and
        shrinks back as idle workers retire."""
        self._settings = b""
        """The latest run's settings announced (``expect_run``), handed to rehearsals."""
        self._ending: list[Worker] = []
        """Workers whose runs ended, killed at the loop's next turn (``release``)."""

    # -- workers ----------------------------------------------------------------------------
    def _greet(self, pid: int, sock: socket.socket) -> Worker:
        """Wait for a new worker's hello: it has locked itself down by then."""
        try:
            sock.settimeout(SPAWN_S)
            head = recv_exactly(sock, 4)
            body = recv_exactly(sock, int.from_bytes(head, "big"))
            if body[:1] != b"H":
                raise OSError("no hello")
            hello = json.loads(body[1:])
            cpu_s, rss = float(hello["u"]), int(hello["r"])
        except (OSError, ValueError, KeyError):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            sock.close()
            raise PoolFailure("a new sandbox worker did not answer") from None
        sock.setblocking(False)
        worker = Worker(pid, sock, cpu_s)
        worker.rss = rss
        return worker

    def start(self) -> None:
        """Start the zygote and the warm workers in the background (idempotent)."""
        with self._lock:
            if self._refiller is None and not self._closed:
                self._refiller = threading.Thread(
                    target=self._refill_loop, name="codemode-sandbox-pool", daemon=True
                )
                self._refiller.start()
        self._refill_wanted.set()

    def _refill_loop(self) -> None:
        while True:
            self._refill_wanted.wait(timeout=IDLE_RETIRE_S / 2)
            self._refill_wanted.clear()
            self._retire_idle()
            first = True
            while True:
                with self._lock:
                    if self._closed:
                        self._fail_wanting_locked(PoolFailure("the sandbox pool is closed"))
                        return
                    if not first and self._admission.in_flight and not self._urgent_locked():
                        break  # a run started: the rest waits for the next quiet moment
                    first = False
                    total = len(self._idle) + len(self._busy) + self._spawning
                    count = min(
                        self._warm_target_locked()
                        + len(self._wanting)
                        - len(self._idle)
                        - self._spawning,
                        self._run_slots - total,
                    )
                    if count <= 0:
                        break
                    # Runs waiting: exactly their workers first (siblings would slow their
                    # start); else a CPU's worth at a time, so the batch competes less.
                    count = min(count, len(self._wanting) or BATCH)
                    self._spawning += count
                # Every fork first (pipelined), then every hello: the new workers lock
                # themselves down side by side; each is handed on as soon as it is ready.
                started: list[tuple[int, socket.socket]] = []
                greeted = 0
                try:
                    started = self._zygote.fork_many(count)
                    while started:
                        worker = self._greet(*started.pop(0))
                        greeted += 1
                        with self._lock:
                            self._spawning -= 1
                            self._hand_on_locked(worker)
                except Exception as exc:  # the refiller outlives any one refill
                    failure = (
                        exc
                        if isinstance(exc, PoolFailure)
                        else PoolFailure(f"could not start a sandbox worker: {exc}")
                    )
                    for pid, sock in started:
                        with contextlib.suppress(OSError):
                            os.kill(pid, signal.SIGKILL)
                        sock.close()
                    log.exception("could not start a sandbox worker")
                    with self._lock:
                        self._fail_wanting_locked(failure)
                finally:
                    with self._lock:
                        self._spawning -= count - greeted
                if greeted < count or self._closed:
                    break

    def cpu_to_spare(self) -> bool:
        """Fewer runs are in flight than this process may use CPUs: a worker awaiting tools
        may poll for the answer rather than sleep (ADR 0042); with more, the polling
        workers would take the CPU the server needs to answer them."""
        return self._admission.in_flight < self._cpus

    def expect_run(self, settings: bytes = b"") -> None:
        """A run has started and will soon ask for a worker: tell the idle worker it will be
        handed to poll for its start request rather than sleep, so that waking it (an
        inter-processor interrupt on a machine whose idle CPUs halt) overlaps this
        process's work before the request (ADR 0043). Only with a CPU to spare; a worker
        told and then not handed it (another run took it, or this one ended first) polls
        a moment for nothing and sleeps again.

        ``settings``: the run's limits and log streaming, as the start request will carry
        them. Idle workers told to rehearse from now on are handed them too, and make the
        engine of a run with these settings ahead of it (ADR 0046)."""
        if settings:
            self._settings = settings
        if not self.cpu_to_spare():
            return
        with self._lock:
            worker = self._idle[0] if self._idle else None  # the next one taken
        if worker is not None:
            with contextlib.suppress(OSError):  # a dead worker: taking it will say so
                worker.sock.send(frame(b"N", settings))

    def _urgent_locked(self) -> bool:
        """Under a quarter of the warm set is ready, or runs wait for a worker: refill now
        (else at the next quiet moment)."""
        ready = len(self._idle) + self._spawning
        return bool(self._wanting) or 4 * ready < self._warm_target_locked()

    def _at_quiet_moment(self) -> None:
        """A moment after a run ended, if no run started since: a few idle workers rehearse
        and the warm set is topped up, and a moment later the next few; else look again a
        moment after the last one."""
        with self._lock:
            self._quiet_check_until = 0.0
            busy = self._admission.in_flight > 0
            wait_s = QUIET_S - (time.monotonic() - self._last_active)
            if busy or wait_s > QUIET_S * 0.1:
                # A run is in flight (its release looks again) or one ended lately.
                if not busy:
                    self._check_quiet_in(wait_s)
                return
            fresh = [worker for worker in self._idle if not worker.rehearsed]
            for worker in fresh[:REHEARSALS_AT_ONCE]:
                _rehearse(worker, self._settings)
            low = len(self._idle) + self._spawning < self._warm_target_locked()
            # Look again for the next ones and for workers on their way; for a refill asked
            # now, once (it may fail: then the next run's release looks again).
            asked, self._refill_asked = self._refill_asked, low
            if len(fresh) > REHEARSALS_AT_ONCE or self._spawning or (low and not asked):
                self._check_quiet_in(QUIET_S)
        if low:
            self._refill_wanted.set()

    def _check_quiet_in(self, delay_s: float) -> None:
        try:
            asyncio.get_running_loop().call_later(delay_s, self._at_quiet_moment)
        except RuntimeError:  # no loop here
            self._refill_wanted.set()
            return
        # Pending until then (and a moment more: a loop that closes drops its timers).
        self._quiet_check_until = time.monotonic() + delay_s + 1.0

    def _warm_target_locked(self) -> int:
        return min(max(self._warm, self._peak), self._run_slots)

    def _hand_on_locked(self, worker: Worker) -> None:
        """A new worker goes to the oldest run waiting for one, else to the idle set."""
        if self._closed:
            worker.retire()
            return
        while self._wanting:
            loop, future = self._wanting.popleft()
            if future.done():
                continue
            self._busy.add(worker)
            try:
                loop.call_soon_threadsafe(self._deliver, future, worker)
            except RuntimeError:  # its loop is closed
                self._busy.discard(worker)
                continue
            return
        self._park(worker)

    def _deliver(self, future: asyncio.Future[Worker], worker: Worker) -> None:
        if future.done():  # the run was cancelled meanwhile: the worker is not used
            with self._lock:
                self._busy.discard(worker)
                self._hand_on_locked(worker)
            return
        future.set_result(worker)

    def _fail_wanting_locked(self, failure: PoolFailure) -> None:
        while self._wanting:
            loop, future = self._wanting.popleft()
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_fail, future, failure)

    def _retire_idle(self) -> None:
        now = time.monotonic()
        with self._lock:
            # Oldest first (the left end).
            while len(self._idle) > self._warm and (now - self._idle[0].idle_since > IDLE_RETIRE_S):
                self._idle.popleft().retire()
                self._peak = min(self._peak, len(self._idle) + len(self._busy))

    def _park(self, worker: Worker) -> None:
        worker.idle_since = time.monotonic()
        self._idle.append(worker)

    async def _take_worker(self) -> Worker:
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._closed:  # admitted as the pool closed: no worker will come
                raise PoolFailure("the sandbox pool is closed")
            while self._idle:
                # Least recently parked first.
                worker = self._idle.popleft()
                if worker.usable():
                    self._busy.add(worker)
                    break
                worker.retire()
            else:
                worker = None
            wanted: asyncio.Future[Worker] | None = None
            if worker is None:
                # Wait for the next new worker; the refiller forks one per waiting run
                # (in a batch) besides the warm set, and hands each on at its hello.
                wanted = loop.create_future()
                self._wanting.append((loop, wanted))
            self._peak = max(self._peak, len(self._busy) + len(self._wanting))
            self._last_active = time.monotonic()
            urgent = self._urgent_locked()
        if urgent:
            self._refill_wanted.set()
        if wanted is not None:
            try:
                worker = await wanted
            except asyncio.CancelledError:
                with self._lock:
                    # Not handed yet: no longer wanted. Handed meanwhile: _deliver saw the
                    # cancelled future and gave the worker to the next run, or delivered it
                    # just before the cancel: it goes on now.
                    with contextlib.suppress(ValueError):
                        self._wanting.remove((loop, wanted))
                    if wanted.done() and not wanted.cancelled() and not wanted.exception():
                        handed = wanted.result()
                        self._busy.discard(handed)
                        self._hand_on_locked(handed)
                raise
        assert worker is not None
        return worker

    # -- admission --------------------------------------------------------------------------
    async def acquire(self, memory_bytes: int, caller: str | None = None) -> Worker:
        """Admit a run (fairly between callers: ``sandbox/admission.py``) and lease it a
        worker; raises ``PoolBusy`` or ``PoolFailure``."""
        if self._refiller is None:
            self.start()
        need = memory_bytes + WORKER_OVERHEAD_BYTES
        if self._closed:
            raise PoolFailure("the sandbox pool is closed")
        try:
            await self._admission.admit(caller, need)
        except AdmissionRefused as refused:
            raise PoolBusy(str(refused)) from None
        try:
            return await self._take_worker()
        except BaseException:
            self._admission.release(caller, need)
            raise

    async def replace(self, worker: Worker) -> Worker:
        """Another worker for a run whose worker died before it took the run (killed while
        idle: its socket had not closed yet when it was handed out); the run keeps its
        admission."""
        with self._lock:
            self._busy.discard(worker)
            self._restarts += 1
        worker.kill()
        return await self._take_worker()

    def release(
        self, worker: Worker, memory_bytes: int, *, reusable: bool, caller: str | None = None
    ) -> None:
        """End a lease. A worker hosts one run: it is killed, whether its run ended
        normally or was stopped; only the latter counts as a restart. A worker whose run
        stopped is killed now; one whose run ended normally (it is exiting anyway; the kill
        makes sure of it) is killed once the run's caller has its result, in this loop's
        next turn (``_end_workers``). The warm set is refilled in the background. The run's
        admission goes back to ``caller``'s share now (``sandbox/admission.py``)."""
        need = memory_bytes + WORKER_OVERHEAD_BYTES
        ended = False
        with self._lock:
            self._busy.discard(worker)
            if worker.dead:  # killed or crashed under its run
                self._restarts += 1
            elif not reusable:
                worker.kill()
                self._restarts += 1
            else:
                self._ending.append(worker)  # single use: no process outlives its run
                ended = True
            now = self._last_active = time.monotonic()
            urgent = self._urgent_locked()
        self._admission.release(caller, need)
        if ended:
            try:
                asyncio.get_running_loop().call_soon(self._end_workers)
            except RuntimeError:  # no loop here
                self._end_workers()
        if urgent:
            self._refill_wanted.set()
        elif now > self._quiet_check_until:
            # Not urgent: once no run has started for a moment (one timer on the run's loop
            # at a time; the refiller thread is not woken per run).
            self._check_quiet_in(QUIET_S)

    # -- views and shutdown -------------------------------------------------------------------
    def containment(self) -> dict[str, str]:
        """Start the zygote if needed and say which containment layers are in force (``on``
        or why not); raises ``PoolFailure`` when a mandatory one is missing (ADR 0028)."""
        return self._zygote.ensure_started()

    def stats(self) -> RuntimeStats:
        layers = tuple(self._zygote.layers.items())
        with self._lock:
            return RuntimeStats(
                containment=layers,
                mode="process",
                workers=len(self._idle) + len(self._busy),
                busy_workers=len(self._busy),
                runs_in_flight=self._admission.in_flight,
                runs_queued=self._admission.queued,
                worker_restarts=self._restarts,
                runs_rejected=self._admission.rejected,
                worker_rss_bytes=sum(w.rss for w in (*self._idle, *self._busy)),
            )

    def busy_pids(self) -> list[int]:
        """Process ids of the workers hosting runs now (for operators and tests)."""
        with self._lock:
            return sorted(w.pid for w in self._busy if not w.dead)

    def _end_workers(self) -> None:
        """Kill the workers whose runs ended (``release``). Each call ends all of them: a
        call that never comes (its loop closed first) leaves them to the next, or to
        ``close``."""
        with self._lock:
            ending, self._ending = self._ending, []
        for worker in ending:
            worker.kill()

    def close(self) -> None:
        """Stop every worker and the zygote. Runs in flight end with ``SANDBOX_CRASHED``
        (their channels read their workers' sockets close), runs waiting for a worker with
        an internal failure, and later runs are refused."""
        with self._lock:
            self._closed = True
            unleased = [*self._idle, *self._ending]
            leased = list(self._busy)
            self._idle.clear()
            self._ending.clear()
            self._fail_wanting_locked(PoolFailure("the sandbox pool is closed"))
        self._refill_wanted.set()
        for worker in unleased:
            worker.kill()
        for worker in leased:
            worker.end_process()  # its run's release closes the socket
        self._zygote.stop()


def _rehearse(worker: Worker, settings: bytes) -> None:
    """An idle worker rehearses (``R``: a whole run in a spare context, ``_worker.py``), so
    that its run does not pay a fresh fork's copy-on-write faults (ADR 0039), and makes the
    engine of a run with ``settings`` (ADR 0046). Only at a quiet moment (ADR 0036): under
    a stream of runs the CPU goes to the next workers."""
    if not worker.rehearsed:
        worker.rehearsed = True
        with contextlib.suppress(OSError):
            worker.sock.send(frame(b"R", settings))


def _fail(future: asyncio.Future[Worker], failure: PoolFailure) -> None:
    if not future.done():
        future.set_exception(failure)


_pools: dict[RuntimeOptions, WorkerPool] = {}
_pools_lock = threading.Lock()


def shared_pool(options: RuntimeOptions) -> WorkerPool:
    """The process-wide pool for ``options``, created on first use."""
    with _pools_lock:
        pool = _pools.get(options)
        if pool is None:
            pool = _pools[options] = WorkerPool(options)
        return pool


@atexit.register
def _close_pools() -> None:
    with _pools_lock:
        pools = list(_pools.values())
        _pools.clear()
    for pool in pools:
        pool.close()
