"""Ends a slice that runs past its budget inside code QuickJS never interrupts.

QuickJS checks the time limit only every 10,000 polls (loop back-edges, calls). Operators
and natives do not poll: a loop of ``%`` on two huge BigInts (≈0.2 s each) runs ≈30 minutes
before its first check, pinning a worker thread long after the run was reported over.
Nothing can interrupt the engine from outside, but its heap limit is a plain field that
every allocation reads. The watchdog *pulses* it: one byte for ``LOW_S`` (longer than
most single operations), so the next operation fails at its first allocation and the
failure unwinds; then the run's own limit for ``HIGH_S``, so that the (already expired) time
limit can allocate its uncatchable "interrupted" error at its next check. A heap left at one
byte would turn that error into a catchable out-of-memory, and a loop that catches
everything would never end. The pulses repeat while the slice overruns. What this cannot stop (ADR 0005): a loop that catches every
error *and* runs slow unpolled operations, or one that allocates nothing (comparing two
huge strings), still runs until its next time check.

One daemon thread serves every engine. It ticks while slices are registered, and for
``LINGER_S`` after the last one left: waking it costs a thread switch, which a stream of
short slices (one per tool call) would otherwise pay again and again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

TICK_S = 0.02
"""How often a registered slice's deadline is checked."""
TRIP_BYTES = 1
"""The heap limit during a pulse: any allocation fails."""
LOW_S = 1.0
"""How long a pulse keeps the heap at ``TRIP_BYTES``."""
HIGH_S = 0.1
"""How long the run's own heap limit is back between two pulses."""
LINGER_S = 1.0
"""How long the thread keeps ticking without slices before it waits to be woken."""


class Slice:
    """One entry into JavaScript, registered while it runs."""

    __slots__ = ("ctx", "deadline", "heap", "low", "tripped")

    def __init__(self, ctx: Any, deadline: float, heap: int) -> None:
        self.ctx = ctx
        self.deadline = deadline
        self.heap = heap
        self.tripped = False
        self.low = False


class Watchdog:
    """Deadlines are on ``clock``: ``time.monotonic`` in the server's process (inline
    mode). A sandbox worker uses ``CpuOnly`` below."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._active: dict[int, Slice] = {}
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def enter(self, ctx: Any, deadline: float, heap: int) -> Slice:
        """Register a slice that must end by ``deadline`` (on ``clock``) and runs
        under the heap limit ``heap``."""
        entry = Slice(ctx, deadline, heap)
        with self._lock:
            self._active[id(entry)] = entry
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop, name="codemode-js-watchdog", daemon=True
                )
                self._thread.start()
        if not self._wake.is_set():
            self._wake.set()
        return entry

    def leave(self, entry: Slice) -> bool:
        """Unregister; whether the slice was tripped. After this the slice is never tripped."""
        with self._lock:
            self._active.pop(id(entry), None)
            entry.ctx = None  # the context is freed by refcount when its run ends
        return entry.tripped

    def trip(self, entry: Slice) -> None:
        """Trip a registered slice now (its run was cancelled or timed out)."""
        with self._lock:
            if id(entry) in self._active and not entry.low:
                now = self.clock()
                entry.deadline = min(entry.deadline, now)
                self._pulse_locked(entry, now)
        if not self._wake.is_set():
            self._wake.set()

    def _pulse_locked(self, entry: Slice, now: float) -> None:
        # set_memory_limit is a plain store into the runtime (JS_SetMemoryLimit); it is
        # safe while another thread runs JavaScript, unlike anything that walks the heap.
        if entry.low:
            entry.low = False
            entry.ctx.set_memory_limit(entry.heap)
            entry.deadline = now + HIGH_S
        elif now >= entry.deadline:
            entry.tripped = entry.low = True
            entry.ctx.set_memory_limit(TRIP_BYTES)
            entry.deadline = now + LOW_S

    def _loop(self) -> None:
        idle_ticks = 0
        while True:
            self._wake.wait()
            time.sleep(TICK_S)
            now = self.clock()
            with self._lock:
                for entry in self._active.values():
                    if now >= entry.deadline:
                        self._pulse_locked(entry, now)
                idle_ticks = 0 if self._active else idle_ticks + 1
                if idle_ticks * TICK_S >= LINGER_S:
                    idle_ticks = 0
                    self._wake.clear()


WATCHDOG = Watchdog()
"""The process-wide watchdog."""


class CpuOnly(Watchdog):
    """A single-use sandbox worker's watchdog: its compute clock (the worker's own CPU
    time: its one thread's, exact under ``RLIMIT_CPU``) and nothing that ticks. A worker starts no thread (ADR 0036): the server reads
    its CPU time and kills it past its budget (``process.py``), which ends a slice stuck in
    a native as surely as a pulse would, and the kernel (``RLIMIT_CPU``, ``_lockdown.py``)
    ends one whose server is gone. A slice that overran is still reported at its end
    (``_engine.py`` compares the CPU it used with its budget)."""

    def __init__(self) -> None:
        super().__init__(time.thread_time)

    def enter(self, ctx: Any, deadline: float, heap: int) -> Slice:
        return Slice(ctx, deadline, heap)

    def leave(self, entry: Slice) -> bool:
        entry.ctx = None
        return False

    def trip(self, entry: Slice) -> None:
        pass
