"""Ends a slice that runs past its budget inside code QuickJS never interrupts.

QuickJS checks the time limit only every 10,000 polls (loop back-edges, calls). Operators
and natives do not poll: a loop of ``%`` on two huge BigInts (≈0.2 s each) runs ≈30 minutes
before its first check, pinning a worker thread long after the run was reported over.
Nothing can interrupt the engine from outside, but its heap limit is a plain field that
every allocation reads: the watchdog drops it to one byte, so the next allocation fails,
the failures unwind quickly and the (already expired) time limit fires at the next check.
A slice that allocates nothing (comparing two huge strings in a loop) still runs until
its next time check; that residue is bounded by the heap size (ADR 0005).

One daemon thread serves every engine. It ticks only while slices are registered.
"""

from __future__ import annotations

import threading
import time
from typing import Any

TICK_S = 0.02
"""How often a registered slice's deadline is checked."""
TRIP_BYTES = 1
"""The heap limit a tripped slice gets: any allocation fails."""


class Slice:
    """One entry into JavaScript, registered while it runs."""

    __slots__ = ("ctx", "deadline", "tripped")

    def __init__(self, ctx: Any, deadline: float) -> None:
        self.ctx = ctx
        self.deadline = deadline
        self.tripped = False


class Watchdog:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._active: dict[int, Slice] = {}
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def enter(self, ctx: Any, deadline: float) -> Slice:
        """Register a slice that must end by ``deadline`` (``time.monotonic()``)."""
        entry = Slice(ctx, deadline)
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
            if id(entry) in self._active:
                self._trip_locked(entry)

    def _trip_locked(self, entry: Slice) -> None:
        if not entry.tripped:
            entry.tripped = True
            # A plain store into the runtime; safe while another thread runs JavaScript.
            entry.ctx.set_memory_limit(TRIP_BYTES)

    def _loop(self) -> None:
        while True:
            self._wake.wait()
            time.sleep(TICK_S)
            now = time.monotonic()
            with self._lock:
                for entry in self._active.values():
                    if now >= entry.deadline:
                        self._trip_locked(entry)
                if not self._active:
                    self._wake.clear()


WATCHDOG = Watchdog()
"""The process-wide watchdog."""
