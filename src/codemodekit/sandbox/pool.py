"""The pool of sandbox worker processes: spawning, admission control, kill and replace.

One zygote process per pool forks the workers (see ``_worker.py``). A worker hosts one run
at a time, so stopping a run (kill) never touches another run. Admission bounds the runs in
flight (``max_runs``) and the heap they may reserve together (``memory_budget_bytes``);
beyond that runs wait in a bounded FIFO queue, and a full queue or a wait past
``queue_timeout_ms`` is refused with ``SERVER_BUSY``. Idle workers are kept warm; a worker
is replaced after ``worker_max_runs`` runs or when it grew past ``worker_max_rss_bytes``.

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
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

import codemodekit
from codemodekit.runtime import MIB, RuntimeOptions
from codemodekit.sandbox.base import RuntimeStats

log = logging.getLogger("codemodekit.sandbox")

WORKER_OVERHEAD_BYTES = 16 * MIB
"""Reserved per run on top of its heap limit: the worker's own interpreter and buffers."""
ZYGOTE_START_S = 30.0
"""Longest wait for a new zygote to import and warm up (a cold disk on a loaded machine)."""
SPAWN_S = 10.0
"""Longest wait for one fork and the new worker's hello."""
IDLE_RETIRE_S = 30.0
"""Idle workers beyond the warm set exit after this long unused (memory goes back)."""

_CLOCK_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class PoolBusy(Exception):
    """Admission refused a run: the queue is full or the run waited too long."""


class PoolFailure(Exception):
    """No worker could be started (the zygote does not come up)."""


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

    __slots__ = ("cpu_s", "dead", "idle_since", "killed", "pid", "rss", "runs", "sock")

    def __init__(self, pid: int, sock: socket.socket, cpu_s: float) -> None:
        self.pid = pid
        self.sock = sock
        self.cpu_s = cpu_s
        """The worker's CPU seconds as of its last message."""
        self.runs = 0
        self.rss = 0
        self.dead = False
        self.killed = False
        self.idle_since = 0.0

    def kill(self) -> None:
        """SIGKILL now; its socket closes and its zygote reaps it."""
        if self.dead:
            return
        self.dead = self.killed = True
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            self.sock.close()

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


@dataclass(slots=True)
class _Waiter:
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[None]
    need: int
    admitted: bool = False


class _Zygote:
    """The process that forks workers; restarted if it dies."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._control: socket.socket | None = None

    def _start(self) -> socket.socket:
        ours, theirs = socket.socketpair()
        env = dict(os.environ)
        # The zygote imports this very codemodekit, even where the server found it through a
        # sys.path entry of its own rather than an installation.
        package_root = os.path.dirname(os.path.dirname(os.path.abspath(codemodekit.__file__)))
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (package_root, env.get("PYTHONPATH", "")) if p
        )
        process = subprocess.Popen(
            [sys.executable, "-m", "codemodekit.sandbox._worker", str(theirs.fileno())],
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,  # under `serve --transport stdio` stdout is the protocol
            start_new_session=True,  # a terminal's Ctrl-C goes to the server, which stops runs
            env=env,
        )
        theirs.close()
        self._process = process  # visible to stop() while it is still starting
        ours.settimeout(ZYGOTE_START_S)
        try:
            ready = ours.recv(1)
        except OSError:
            ready = b""
        if ready != b"R":
            process.kill()
            ours.close()
            self._process = None
            raise PoolFailure("the sandbox zygote process did not start")
        self._control = ours
        return ours

    def fork(self) -> tuple[int, socket.socket]:
        """A new worker: its pid and the server's end of its socket."""
        with self._lock:
            for attempt in (1, 2):
                control = self._control or self._start()
                ours, theirs = socket.socketpair()
                try:
                    control.settimeout(SPAWN_S)
                    socket.send_fds(control, [b"F"], [theirs.fileno()])
                    pid_bytes = control.recv(4)
                    if len(pid_bytes) != 4:
                        raise OSError("the zygote closed its socket")
                    return int.from_bytes(pid_bytes, "big"), ours
                except OSError:
                    ours.close()
                    self._stop_locked()
                    if attempt == 2:
                        raise PoolFailure("the sandbox zygote process failed") from None
                finally:
                    theirs.close()
            raise AssertionError("unreachable")  # pragma: no cover

    def _stop_locked(self) -> None:
        if self._control is not None:
            with contextlib.suppress(OSError):
                self._control.close()
        if self._process is not None:
            with contextlib.suppress(OSError):
                self._process.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._process.wait(timeout=5)
        self._process = self._control = None

    def stop(self) -> None:
        # Kill first, without the lock: a fork request may hold it while a new zygote is
        # still importing, and exit must not wait for that.
        process = self._process
        if process is not None:
            with contextlib.suppress(OSError):
                process.kill()
        with self._lock:
            self._stop_locked()


