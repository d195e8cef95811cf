"""A worker's end of its socket: the server's frames, read with one reused buffer, and the
short spin that replaces a sleep while a run awaits a quick tool result (ADR 0042).

A worker that blocks in ``recv`` while the server settles its calls is put to sleep, and
the server's answer must wake it: on a virtual machine whose idle CPUs halt, that wake-up
is an inter-processor interrupt that costs both sides tens of microseconds, more than the
server's own work for a no-op call. When the server says it has a CPU to spare (``W``
instead of ``T``, or ``"spin"`` in a start request), the worker instead polls its socket
for up to ``SPIN_S`` before it blocks.

- Between two reads a poll gives its CPU away (``sched_yield``): the answer may have to
  come from that very CPU (the scheduler put the server there, or a sync tool's thread is
  queued there), and a poll that kept the CPU missed it every time (ADR 0045).
- A poll that finds nothing backs off: the next waits block, twice as many after each
  miss, so a slow tool costs one ``SPIN_S`` now and then.
- A wait that blocked while backing off and still had its answer within ``NEAR_S`` (a sync
  tool answered from a thread, after a moment's scheduling made a poll miss) ends the
  back-off: without that, two or three early misses left a whole run of such calls
  blocking, at about twice the time a call (ADR 0045).
- The spin is the worker's CPU time, charged to its run like the rest; a run spins at most
  ``SPIN_BUDGET_S`` in all, well inside the server's kill grace and the kernel's CPU
  headroom, and the engine's compute budget counts JavaScript slices only, never the spin.

Before its run, an idle worker that the server has told a run is coming (``N``, ADR 0043)
polls for the start request for up to ``EXPECT_S`` instead of sleeping, so that its wake-up
overlaps the server's own work before the request. That poll is before the run is taken,
so it is nobody's CPU time (like a rehearsal's), and it draws on the same budget.
"""

from __future__ import annotations

import os
import socket
import time

SPIN_S = 150e-6
"""The longest a worker polls for one answer before it blocks (a no-op call's answer
arrives in 40-80 µs; one from a thread or an upstream server rarely within this)."""
SPIN_BUDGET_S = 0.05
"""The most CPU time a run spends polling in all (then it only blocks)."""
MAX_BACKOFF = 64
"""After a miss, the number of waits that block before the next poll doubles up to this."""
NEAR_S = 2 * SPIN_S
"""A blocking wait answered within this (a wake-up included) says polling would have paid."""
EXPECT_S = 500e-6
"""The longest an idle worker polls for a start request it was told is coming (the server's
work from a run's start to its request is 0.1-0.3 ms)."""
RECEIVE_BYTES = 1 << 16
_clock = time.perf_counter


class Inbox:
    """Frames (``kind``, ``payload``) from the server, one at a time."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._pending = bytearray()
        self._received = bytearray(RECEIVE_BYTES)
        self._spin_left_s = SPIN_BUDGET_S
        self._backoff = 0
        self._skip = 0
        self.spins = 0
        """Waits that polled (read by tests)."""
        self.hits = 0
        """Polls that found the answer."""

    def read(self, *, spin: bool = False, expect: bool = False) -> tuple[bytes, bytes] | None:
        """The next frame, or ``None`` when the server closed the socket (or broke the
        framing). ``spin``: the server has a CPU to spare and may answer at once.
        ``expect``: a start request is on its way (polled for apart from the back-off)."""
        pending = self._pending
        skipped_at = 0.0
        if not pending:
            if expect:
                self._poll(EXPECT_S, backs_off=False)
            elif spin and not self._poll(SPIN_S, backs_off=True):
                skipped_at = _clock()  # backing off: this wait blocks
        while len(pending) < 4:
            if not self._fill():
                return None
        size = int.from_bytes(pending[:4], "big")
        if size < 1:
            return None
        while len(pending) < 4 + size:
            if not self._fill():
                return None
        kind, payload = bytes(pending[4:5]), bytes(pending[5 : 4 + size])
        del pending[: 4 + size]
        if skipped_at and _clock() - skipped_at <= NEAR_S:
            self._backoff = self._skip = 0  # a poll would have found it: poll again
        return kind, payload

    def _fill(self, flags: int = 0) -> bool:
        received = self._received
        size = self._sock.recv_into(received, RECEIVE_BYTES, flags)
        if not size:
            return False
        self._pending += memoryview(received)[:size]
        return True

    def _poll(self, spin_s: float, *, backs_off: bool) -> bool:
        """Poll the socket for up to ``spin_s`` (unless backing off or out of budget);
        ``False`` when it did not poll because it is backing off."""
        if backs_off and self._skip:
            self._skip -= 1
            return False
        if self._spin_left_s <= 0.0:
            return True
        self.spins += 1
        clock, give_way = _clock, os.sched_yield
        started, cpu_started = clock(), time.thread_time()
        deadline = started + spin_s
        fill = self._fill
        try:
            while True:
                try:
                    fill(socket.MSG_DONTWAIT)  # at the end of the stream too: read() says so
                except BlockingIOError:
                    if clock() < deadline:
                        give_way()
                        continue
                    if backs_off:
                        self._backoff = min(2 * self._backoff or 1, MAX_BACKOFF)
                        self._skip = self._backoff
                    return True
                self.hits += 1
                if backs_off:
                    self._backoff = 0
                return True
        finally:
            self._spin_left_s -= time.thread_time() - cpu_started