class WorkerPool:
    def __init__(self, options: RuntimeOptions) -> None:
        self.options = options
        self._zygote = _Zygote()
        self._lock = threading.Lock()
        self._idle: collections.deque[Worker] = collections.deque()
        self._busy: set[Worker] = set()
        self._waiters: collections.deque[_Waiter] = collections.deque()
        self._in_flight = 0
        self._reserved = 0
        self._spawning = 0
        self._restarts = 0
        self._rejected = 0
        self._closed = False
        self._refill_wanted = threading.Event()
        self._refiller: threading.Thread | None = None

    # -- workers ----------------------------------------------------------------------------
    def _spawn(self) -> Worker:
        pid, sock = self._zygote.fork()
        try:
            sock.settimeout(SPAWN_S)
            head = _recv_exactly(sock, 4)
            body = _recv_exactly(sock, int.from_bytes(head, "big"))
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
            while True:
                with self._lock:
                    if self._closed:
                        return
                    total = len(self._idle) + len(self._busy) + self._spawning
                    if len(self._idle) + self._spawning >= self.options.warm or (
                        total >= self.options.run_slots
                    ):
                        break
                    self._spawning += 1
                try:
                    worker = self._spawn()
                except PoolFailure:
                    with self._lock:
                        self._spawning -= 1
                        if self._closed:
                            return
                    log.exception("could not start a sandbox worker")
                    break
                with self._lock:
                    self._spawning -= 1
                    if self._closed:
                        worker.retire()
                        return
                    self._park(worker)

    def _retire_idle(self) -> None:
        now = time.monotonic()
        with self._lock:
            # Oldest first (the left end).
            while len(self._idle) > self.options.warm and (
                now - self._idle[0].idle_since > IDLE_RETIRE_S
            ):
                self._idle.popleft().retire()

    def _park(self, worker: Worker) -> None:
        worker.idle_since = time.monotonic()
        self._idle.append(worker)

    async def _take_worker(self) -> Worker:
        with self._lock:
            while self._idle:
                # Least recently parked first: it has had the longest to prepare its next
                # QuickJS context (about half a millisecond of compile after each run).
                worker = self._idle.popleft()
                if worker.usable():
                    self._busy.add(worker)
                    break
                worker.retire()
            else:
                worker = None
            low = len(self._idle) + self._spawning < self.options.warm
        if low:
            self._refill_wanted.set()  # a thread wake-up per run otherwise
        if worker is None:
            spawning = asyncio.get_running_loop().run_in_executor(None, self._spawn)
            try:
                worker = await asyncio.shield(spawning)
            except asyncio.CancelledError:
                # The run is gone; the worker it asked for joins the idle set.
                spawning.add_done_callback(self._adopt)
                raise
            with self._lock:
                self._busy.add(worker)
        return worker

    def _adopt(self, spawned: asyncio.Future[Worker]) -> None:
        if spawned.cancelled() or spawned.exception() is not None:
            return
        worker = spawned.result()
        with self._lock:
            if self._closed:
                worker.retire()
            else:
                self._park(worker)

    # -- admission --------------------------------------------------------------------------
    def _fits(self, need: int) -> bool:
        if self._in_flight >= self.options.run_slots:
            return False
        # A run bigger than the whole budget still runs, alone.
        return self._in_flight == 0 or self._reserved + need <= self.options.memory_budget_bytes

    async def acquire(self, memory_bytes: int) -> Worker:
        """Admit a run and lease it a worker; raises ``PoolBusy`` or ``PoolFailure``."""
        if self._refiller is None:
            self.start()
        need = memory_bytes + WORKER_OVERHEAD_BYTES
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._closed:
                raise PoolFailure("the sandbox pool is closed")
            if not self._waiters and self._fits(need):
                self._in_flight += 1
                self._reserved += need
                waiter = None
            elif len(self._waiters) >= self.options.max_queued_runs:
                self._rejected += 1
                raise PoolBusy(
                    f"the server is busy: {self.options.run_slots} runs are in flight and "
                    f"{len(self._waiters)} are queued (max_queued_runs); retry later"
                )
            else:
                waiter = _Waiter(loop, loop.create_future(), need)
                self._waiters.append(waiter)
        if waiter is not None:
            try:
                async with asyncio.timeout(self.options.queue_timeout_ms / 1000):
                    await waiter.future
            except BaseException as exc:
                with self._lock:
                    if waiter.admitted:
                        self._release_locked(need)
                    else:
                        self._waiters.remove(waiter)
                    if isinstance(exc, TimeoutError):
                        self._rejected += 1
                if isinstance(exc, TimeoutError):
                    raise PoolBusy(
                        f"the server is busy: the run waited {self.options.queue_timeout_ms} ms "
                        "for a sandbox worker (queue_timeout_ms); retry later"
                    ) from None
                raise
        try:
            return await self._take_worker()
        except BaseException:
            with self._lock:
                self._release_locked(need)
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

    def release(self, worker: Worker, memory_bytes: int, *, reusable: bool) -> None:
        """End a lease. A reusable worker goes back to the idle set (or retires when it has
        served enough); any other was killed and is replaced in the background."""
        need = memory_bytes + WORKER_OVERHEAD_BYTES
        with self._lock:
            self._busy.discard(worker)
            if worker.dead:  # killed or crashed under its run
                self._restarts += 1
            elif not reusable:
                worker.kill()
                self._restarts += 1
            elif (
                self._closed
                or worker.runs >= self.options.worker_max_runs
                or worker.rss > self.options.worker_max_rss_bytes
            ):
                worker.retire()
            else:
                self._park(worker)
            self._release_locked(need)
            low = len(self._idle) + self._spawning < self.options.warm
        if low:
            self._refill_wanted.set()

    def _release_locked(self, need: int) -> None:
        self._in_flight -= 1
        self._reserved -= need
        while self._waiters and self._fits(self._waiters[0].need):
            waiter = self._waiters.popleft()
            waiter.admitted = True
            self._in_flight += 1
            self._reserved += waiter.need
            waiter.loop.call_soon_threadsafe(_admit, waiter.future)

    # -- views and shutdown -------------------------------------------------------------------
    def stats(self) -> RuntimeStats:
        with self._lock:
            return RuntimeStats(
                mode="process",
                workers=len(self._idle) + len(self._busy),
                busy_workers=len(self._busy),
                runs_in_flight=self._in_flight,
                runs_queued=len(self._waiters),
                worker_restarts=self._restarts,
                runs_rejected=self._rejected,
                worker_rss_bytes=sum(w.rss for w in (*self._idle, *self._busy)),
            )

    def busy_pids(self) -> list[int]:
        """Process ids of the workers hosting runs now (for operators and tests)."""
        with self._lock:
            return sorted(w.pid for w in self._busy if not w.dead)

    def close(self) -> None:
        """Stop every worker and the zygote. Runs in flight end with ``SANDBOX_CRASHED``."""
        with self._lock:
            self._closed = True
            workers = [*self._idle, *self._busy]
            self._idle.clear()
        self._refill_wanted.set()
        for worker in workers:
            worker.kill()
        self._zygote.stop()


def _admit(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            raise OSError("closed")
        chunks += chunk
    return bytes(chunks)


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
